"""The per-call cost of a ``"sandbox": "process"`` tool module against the same module loaded
in Luma's process (``"sandbox": "strict"``, the checks without the boundary).

Both sides run the same trivial handler through the whole tool pipeline, one call after the
other; the process side adds a JSON line each way over the child's pipes and a wake-up of each
side's event loop.

    .venv/bin/python bench/process_module.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from luma.runtime.config import parse_config
from luma.runtime.engine import CallContext, Runtime
from luma.runtime.manifests import load_program_modules
from luma.runtime.telemetry import Telemetry
from luma.syntax.parse import parse_text

PROGRAM = """
schema Sum {
  result: float
}

tool add(a: float, b: float) -> Sum {
  description: "Add two numbers."
}
"""

MODULE = """
def add(input):
    return {"result": input["a"] + input["b"]}
"""


def build(folder: Path, sandbox: str) -> Runtime:
    program, diagnostics = parse_text(PROGRAM, "bench.luma")
    assert program is not None and not diagnostics, diagnostics
    config = parse_config({"tool_modules": ["./tools.py"],
                           "tool_module_policy": {"sandbox": sandbox}})
    loaded = load_program_modules(folder, config)
    assert not loaded.errors, [e.message for e in loaded.errors]
    return Runtime(program, handlers=dict(loaded.registry.handlers), env={},
                   interactive=False, telemetry=Telemetry())


def children_cpu() -> float:
    """CPU seconds used so far by the running children of this process (the module's)."""
    total = 0.0
    for task in Path("/proc/self/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def timed(runtime: Runtime, calls: int) -> tuple[float, float]:
    """Wall and CPU seconds (this process and its running children) for ``calls`` calls."""
    context = CallContext(None, None, "direct", None)  # type: ignore[arg-type]

    async def run() -> None:
        for i in range(calls):
            await runtime.pipeline.call("add", {"a": i, "b": 1}, context)

    def cpu() -> float:
        me = resource.getrusage(resource.RUSAGE_SELF)
        return me.ru_utime + me.ru_stime + children_cpu()

    start_wall, start_cpu = time.perf_counter(), cpu()
    asyncio.run(run())
    return time.perf_counter() - start_wall, cpu() - start_cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "tools.py").write_text(MODULE, encoding="utf-8")
        runtimes = {"in-process": build(folder, "strict"), "process": build(folder, "process")}
        results: dict[str, list[float]] = {name: [] for name in runtimes}
        cpu: dict[str, list[float]] = {name: [] for name in runtimes}
        for name, runtime in runtimes.items():
            timed(runtime, 200)  # warm up
        for _ in range(args.rounds):
            for name, runtime in runtimes.items():
                wall, used = timed(runtime, args.calls)
                results[name].append(wall / args.calls * 1e6)
                cpu[name].append(used / args.calls * 1e6)
    medians: dict[str, Any] = {name: statistics.median(v) for name, v in results.items()}
    cpus: dict[str, Any] = {name: statistics.median(v) for name, v in cpu.items()}
    for name, value in medians.items():
        print(f"{name:>10}: {value:7.1f} µs per call (wall), {cpus[name]:7.1f} µs of CPU "
              f"(Luma's process and the module's), median of {args.rounds} rounds of "
              f"{args.calls}")
    print(f"  overhead: {medians['process'] - medians['in-process']:7.1f} µs per call (wall), "
          f"{cpus['process'] - cpus['in-process']:7.1f} µs of CPU")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
