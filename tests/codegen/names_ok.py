"""Values and handlers for names.luma, whose names are keywords in Python."""

from names_types import (
    DbReadInput,
    DbReadInput_,
    Flight,
    GeneratedToolModule,
    ImportInput,
    ImportNeeds,
    Node,
    Ticket,
)
from luma import Signal


def find_flight(input: ImportInput, signal: Signal, needs: ImportNeeds) -> Flight:
    return {
        "from": input["from"],
        "to": needs["lambda"]["id"],
        "class": input.get("class", "economy"),
        "in": input["limit"],
        "__private": False,
    }


def db_read(input: DbReadInput) -> Node:
    return {"label": input["key"], "children": [{"label": "leaf", "children": []}]}


async def db_read_v2(input: DbReadInput_) -> Ticket:
    return {"def": "Promise", "id": input["key"]}


luma_tools: GeneratedToolModule = {
    "import": find_flight,
    "db_read": db_read,
    "dbRead": db_read_v2,
}
