"""Telemetry keeps a bounded history: a long run streams every event to ``--trace`` and keeps
only the latest ``HISTORY`` in memory, so memory stays flat in the number of calls."""

from __future__ import annotations

import asyncio
import json

from luma.runtime.telemetry import HISTORY
from runtime.harness import context, program, runtime

PROGRAM = """
schema Out { n: int @range(0, 0) @severity("soft") }
tool count(n: int) -> Out { description: "Echo n." }
"""
CALLS = 10_000


def test_a_10k_call_loop_keeps_a_bounded_history_and_traces_every_event(tmp_path) -> None:
    trace = tmp_path / "trace.jsonl"
    rt = runtime(program(PROGRAM), {"count": lambda input: {"n": input["n"]}}, trace=str(trace))

    async def loop() -> None:
        ctx = context(rt)
        for i in range(CALLS):
            await rt.pipeline.call("count", {"n": i}, ctx)

    asyncio.run(loop())
    rt.telemetry.close()
    # with a trace each call is a tool.start and a tool.call event; each call but the first
    # breaks the soft rule: one warning
    assert rt.telemetry.emitted == 3 * CALLS - 1
    events = rt.telemetry.events
    assert len(events) == HISTORY
    assert events[-1]["event"] == "tool.call" and events[-2]["message"] == (
        f"count.output.n: {CALLS - 1} is greater than the maximum of 0")
    assert len(rt.warnings) == HISTORY
    lines = trace.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 * CALLS - 1
    assert sum(1 for line in lines if json.loads(line)["event"] == "tool.call") == CALLS
    assert sum(1 for line in lines if json.loads(line)["event"] == "tool.start") == CALLS
    assert rt.stderr.getvalue().count("warning[SOFT_RULE]") == CALLS - 1


def test_a_run_nobody_watches_emits_no_start_events_and_keeps_no_values() -> None:
    rt = runtime(program(PROGRAM), {"count": lambda input: {"n": 0}})

    async def loop() -> None:
        ctx = context(rt)
        for i in range(100):
            await rt.pipeline.call("count", {"n": i}, ctx)

    asyncio.run(loop())
    assert rt.telemetry.emitted == 100  # one tool.call a call, nothing more
    assert all(e["event"] == "tool.call" and "input" not in e and "result" not in e
               for e in rt.telemetry.events)
