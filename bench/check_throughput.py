"""The throughput of ``luma check`` on a large generated corpus, as a whole process.

A corpus of valid contracts (``bench/corpus.py``: schemas, a tagged union, tools with every kind
of configuration, a model, an agent whose methods call tools, branch, loop, catch and ask) is
written to a temporary folder; ``luma check FOLDER`` runs on it ``--runs`` times. For each run
the script records the wall time and the CPU time (user + system, of the process and the worker
processes it waited for). It reports the medians and lines per second.

    .venv/bin/python -m compileall -q luma
    .venv/bin/python bench/check_throughput.py [--lines 100000] [--runs 3] [--workers N]

``luma check`` shares a folder of much source among worker processes, one per idle CPU (the
usable CPUs less the load average's share); ``--workers N`` runs it with that number fixed
(1: one process alone).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

FIXED = ("import sys; import luma.compile as c; c._idle_cpus = lambda: {workers}; "
         "from luma.cli import main; sys.exit(main(sys.argv[1:]))")


def run_once(argv: list[str]) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds, exit status, last line of stderr) of one whole process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    last = err.strip().splitlines()[-1] if err.strip() else ""
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode, last


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000, help="corpus size (default 100000)")
    parser.add_argument("--runs", type=int, default=3, help="runs (default 3)")
    parser.add_argument("--workers", type=int, help="processes to use (default: as luma check "
                                                    "decides; 1: one process)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "corpus"
        lines = corpus.generate(folder, args.lines)
        files = len(list(folder.glob("*.luma")))
        prefix = [sys.executable, "-m", "luma"] if args.workers is None else \
            [sys.executable, "-c", FIXED.format(workers=args.workers)]
        argv = [*prefix, "check", str(folder)]
        load = os.getloadavg()
        walls, cpus = [], []
        for _ in range(args.runs):
            wall, cpu, code, last = run_once(argv)
            if code != 0:
                raise SystemExit(f"luma check exited with {code}: {last}")
            walls.append(wall)
            cpus.append(cpu)

    print(f"python: {sys.executable} ({sys.version.split()[0]})")
    print(f"cores: {os.cpu_count()}, load average before: "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, after: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"corpus: {lines} lines in {files} files; luma check says: {last}")
    try:
        from luma.compile import _idle_cpus

        idle = str(_idle_cpus())
    except ImportError:  # a luma without a worker pool
        idle = "no pool"
    chosen = f"as luma check decides (idle CPUs now: {idle})" if args.workers is None \
        else f"{args.workers} fixed"
    print(f"workers: {chosen}, runs: {args.runs}")
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(f"wall median {wall:.2f} s (min {min(walls):.2f}, max {max(walls):.2f})   "
          f"CPU median {cpu:.2f} s (min {min(cpus):.2f}, max {max(cpus):.2f})")
    print(f"throughput: {lines / wall:,.0f} lines/s of wall time, "
          f"{lines / cpu:,.0f} lines per CPU second")
    return 0


if __name__ == "__main__":
    sys.exit(main())
