"""The rows of ``luma batch`` (docs/batch.md): reading the input and the output of an earlier
run, and running one row on a loaded program, for both engines."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BATCH_INPUT_INVALID = "BATCH_INPUT_INVALID"


def prepare(program: Any, concurrency: int, max_wait: float) -> None:
    """What a batch changes in a loaded program: every running row may be waiting on a model
    at once (one connection each, kept alive), and a 429 holds a row up to ``--max-wait``."""
    program._shared.http_connections = concurrency
    program._shared.rate_limit_hold_s = max_wait


async def run_row(program: Any, agent: str, fn: str, index: int,
                  text: str) -> tuple[dict[str, Any], int, int]:
    """One row: its output line and the tokens its model calls used (in, out)."""
    from luma.api import RunError

    tokens = [0, 0]
    arguments = _parse_arguments(text)
    if isinstance(arguments, str):
        return {"index": index, "ok": False, "error": {
            "code": BATCH_INPUT_INVALID, "message": f"input line {index + 1}: {arguments}"}}, 0, 0

    def count(event: dict[str, Any]) -> None:
        if event["event"] == "ask.response":
            tokens[0] += event.get("tokens_in") or 0
            tokens[1] += event.get("tokens_out") or 0

    try:
        result = await program.call(agent, fn, args=arguments, on_event=count)
        row: dict[str, Any] = {"index": index, "ok": True, "result": result}
    except RunError as exc:
        row = {"index": index, "ok": False, "error": {"code": exc.code, "message": exc.message}}
    return row, tokens[0], tokens[1]


def input_rows(path: Path) -> Iterator[tuple[int, str]]:
    """(index, text) of every line that is not blank; the index is the 0-based line number."""
    with open(path, "rb") as source:
        for index, raw in enumerate(source):
            text = raw.decode("utf-8", errors="replace")
            if text.strip():
                yield index, text


def finished_indices(path: Path) -> set[int]:
    found: set[int] = set()
    with open(path, "rb") as source:
        for raw in source:
            try:
                row = json.loads(raw)
            except ValueError:
                continue  # a row cut short when the last run stopped: it runs again
            if isinstance(row, dict) and type(row.get("index")) is int:
                found.add(row["index"])
    return found


def ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as source:
        source.seek(-1, os.SEEK_END)
        return source.read(1) == b"\n"


def choose_agent(program: Any, agent: str | None, fn: str) -> str | tuple[str]:
    """The agent's name (as a 1-tuple), or the start error's message."""
    agents: dict[str, Any] = program.agents
    if agent is None:
        if len(agents) != 1:
            return (f"the program has {len(agents)} agents; choose one with --agent NAME"
                    if agents else "the program has no agent to run")
        (agent,) = agents
    methods = agents.get(agent)
    if methods is None:
        from luma.syntax.diagnostics import did_you_mean

        hint = did_you_mean(agent, list(agents))
        return f"unknown agent '{agent}'" + (f"; {hint}" if hint else "")
    if fn not in methods:
        return f"agent '{agent}' has no method '{fn}' (its methods: {', '.join(methods) or 'none'})"
    return (agent,)


def _parse_arguments(text: str) -> dict[str, Any] | str:
    from luma.runtime.json_text import loads

    try:
        value = loads(text)
    except ValueError as exc:
        return f"the line is not JSON ({' '.join(str(exc).split())})"
    if not isinstance(value, dict):
        return "the line must be a JSON object (the method's arguments by name)"
    return value
