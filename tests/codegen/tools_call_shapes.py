"""Handlers for db_write of tools.luma in every shape the runtime calls: each fits
DbWriteHandler under mypy --strict, and each runs (tests/test_codegen_python.py)."""

from luma import Signal
from tools_types import DbResult, DbWriteHandler, DbWriteInput, DbWriteNeeds


def _result(input: DbWriteInput, signal: Signal | None, needs: DbWriteNeeds | None) -> DbResult:
    ok = input["table"] == "t" and (signal is None or not signal.aborted)
    return {"ok": ok and (needs is None or needs["db"]["port"] > 0)}


def input_only(input: DbWriteInput) -> DbResult:
    return _result(input, None, None)


def input_signal(input: DbWriteInput, signal: Signal) -> DbResult:
    return _result(input, signal, None)


def input_signal_needs(input: DbWriteInput, signal: Signal, needs: DbWriteNeeds) -> DbResult:
    return _result(input, signal, needs)


def input_needs(input: DbWriteInput, needs: DbWriteNeeds) -> DbResult:
    return _result(input, None, needs)


def input_needs_signal(input: DbWriteInput, needs: DbWriteNeeds, signal: Signal) -> DbResult:
    return _result(input, signal, needs)


def other_names(data: DbWriteInput, sig: Signal, deps: DbWriteNeeds) -> DbResult:
    return _result(data, sig, deps)


def keyword_needs(input: DbWriteInput, *, needs: DbWriteNeeds) -> DbResult:
    return _result(input, None, needs)


def keyword_signal(input: DbWriteInput, *, signal: Signal) -> DbResult:
    return _result(input, signal, None)


def all_optional(
    input: DbWriteInput, signal: Signal | None = None, needs: DbWriteNeeds | None = None
) -> DbResult:
    return _result(input, signal, needs)


async def async_needs(input: DbWriteInput, needs: DbWriteNeeds) -> DbResult:
    return _result(input, None, needs)


HANDLERS: list[DbWriteHandler] = [
    input_only,
    input_signal,
    input_signal_needs,
    input_needs,
    input_needs_signal,
    other_names,
    keyword_needs,
    keyword_signal,
    all_optional,
    async_needs,
]
