"""Handlers for db_write of tools.luma that the runtime would call wrongly: every one of them
must be rejected as a DbWriteHandler by mypy --strict."""

from luma import Signal
from tools_types import DbResult, DbWriteHandler, DbWriteInput, DbWriteNeeds


def needs_in_signals_place(input: DbWriteInput, deps: DbWriteNeeds) -> DbResult:
    # the second parameter is not named needs, so the runtime passes the signal there
    return {"ok": deps["db"]["port"] > 0}


def one_more(input: DbWriteInput, signal: Signal, needs: DbWriteNeeds, extra: int) -> DbResult:
    return {"ok": extra > 0}


def wrong_needs(input: DbWriteInput, needs: dict[str, int]) -> DbResult:
    return {"ok": needs["db"] > 0}


def wrong_result(input: DbWriteInput, needs: DbWriteNeeds) -> dict[str, bool]:
    return {"ok": True}


first: DbWriteHandler = needs_in_signals_place
second: DbWriteHandler = one_more
third: DbWriteHandler = wrong_needs
fourth: DbWriteHandler = wrong_result
