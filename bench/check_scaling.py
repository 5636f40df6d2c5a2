"""How ``luma check`` grows with its input: N declarations, and one long string literal.

For each N (default 1,000, 5,000, 20,000 and 80,000) the script writes one file of N two-field
schemas and checks it with ``python -m luma check FILE`` as a whole process; for each size of
string (default 1 and 5 MB) one file holding a single string literal of that size; for each
number of contracts (default 100, 400 and 1,600) one file of that many generated contracts
(``bench/corpus.py``: schemas with annotations, defaults and examples, a tagged union, tools of
every kind of configuration, a model, an agent whose methods call tools, branch, loop, catch
and ask), where the checker does more than look at two fields. Each run
records the wall time, the CPU time (user + system of the process, from ``os.wait4``) and the
peak resident memory (``ru_maxrss``, from a separate run: see ``LAUNCHER``). Medians of ``--runs`` runs are reported, with:

- the CPU time per 1,000 declarations, start-up left out (the CPU of checking one schema);
- the slope between two sizes, log(t2 / t1) / log(N2 / N1) of the CPU times less the start-up:
  1.0 is linear, 2.0 quadratic;
- for a string, the peak memory above the start-up's, per byte of the file.

Luma runs from ``bench/.venv-wheel``, a fresh venv with the wheel of this checkout installed,
which the script builds (``bench/venvs.py``); ``--dev`` runs the interpreter running the script
instead. Where ``baml-py`` installs (``bench/.venv-baml``, pinned in
``bench/requirements-baml.txt``), ``baml-cli check`` runs on the same N written as BAML
classes (``class S1 { a string  b int }``) in the same run, alternating with Luma, with
``RUST_BACKTRACE`` unset (set, it slows ``baml-cli`` down about twice).

    python3 bench/check_scaling.py [--runs 3] [--sizes 1000,5000,20000,80000] [--strings 1,5]
        [--contracts 100,400,1600] [--dev] [--no-baml]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import TEMPLATE  # noqa: E402
from venvs import baml_cli, wheel_python  # noqa: E402


@dataclass
class Measured:
    wall_s: float
    cpu_s: float
    peak_mb: float


# Linux keeps a process's peak memory across exec, and a child starts as a copy of the
# process that forked it: a command started from this script would count this script's memory
# as its own. The memory is measured on a separate run, forked from this small launcher (a bare
# interpreter, smaller than anything measured), which writes the command's peak to a file.
LAUNCHER = """\
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def peak_mb(argv: list[str], env: dict[str, str] | None = None) -> float:
    with tempfile.NamedTemporaryFile("r", suffix=".maxrss") as out:
        run_once([sys.executable, "-S", "-c", LAUNCHER, out.name, *argv], env)
        return int(out.read()) / 1024


def run_once(argv: list[str], env: dict[str, str] | None = None) -> Measured:
    start = time.perf_counter()
    # in the temporary folder: ``python -m`` puts its working folder first on the path, and
    # from the checkout it would import the sources there instead of the installed package
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env, cwd=tempfile.gettempdir())
    assert proc.stderr is not None
    errors = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(argv)} exited with {code}: {errors.decode()[-2000:]}")
    return Measured(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def median(runs: list[Measured], peak: float) -> Measured:
    return Measured(statistics.median(r.wall_s for r in runs),
                    statistics.median(r.cpu_s for r in runs), peak)


def luma_schemas(n: int) -> str:
    return "".join(f"schema S{i} {{\n  a: string\n  b: int\n}}\n\n" for i in range(n))


def baml_classes(n: int) -> str:
    return "".join(f"class S{i} {{\n  a string\n  b int\n}}\n\n" for i in range(n))


def long_string(megabytes: float) -> str:
    body = "The quick brown fox jumps over the lazy dog. " * int(megabytes * 1_000_000 / 45)
    return f'text = "{body}"\nprint("{{text}}")\n'


def slope(n1: int, t1: float, n2: int, t2: float) -> str:
    if t1 <= 0 or t2 <= 0:
        return "-"
    return f"{math.log(t2 / t1) / math.log(n2 / n1):.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="1000,5000,20000,80000")
    parser.add_argument("--strings", default="1,5", help="string sizes in MB")
    parser.add_argument("--contracts", default="100,400,1600",
                        help="numbers of generated contracts")
    parser.add_argument("--dev", action="store_true",
                        help="run luma from this interpreter, not from bench/.venv-wheel")
    parser.add_argument("--no-baml", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    strings = [float(s) for s in args.strings.split(",") if s]
    contracts = [int(s) for s in args.contracts.split(",") if s]

    python = sys.executable if args.dev else str(wheel_python())
    baml = None if args.no_baml else baml_cli()
    baml_env = {k: v for k, v in os.environ.items() if k != "RUST_BACKTRACE"}
    load = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="luma-scaling-") as tmp:
        folder = Path(tmp)
        one = folder / "one.luma"
        one.write_text(luma_schemas(1), encoding="utf-8")
        command = [python, "-m", "luma", "check", str(one)]
        start_up = median([run_once(command) for _ in range(max(3, args.runs))],
                          peak_mb(command))

        luma: dict[int, Measured] = {}
        other: dict[int, Measured] = {}
        for n in sizes:
            path = folder / f"schemas-{n}.luma"
            path.write_text(luma_schemas(n), encoding="utf-8")
            project = folder / f"baml-{n}" / "baml_src"
            project.mkdir(parents=True)
            (project / "main.baml").write_text(baml_classes(n), encoding="utf-8")
            command = [python, "-m", "luma", "check", str(path)]
            peer = [str(baml), "check", "--from", str(project), "--no-version-check"]
            ours: list[Measured] = []
            theirs: list[Measured] = []
            for _ in range(args.runs):  # alternating, so both see the same load
                ours.append(run_once(command))
                if baml is not None:
                    theirs.append(run_once(peer, env=baml_env))
            luma[n] = median(ours, peak_mb(command))
            if theirs:
                other[n] = median(theirs, peak_mb(peer, env=baml_env))
            print(f"  {n} declarations: luma {luma[n].cpu_s:.3f} s CPU"
                  + (f", baml-cli {other[n].cpu_s:.3f} s CPU" if n in other else ""),
                  file=sys.stderr)

        texts: dict[float, tuple[int, Measured]] = {}
        for mb in strings:
            path = folder / f"string-{mb:g}mb.luma"
            path.write_text(long_string(mb), encoding="utf-8")
            command = [python, "-m", "luma", "check", str(path)]
            texts[mb] = (path.stat().st_size,
                         median([run_once(command) for _ in range(args.runs)],
                                peak_mb(command)))

        programs: dict[int, tuple[int, Measured]] = {}
        for n in contracts:
            path = folder / f"contracts-{n}.luma"
            path.write_text("".join(TEMPLATE.format(n=i) for i in range(n)), encoding="utf-8")
            command = [python, "-m", "luma", "check", str(path)]
            programs[n] = (path.stat().st_size,
                           median([run_once(command) for _ in range(args.runs)],
                                  peak_mb(command)))
            print(f"  {n} contracts: luma {programs[n][1].cpu_s:.3f} s CPU", file=sys.stderr)

    print(f"python: {python}")
    print(f"cores: {os.cpu_count()}, load average before: {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f}, after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"runs: {args.runs} of each, medians; start-up (one schema): "
          f"{start_up.cpu_s * 1000:.0f} ms CPU, {start_up.peak_mb:.0f} MB")
    print()
    print("| declarations | wall | CPU | peak memory | CPU per 1k, start-up left out | slope |"
          + (" `baml-cli check` CPU | wall | peak memory | luma / baml (CPU) |" if other
             else ""))
    print("| ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: | ---: | ---: |"
                                                          if other else ""))
    previous: tuple[int, float] | None = None
    for n in sizes:
        m = luma[n]
        work = m.cpu_s - start_up.cpu_s
        row = (f"| {n:,} | {m.wall_s:.2f} s | {m.cpu_s:.2f} s | {m.peak_mb:.0f} MB | "
               f"{work / n * 1000 * 1000:.1f} ms | "
               f"{slope(previous[0], previous[1], n, work) if previous else '-'} |")
        if other:
            b = other[n]
            row += (f" {b.cpu_s:.2f} s | {b.wall_s:.2f} s | {b.peak_mb:.0f} MB |"
                    f" {m.cpu_s / b.cpu_s:.2f} |")
        print(row)
        previous = (n, work)
    print()
    print("| string literal | file | wall | CPU | peak memory | above start-up, per byte of file |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for mb, (size, m) in texts.items():
        print(f"| {mb:g} MB | {size / 1e6:.1f} MB | {m.wall_s:.2f} s | {m.cpu_s:.2f} s | "
              f"{m.peak_mb:.0f} MB | "
              f"{(m.peak_mb - start_up.peak_mb) * 1024 * 1024 / size:.1f} |")
    if programs:
        print()
        print("| contracts | file | wall | CPU | peak memory | CPU per contract, start-up left out "
              "| slope |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        previous = None
        for n, (size, m) in programs.items():
            work = m.cpu_s - start_up.cpu_s
            print(f"| {n:,} | {size / 1e6:.1f} MB | {m.wall_s:.2f} s | {m.cpu_s:.2f} s | "
                  f"{m.peak_mb:.0f} MB | {work / n * 1000:.2f} ms | "
                  f"{slope(previous[0], previous[1], n, work) if previous else '-'} |")
            previous = (n, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
