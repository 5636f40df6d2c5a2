"""A tool module for tools.luma that fits every contract: mypy --strict accepts it."""

from luma import Signal
from tools_types import (
    CalcResult,
    CalculateInput,
    ClassifyInput,
    ClassifyNeeds,
    DbResult,
    DbWriteInput,
    DbWriteNeeds,
    Document,
    GeneratedToolModule,
    TextStats,
    TextStatsInput,
)


def calculate(input: CalculateInput) -> CalcResult:
    if input["operation"] == "add":
        return {"result": input["a"] + input["b"]}
    return {"result": input["a"] * input["b"]}


async def text_stats(input: TextStatsInput) -> TextStats:
    return {"characters": len(input["text"]), "words": len(input["text"].split())}


def db_write(input: DbWriteInput, signal: Signal, needs: DbWriteNeeds) -> DbResult:
    signal.throw_if_aborted()
    db = needs["db"]
    written = 1 if input["mode"] == "insert" and db["port"] > 0 else 0
    return {"ok": True, "rows_written": written}


async def classify(
    input: ClassifyInput, signal: Signal | None = None, needs: ClassifyNeeds | None = None
) -> Document:
    if "receipt" in input["text"]:
        return {"kind": "Receipt", "reference": "R-1", "items": [{"name": "tea", "price": 2}]}
    return {"kind": "Invoice", "invoice_number": "A-1"}


luma_tools: GeneratedToolModule = {
    "calculate": calculate,
    "text_stats": text_stats,
    "db_write": db_write,
    "classify": classify,
}
