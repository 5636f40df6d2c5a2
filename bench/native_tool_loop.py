"""A native tool loop of 1,000 tool calls against a loopback OpenAI-compatible server: Luma's
overhead per tool call, and pydantic-ai's on the same server in the same run.

One server process (``bench/native_tool_loop_server.py``) answers both clients. Its model
``loop-TxK`` asks for ``K`` calls to ``add(a, b)`` per turn for ``T`` turns, then answers with
the final JSON ``{"calls", "total"}``, which each client validates against its answer type; the
total is checked here, so a lost or garbled tool result fails the benchmark. The server keeps
its own time per request; a client's overhead is its wall time minus that server time.

- Luma runs in this process: a ``.luma`` program written to a temporary folder (a model with
  ``provider: "openai"`` and ``base_url`` on the loopback server, an agent with the tool,
  ``tool_rate_limit`` above the loop's length and ``tool_concurrency: 10``, an async Python
  handler), run through ``run_checked`` as ``luma run`` would after compiling it. The timing
  covers preparing the runtime (tool module, handlers, schemas) and the whole run.
- pydantic-ai runs in its own venv, ``bench/.venv-pydantic-ai`` (created here from
  ``bench/requirements-pydantic-ai.txt`` when missing or out of date), as a long-lived worker
  (``bench/native_tool_loop_pydantic_ai.py``) whose timing covers building the agent and the
  whole run. Its tools run concurrently within a turn, as Luma's do with ``tool_concurrency``.

Both sides are warmed up first, then run in interleaved rounds (the order flips every round).
Medians are reported; CPU time is the client process's own (the server is another process).

    .venv/bin/python bench/native_tool_loop.py [--rounds 3] [--shapes 100x10,1000x1]
        [--skip-pydantic-ai] [--json FILE]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv-pydantic-ai"
REQUIREMENTS = HERE / "requirements-pydantic-ai.txt"
SERVER = HERE / "native_tool_loop_server.py"
WORKER = HERE / "native_tool_loop_pydantic_ai.py"
API_KEY_ENV = "LUMA_BENCH_OPENAI_KEY"
API_KEY = "sk-bench-not-a-real-key"
PROMPT = ("Call add as many times as you are told, then report how many calls you made and the "
          "total.")
TOOL_CONCURRENCY = 10
WARM_UP = "10x10"

PROGRAM_HEAD = """\
schema Sum {
  result: int
}

schema Answer {
  calls: int
  total: int
}

tool add(a: int, b: int) -> Sum {
  description: "Add two integers."
  side_effects: "none"
}
"""

PROGRAM_SHAPE = """
model Loop{shape} {{
  provider: "openai"
  name: "loop-{shape}"
  base_url: "{base_url}"
  api_key_env: "{key_env}"
  max_retries: 0
}}

agent Looper{shape} {{
  model: Loop{shape}
  tools: [add]
  tool_rate_limit: 100000
  tool_concurrency: {concurrency}

  fn run() -> Answer {{
    return ask "{prompt}" -> Answer
  }}
}}
"""

HANDLERS = '''\
async def add(input):
    return {"result": input["a"] + input["b"]}
'''


@dataclass(frozen=True, slots=True)
class Shape:
    turns: int
    per_turn: int

    @classmethod
    def parse(cls, text: str) -> Shape:
        turns, _, per_turn = text.partition("x")
        return cls(int(turns), int(per_turn))

    @property
    def name(self) -> str:
        return f"{self.turns}x{self.per_turn}"

    @property
    def calls(self) -> int:
        return self.turns * self.per_turn

    @property
    def expected(self) -> dict[str, int]:
        t, k = self.turns, self.per_turn
        return {"calls": t * k, "total": k * t * (t - 1) // 2 + t * k * (k - 1) // 2}


@dataclass(frozen=True, slots=True)
class Run:
    side: str
    shape: str
    round: int
    calls: int
    requests: int
    request_bytes: int
    wall_s: float
    cpu_s: float
    server_s: float
    server_cpu_s: float

    @property
    def overhead_us(self) -> float:
        return (self.wall_s - self.server_s) / self.calls * 1e6


# ------------------------------------------------------------------------------ the server
class Server:
    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().split()
        if len(line) != 2 or line[0] != "PORT":
            self.stop()
            raise SystemExit(f"the loopback server did not start: {line!r}")
        self.root = f"http://127.0.0.1:{line[1]}"

    @property
    def base_url(self) -> str:
        return self.root + "/v1"

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.root + "/stats", timeout=10) as response:
            stats: dict[str, Any] = json.load(response)
            return stats

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()        # the server stops when its stdin closes
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def measured(side: str, shape: Shape, round_: int, server: Server, go: Any) -> Run:
    """Run ``go()`` (which returns the client's wall, CPU and output) between two readings of
    the server's clock, and check the answer."""
    before = server.stats()
    wall, cpu, output = go()
    after = server.stats()
    if output != shape.expected:
        raise SystemExit(f"{side} answered {output!r} for {shape.name}, expected "
                         f"{shape.expected!r}")
    return Run(side, shape.name, round_, shape.calls, after["requests"] - before["requests"],
               after["request_bytes"] - before["request_bytes"], wall, cpu,
               after["server_s"] - before["server_s"],
               after["server_cpu_s"] - before["server_cpu_s"])


# -------------------------------------------------------------------------------- Luma
class LumaSide:
    def __init__(self, folder: Path, server: Server, shapes: list[Shape]) -> None:
        from luma.compile import check_file

        program = folder / "native_tool_loop.luma"
        text = PROGRAM_HEAD + "".join(
            PROGRAM_SHAPE.format(shape=s.name, base_url=server.base_url, key_env=API_KEY_ENV,
                                 concurrency=TOOL_CONCURRENCY, prompt=PROMPT)
            for s in shapes)
        program.write_text(text, encoding="utf-8")
        self.module = folder / "native_tool_loop_tools.py"
        self.module.write_text(HANDLERS, encoding="utf-8")
        self.checked = check_file(program)
        if self.checked.has_errors:
            raise SystemExit("the benchmark program does not compile: " + "; ".join(
                d.message for d in self.checked.diagnostics))
        os.environ[API_KEY_ENV] = API_KEY

    def run(self, shape: Shape) -> tuple[float, float, Any]:
        from luma.cli_run import RunOptions, run_checked

        out, err = io.StringIO(), io.StringIO()
        options = RunOptions(tool_modules=[str(self.module)], agent=f"Looper{shape.name}")
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        code = run_checked(self.checked, options, stdout=out, stderr=err)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if code != 0:
            raise SystemExit(f"the Luma run failed (exit {code}): {err.getvalue().strip()}")
        return wall, cpu, json.loads(out.getvalue())


# -------------------------------------------------------------------------- pydantic-ai
def venv_python() -> Path:
    return VENV / "bin" / "python"


def ensure_venv(log: IO[str]) -> None:
    """Create ``bench/.venv-pydantic-ai`` from the pinned requirements when it is missing or
    was made from other requirements."""
    wanted = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    stamp = VENV / ".requirements-sha256"
    if venv_python().exists() and stamp.exists() and stamp.read_text().strip() == wanted:
        return
    log.write(f"creating {VENV.relative_to(HERE.parent)} from {REQUIREMENTS.name} ...\n")
    log.flush()
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--clear", str(VENV)], check=True)
    subprocess.run([str(venv_python()), "-m", "pip", "install", "--quiet", "-r",
                    str(REQUIREMENTS)], check=True)
    stamp.write_text(wanted + "\n")


class PydanticAISide:
    def __init__(self, server: Server) -> None:
        self.process = subprocess.Popen(
            [str(venv_python()), str(WORKER), "--base-url", server.base_url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        hello = self._read()
        self.versions: dict[str, str] = hello["versions"]

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the pydantic-ai worker stopped (exit {self.process.wait()})")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def run(self, shape: Shape) -> tuple[float, float, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"model": f"loop-{shape.name}"}) + "\n")
        self.process.stdin.flush()
        reply = self._read()
        if "error" in reply:
            raise SystemExit(f"the pydantic-ai run failed: {reply['error']}")
        return reply["wall_s"], reply["cpu_s"], reply["output"]

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


# ------------------------------------------------------------------------------ report
def median(runs: list[Run], key: Callable[[Run], float]) -> float:
    return statistics.median(key(r) for r in runs)


def summary(runs: list[Run], sides: list[str], shapes: list[Shape]) -> list[str]:
    lines = ["| shape | client | requests | MB sent | wall / call | server / call | "
             "overhead / call | CPU / call | overhead, each round |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    ratios = []
    for shape in shapes:
        overheads = {}
        for side in sides:
            mine = [r for r in runs if r.side == side and r.shape == shape.name]
            if not mine:
                continue
            n = shape.calls
            overheads[side] = median(mine, lambda r: r.overhead_us)
            cpu = median(mine, lambda r: r.cpu_s / n * 1e6)
            each = ", ".join(f"{r.overhead_us:,.0f}" for r in mine)
            lines.append(
                f"| {shape.name} | {side} | {mine[0].requests} | "
                f"{mine[0].request_bytes / 1e6:,.1f} | "
                f"{median(mine, lambda r: r.wall_s / n * 1e6):,.0f} µs | "
                f"{median(mine, lambda r: r.server_s / n * 1e6):,.0f} µs | "
                f"{overheads[side]:,.0f} µs | {cpu:,.0f} µs | {each} |")
        if len(overheads) == 2:
            luma, other = overheads["Luma"], overheads["pydantic-ai"]
            cpu_l = median([r for r in runs if r.side == "Luma" and r.shape == shape.name],
                           lambda r: r.cpu_s)
            cpu_p = median([r for r in runs if r.side == "pydantic-ai" and r.shape == shape.name],
                           lambda r: r.cpu_s)
            ratios.append(f"{shape.name}: overhead Luma / pydantic-ai = {luma / other:.3f} "
                          f"(CPU {cpu_l / cpu_p:.3f})")
    return lines + [""] + ratios


def machine() -> dict[str, Any]:
    return {"cores": os.cpu_count(), "load": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(), "platform": platform.platform()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", default="100x10,1000x1",
                        help="comma-separated TURNSxCALLS_PER_TURN (default 100x10,1000x1)")
    parser.add_argument("--skip-pydantic-ai", action="store_true")
    parser.add_argument("--json", help="also write every run as JSON to this file")
    args = parser.parse_args()
    shapes = [Shape.parse(s) for s in args.shapes.split(",")]
    log = sys.stderr

    if not args.skip_pydantic_ai:
        ensure_venv(log)
    started = machine()
    server = Server()
    other: PydanticAISide | None = None
    runs: list[Run] = []
    try:
        with tempfile.TemporaryDirectory(prefix="luma-bench-") as folder:
            warm = Shape.parse(WARM_UP)
            luma = LumaSide(Path(folder), server, [*shapes, warm])
            sides: dict[str, Any] = {"Luma": luma.run}
            if not args.skip_pydantic_ai:
                other = PydanticAISide(server)
                sides["pydantic-ai"] = other.run
            for name, go in sides.items():   # imports, lazy set-up, first connections
                measured(name, warm, 0, server, lambda go=go: go(warm))
            order = list(sides)
            for round_ in range(1, args.rounds + 1):
                for shape in shapes:
                    for name in order:
                        run = measured(name, shape, round_, server,
                                       lambda go=sides[name], shape=shape: go(shape))
                        runs.append(run)
                        log.write(f"round {round_} {shape.name:>7} {name:<11} "
                                  f"wall {run.wall_s:8.3f} s  cpu {run.cpu_s:8.3f} s  "
                                  f"server {run.server_s:6.3f} s  "
                                  f"overhead {run.overhead_us:9,.0f} µs/call\n")
                        log.flush()
                order.reverse()
    finally:
        if other is not None:
            other.stop()
        server.stop()
    ended = machine()

    versions = {"luma": version("luma"), "httpx (Luma)": version("httpx")}
    if other is not None:
        versions.update(other.versions)
    print(f"machine: {started['cores']} cores, {started['platform']}, Python {started['python']}")
    print(f"load average (1, 5, 15 min): at start {started['load']}, at end {ended['load']}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print(f"rounds: {args.rounds}, Luma tool_concurrency: {TOOL_CONCURRENCY}; medians below; "
          "overhead = (wall - server) / calls; CPU = the client process's own")
    print()
    for line in summary(runs, list(sides), shapes):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"machine_start": started, "machine_end": ended, "versions": versions,
             "runs": [asdict(r) | {"overhead_us": r.overhead_us} for r in runs]}, indent=2)
            + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
