"""``luma eval PROGRAM --agent NAME --cases FILE --model NAME ...``: tool-selection accuracy
on a golden set, per model (docs/testing.md "Evals")."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from luma.cli_common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, _write_stdout
from luma.cli_parser import _Parser


def eval_parser() -> _Parser:
    parser = _Parser(
        prog="luma eval",
        description="Run an agent's run method on every case of a golden set with each model, "
                    "and report how well each chose and filled the tools.",
        epilog="exit status: 0 done, 1 a model's tool-selection accuracy is below "
               "--min-accuracy, 2 a usage error or a program that does not check or start")
    parser.add_argument("program", metavar="PROGRAM.luma")
    parser.add_argument("--agent", required=True, metavar="NAME")
    parser.add_argument("--cases", required=True, metavar="FILE",
                        help="a JSON Lines file: one case per line")
    parser.add_argument("--model", action="append", required=True, dest="models",
                        metavar="NAME", help="a declared model (repeatable: side by side)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run every case N times on each model")
    parser.add_argument("--tool-module", action="append", default=[], metavar="PATH",
                        dest="tool_modules")
    parser.add_argument("--config", metavar="FILE")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--record", metavar="DIR")
    group.add_argument("--replay", metavar="DIR")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run up to N cases at once (default: 1); the report is the same")
    parser.add_argument("--min-accuracy", type=float, metavar="X",
                        help="exit 1 when a model's tool-selection accuracy is below X (0 to 1)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    return parser


def eval_command(argv: Sequence[str]) -> int:
    from luma.compile import check_file
    from luma.evalrun import CasesError, evaluate, read_cases, text_report
    from luma.runtime.errors import StartError
    from luma.syntax.render import render_text, source_lookup

    parser = eval_parser()
    args = parser.parse_checked(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, not {args.repeat}")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")
    if args.min_accuracy is not None and not 0 <= args.min_accuracy <= 1:
        parser.error(f"--min-accuracy must be between 0 and 1, not {args.min_accuracy}")
    if not Path(args.program).is_file():
        parser.error(f"no such file: {args.program}")
    checked = check_file(args.program)
    if checked.has_errors or checked.program is None:
        errors = [d for d in checked.diagnostics if d.is_error]
        sys.stderr.write(render_text(errors, source_lookup([checked.source])))
        return EXIT_USAGE
    agent = next((a for a in checked.program.agents if a.name == args.agent), None)
    if agent is None or agent.fn("run") is None:
        parser.error(f"--agent {args.agent}: {args.program} has no agent of that name with a "
                     "run method")
    declared = [m.name for m in checked.program.models]
    for model in args.models:
        if model not in declared and model != "test":
            parser.error(f"--model {model}: {args.program} declares no model of that name "
                         f"(models: {', '.join([*declared, 'test'])})")
    try:
        cases = read_cases(args.cases)
    except CasesError as exc:
        for message in exc.messages:
            sys.stderr.write(f"luma eval: {message}\n")
        return EXIT_USAGE
    if args.replay is not None and not Path(args.replay).is_dir():
        parser.error(f"--replay {args.replay}: no such folder")
    if args.record is not None:
        Path(args.record).mkdir(parents=True, exist_ok=True)
    try:
        reports = evaluate(checked, args.agent, cases, args.models, repeat=args.repeat,
                           tool_modules=tuple(args.tool_modules), config=args.config,
                           record=args.record, replay=args.replay, jobs=args.jobs)
    except StartError as exc:
        for line in exc.lines:
            sys.stderr.write(f"luma eval: {line}\n")
        return EXIT_USAGE
    if args.format == "json":
        _write_stdout(json.dumps({"cases": len(cases), "repeat": args.repeat,
                                  "models": [r.as_json() for r in reports]}, indent=2) + "\n")
    else:
        _write_stdout(text_report(reports, len(cases), args.repeat))
    if args.min_accuracy is not None:
        low = [r for r in reports if r.accuracy is None or r.accuracy < args.min_accuracy]
        for r in low:
            sys.stderr.write(f"luma eval: {r.model}: tool-selection accuracy "
                             f"{'-' if r.accuracy is None else f'{r.accuracy:.4g}'} is below "
                             f"--min-accuracy {args.min_accuracy}\n")
        if low:
            return EXIT_FAILED
    return EXIT_OK
