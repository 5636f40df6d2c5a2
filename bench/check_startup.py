"""The start-up cost of ``luma check`` on one small file, against a bare ``python -c pass``.

Three commands run from the same interpreter as whole processes, alternately, ``--runs`` times
each: ``python -c pass``, the ``luma`` command (the script pip writes beside the interpreter,
which is what a user types) and ``python -m luma``. The interpreter is by default by default that of ``bench/.venv-wheel``, a fresh venv with the wheel of this checkout
installed, which the script builds (``bench/venvs.py``), as a user has Luma; with ``--dev`` the
interpreter running this script (the project's venv, an editable install). For each run the script
records the wall time and the CPU time (user + system, from the child's resource usage, so
other processes on the machine do not count). It reports the medians and the ratios of the
CPU medians to that of ``python -c pass``, the figure that matters on a busy machine.

The commands run with ``PYTHONDONTWRITEBYTECODE`` unset, as users have it; ``--no-bytecode``
sets it (for the wheel venv this changes nothing, pip compiled the bytecode; for the project
venv it means every module is compiled at every start).

    python3 bench/check_startup.py [--runs N] [--file F.luma] [--dev]

Without ``--file`` a small valid contract (two schemas, a tool, a model, an agent with one
method) is written to a temporary folder.
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

# the program checked: small, clean, a little of everything the checker looks at
SMALL = (Path(__file__).parent / "startup.luma").read_text(encoding="utf-8")


def run_once(argv: list[str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit status) of one whole process. It runs in the temporary
    folder: ``python -m`` puts its working folder first on the path, and from the checkout it
    would import the sources there instead of the installed package."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def measure(commands: dict[str, list[str]], runs: int) -> dict[str, tuple[list[float], list[float]]]:
    results: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in commands}
    for name, argv in commands.items():  # one unmeasured run each: the file cache is warm
        run_once(argv)
    for _ in range(runs):
        for name, argv in commands.items():
            wall, cpu, code = run_once(argv)
            if code not in (0, 1):
                raise SystemExit(f"{' '.join(argv)} exited with {code}")
            results[name][0].append(wall)
            results[name][1].append(cpu)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs of each command (default 30)")
    parser.add_argument("--file", help="the .luma file to check (default: a small contract)")
    parser.add_argument("--dev", action="store_true",
                        help="run this interpreter, not the one of bench/.venv-wheel")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="run with PYTHONDONTWRITEBYTECODE=1")
    args = parser.parse_args()
    if args.no_bytecode:
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if args.dev:
        python = sys.executable
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from venvs import wheel_python

        python = str(wheel_python())

    with tempfile.TemporaryDirectory() as tmp:
        target = args.file
        if target is None:
            target = str(Path(tmp) / "small.luma")
            Path(target).write_text(SMALL, encoding="utf-8")
        script = str(Path(python).parent / "luma")
        commands = {
            "python -c pass": [python, "-c", "pass"],
            "luma check": [script, "check", target],
            "python -m luma check": [python, "-m", "luma", "check", target],
        }
        load = os.getloadavg()
        results = measure(commands, args.runs)

    print(f"python: {python} ({sys.version.split()[0]})")
    print(f"cores: {os.cpu_count()}, load average before: "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, after: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"runs: {args.runs} of each, alternating")
    medians: dict[str, float] = {}
    for name, (walls, cpus) in results.items():
        medians[name] = statistics.median(cpus)
        print(f"{name:16} wall median {statistics.median(walls) * 1000:7.1f} ms   "
              f"CPU median {statistics.median(cpus) * 1000:7.1f} ms   "
              f"(CPU min {min(cpus) * 1000:.1f}, max {max(cpus) * 1000:.1f})")
    bare = medians["python -c pass"]
    for name in ("luma check", "python -m luma check"):
        print(f"{name}: {medians[name] / bare:.2f}x python -c pass (CPU medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
