"""A handler for a tool that returns the tagged union Document, but without the tag."""

from tools_types import ClassifyInput, Document


def classify(input: ClassifyInput) -> Document:
    return {"invoice_number": input["text"]}
