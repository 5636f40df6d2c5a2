"""Handlers for pipeline.luma (loaded with the real tool-module loader)."""

from luma.runtime.errors import LumaToolError


def calculate(input):
    if input["operation"] == "add":
        return {"result": input["a"] + input["b"]}
    return {"result": input["a"] * input["b"]}


async def text_stats(input):
    return {"characters": len(input["text"]), "words": len(input["text"].split()),
            "limit": input["limit"]}


def classify(input):
    if input["text"] == "untagged":
        return {"invoice_number": "A-1"}
    if input["text"].startswith("receipt"):
        return {"kind": "Receipt", "reference": "R-7"}
    return {"kind": "Invoice", "invoice_number": "A-1"}


def file_document(input):
    doc = input["doc"]
    return {"kind": doc["kind"], "id": doc.get("invoice_number") or doc.get("reference")}


def score_text(input):
    return {"score": 120 if input["text"] == "too much" else 50}


def db_write(input, signal=None, needs=None):
    return {"ok": True, "table": input["table"]}


def db_query(input, needs):
    return {"ok": needs["db"]["port"] > 0, "table": input["table"]}


def broken(input):
    raise ValueError("Unsupported\noperation")


def typed_error(input):
    raise LumaToolError(code=input["code"], message="The database timed out",
                        retryable=input["retryable"], details={"table": "t"}, status=503)


def bad_typed_error(input):
    raise LumaToolError(code=input["code"], message="bad", unexpected_field=1)
