"""Handlers for examples/cookbook/documents.luma. A tagged-union result must carry its tag:
nothing writes `kind` for the handler."""


def classify(input):
    if "invoice" in input["text"].lower():
        return {"kind": "Invoice", "invoice_number": "A-1", "total": 120.0}
    if "memo" in input["text"].lower():
        return {"reference": "M-1"}  # forgot the tag: the runtime refuses this result
    return {"kind": "Receipt", "reference": "R-1"}


def file_document(input):
    document = input["document"]
    return {"folder": f"{document['kind'].lower()}s/{document.get('reference', '-')}"}
