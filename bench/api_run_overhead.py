"""The per-run overhead of the Python API: ``luma.load`` once, then many ``await program.run``.

The program is examples/quickstart.luma with its tool module, and one more agent whose method
makes one direct call (``text_stats``). Three loops run the same call, on one event loop:

- the handler alone;
- the tool pipeline alone (one runtime, ``pipeline.call``: what one direct call costs);
- ``await program.run("Count", text=…)``: a whole run — a new runtime (its telemetry, its
  circuit breakers, its limits), argument validation, the interpreter, the call through the
  pipeline, return validation.

The run's overhead is the difference between the last two. The script also checks that runs
of a loaded program compile nothing, import nothing and build no validator, and times the
quickstart's own agent (a direct call or two and an ``ask`` on the offline model).

    .venv/bin/python bench/api_run_overhead.py [--runs N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import luma
from luma.runtime.engine import CallContext
from luma.schema.validate import SchemaValidator

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart.luma"
TOOLS = ROOT / "examples" / "quickstart_tools.py"

COUNT = """
agent Count {
  tools: [text_stats]

  fn run(text: string) -> TextStats {
    return tool text_stats({ text: text })
  }
}
"""
TEXT = "Luma keeps tool contracts typed"


def load() -> tuple[luma.Program, float]:
    source = QUICKSTART.read_text(encoding="utf-8") + COUNT
    started = time.process_time()
    program = luma.loads(source, path=QUICKSTART, tool_modules=[TOOLS], stderr=io.StringIO())
    return program, time.process_time() - started


async def runs(program: luma.Program, agent: str, n: int) -> tuple[float, float]:
    """CPU and wall seconds per run."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        await program.run(agent, text=TEXT)
    return (time.process_time() - cpu) / n, (time.perf_counter() - wall) / n


async def pipeline_calls(program: luma.Program, n: int) -> float:
    runtime = program.new_runtime()
    ctx = CallContext(None, None, "direct")
    call = runtime.pipeline.call
    started = time.process_time()
    for _ in range(n):
        await call("text_stats", {"text": TEXT}, ctx)
    return (time.process_time() - started) / n


sys.path.insert(0, str(TOOLS.parent))
import quickstart_tools  # type: ignore[import-not-found]  # noqa: E402


async def fresh_runtimes(program: luma.Program, n: int) -> float:
    """Each run with a runtime of its own and nothing shared (schemas compiled, plans and
    validators looked up again): what a run costs when nothing is kept between runs."""
    from luma.runtime.engine import Runtime
    from luma.runtime.interpreter import Interpreter
    from luma.runtime.telemetry import Telemetry

    started = time.process_time()
    for _ in range(n):
        runtime = Runtime(program._program, handlers=program._handlers, config=program.config,
                          telemetry=Telemetry(stderr=io.StringIO()), stderr=io.StringIO(),
                          interactive=False)
        await Interpreter(runtime).call_method("Count", "run", {"text": TEXT})
    return (time.process_time() - started) / n


async def handler_calls(n: int) -> float:
    started = time.process_time()
    for _ in range(n):
        await quickstart_tools.text_stats({"text": TEXT})
    return (time.process_time() - started) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    program, load_cpu = load()

    async def measure() -> dict[str, Any]:
        await program.run("Count", text=TEXT)  # the first run builds the plans
        await program.run("Flow", text=TEXT)
        built = [0]
        original = SchemaValidator.__init__

        def counting(self: Any, *a: Any, **k: Any) -> None:
            built[0] += 1
            original(self, *a, **k)

        SchemaValidator.__init__ = counting  # type: ignore[method-assign]
        modules = len(sys.modules)
        out: dict[str, list[float]] = {"handler": [], "pipeline": [], "run": [], "run_wall": [],
                                       "flow": [], "fresh": []}
        for _ in range(args.rounds):
            out["handler"].append(await handler_calls(args.runs))
            out["pipeline"].append(await pipeline_calls(program, args.runs))
            cpu, wall = await runs(program, "Count", args.runs)
            out["run"].append(cpu)
            out["run_wall"].append(wall)
            out["flow"].append((await runs(program, "Flow", max(1, args.runs // 10)))[0])
        SchemaValidator.__init__ = original  # type: ignore[method-assign]
        for _ in range(args.rounds):  # not counted above: it builds validators on purpose
            out["fresh"].append(await fresh_runtimes(program, args.runs))
        return {"medians": {k: statistics.median(v) * 1e6 for k, v in out.items()},
                "validators": built[0], "imports": len(sys.modules) - modules}

    result = asyncio.run(measure())
    program.close()
    m = result["medians"]
    print(f"luma.load (quickstart + module):               {load_cpu * 1e3:8.1f} ms CPU")
    print(f"handler alone:                                 {m['handler']:8.1f} us CPU")
    print(f"one direct call through the pipeline:          {m['pipeline']:8.1f} us CPU")
    print(f"program.run, an agent making one direct call:  {m['run']:8.1f} us CPU "
          f"({m['run_wall']:.1f} us wall)")
    print(f"  the run's overhead (run - pipeline call):    {m['run'] - m['pipeline']:8.1f} us CPU")
    print(f"program.run of the quickstart's Flow (ask):    {m['flow']:8.1f} us CPU")
    print(f"a run with nothing shared (a new Runtime):     {m['fresh']:8.1f} us CPU")
    print(f"validators built during the timed runs:        {result['validators']:8d}")
    print(f"modules imported during the timed runs:        {result['imports']:8d}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
