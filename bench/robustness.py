"""Robustness run: generated and mutated programs with mutated handlers, on the offline model.

    .venv/bin/python bench/robustness.py [COUNT] [SEED] [--show N]

Prints how many runs were tried and how many ended in an internal error, a traceback, a hang, an
undocumented exit code or a result on stdout that is not JSON; with ``--show N``, the first N
failing runs (seed program, mutation, handler behaviours, the last line of stderr).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from robustness.fuzz import make_cases, run_cases, summary  # noqa: E402


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show = int(sys.argv[sys.argv.index("--show") + 1]) if "--show" in sys.argv else 0
    if show:
        args = args[:-1] if args and args[-1] == str(show) else args
    count = int(args[0]) if args else 1000
    seed = int(args[1]) if len(args) > 1 else 1
    started = time.monotonic()
    outcomes = run_cases(make_cases(count, seed))
    figures = summary(outcomes)
    figures["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(figures, indent=2))
    for o in [o for o in outcomes if o.problems][:show]:
        tail = (o.stderr.strip().splitlines() or [""])[-1][:160]
        print(f"- {o.case.seed} [{o.case.mutation}] {o.case.behaviours} {o.case.argv}\n"
              f"    {o.problems}\n    stderr: {tail}")


if __name__ == "__main__":
    main()
