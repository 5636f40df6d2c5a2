"""Handlers for tests/luma_test/orders.luma."""


def find_orders(input):
    return {"orders": [{"id": "o-1", "status": "open"}]}


def cancel_order(input):
    return {"id": input["order_id"], "status": "shipped"}
