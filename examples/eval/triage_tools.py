"""Handlers for examples/eval/triage.luma: a small, fixed data set."""

ORDERS = {
    "c-100": [{"id": "o-55", "status": "cancelled"}, {"id": "o-56", "status": "shipped"}],
    "c-200": [{"id": "o-70", "status": "delivered"}],
    "c-300": [{"id": "o-81", "status": "open"}],
    "c-410": [{"id": "o-90", "status": "shipped"}],
}
INVOICES = {
    "INV-3": {"id": "INV-3", "amount": 120.0, "paid": True},
    "INV-7": {"id": "INV-7", "amount": 49.5, "paid": True},
    "INV-9": {"id": "INV-9", "amount": 15.0, "paid": False},
}


def find_orders(input):
    return {"orders": ORDERS.get(input["customer_id"], [])}


def get_invoice(input):
    invoice = INVOICES.get(input["invoice_id"])
    if invoice is None:
        raise LookupError(f"no invoice {input['invoice_id']}")
    return invoice


def open_ticket(input):
    return {"id": f"T-{input['team'][:3].upper()}-1"}
