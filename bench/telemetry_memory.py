"""Peak memory of a run against its number of tool calls: N direct calls through the pipeline,
each emitting a ``tool.call`` event, with and without ``--trace``.

Each N runs in a fresh child process, so its peak resident set size (``ru_maxrss``) is its own.
Memory should stay flat in N: the trace is streamed and only the last ``telemetry.HISTORY``
events stay in memory.

    .venv/bin/python bench/telemetry_memory.py [--calls 10000 100000 1000000] [--trace]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

from luma.runtime.engine import CallContext, Runtime
from luma.runtime.telemetry import Telemetry
from luma.syntax.parse import parse_text

PROGRAM = """
schema CalcResult {
  result: float
}

tool calculate(a: float, b: float) -> CalcResult {
  description: "Add two numbers."
  side_effects: "none"
}
"""


def calculate(input: dict[str, Any]) -> dict[str, Any]:
    return {"result": input["a"] + input["b"]}


def child(calls: int, trace: str | None) -> dict[str, Any]:
    program, diagnostics = parse_text(PROGRAM, "bench.luma")
    assert program is not None and not diagnostics, diagnostics
    telemetry = Telemetry(trace)
    runtime = Runtime(program, handlers={"calculate": calculate}, env={}, interactive=False,
                      telemetry=telemetry)
    ctx = CallContext(None, None, "direct")
    value = {"a": 2, "b": 3}

    async def loop() -> None:
        call = runtime.pipeline.call
        for _ in range(calls):
            await call("calculate", value, ctx)

    started = time.perf_counter()
    asyncio.run(loop())
    seconds = time.perf_counter() - started
    telemetry.close()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"calls": calls, "trace": trace is not None, "peak_rss_mb": round(peak_kib / 1024, 1),
            "kept_events": len(telemetry.events), "emitted": telemetry.emitted,
            "seconds": round(seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--trace", action="store_true", help="also stream every event to a file")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-trace", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.child_trace)))
        return
    print(f"{'calls':>9} {'trace':>6} {'peak RSS':>10} {'kept':>6} {'seconds':>8}")
    for calls in args.calls:
        for trace in ([False, True] if args.trace else [False]):
            with tempfile.TemporaryDirectory() as tmp:
                command = [sys.executable, __file__, "--child", str(calls)]
                if trace:
                    command += ["--child-trace", os.path.join(tmp, "trace.jsonl")]
                done = subprocess.run(command, capture_output=True, text=True, check=True)
            row = json.loads(done.stdout)
            print(f"{row['calls']:>9} {'yes' if row['trace'] else 'no':>6} "
                  f"{row['peak_rss_mb']:>7} MB {row['kept_events']:>6} {row['seconds']:>8}")


if __name__ == "__main__":
    main()
