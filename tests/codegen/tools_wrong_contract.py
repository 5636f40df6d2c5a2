"""Handlers that are valid Python but do not fit their contracts: luma_tools must be rejected.

calculate is declared to return a plain dict instead of CalcResult; db_write takes its needs as
a dict of ints instead of DbWriteNeeds. The other two fit.
"""

from tools_types import (
    ClassifyInput,
    Document,
    DbResult,
    CalculateInput,
    DbWriteInput,
    GeneratedToolModule,
    TextStats,
    TextStatsInput,
)

from luma import Signal


def calculate(input: CalculateInput) -> dict[str, float]:
    return {"result": input["a"] + input["b"]}


def db_write(input: DbWriteInput, signal: Signal, needs: dict[str, int]) -> DbResult:
    return {"ok": needs["db"] > 0}


def text_stats(input: TextStatsInput) -> TextStats:
    return {"characters": len(input["text"]), "words": 1}


def classify(input: ClassifyInput) -> Document:
    return {"kind": "Invoice", "invoice_number": input["text"]}


luma_tools: GeneratedToolModule = {
    "calculate": calculate,
    "text_stats": text_stats,
    "db_write": db_write,
    "classify": classify,
}
