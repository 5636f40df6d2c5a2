"""``luma test [PATH ...]``: run the tests declared in ``.luma`` files (docs/testing.md)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from typing import TYPE_CHECKING

from luma.cli_common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, _write_stdout
from luma.cli_parser import _Parser

if TYPE_CHECKING:
    from luma.compile import CheckedFile
    from luma.syntax.ast import TestDecl

EXIT_REVIEW = 3
EXIT_NO_TESTS = 4


def test_parser() -> _Parser:
    parser = _Parser(
        prog="luma test",
        description="Run the test declarations of .luma files, each in a fresh runtime; the "
                    "offline model answers unless a test or --model names a declared model.",
        epilog="exit status: 0 every test passed, 1 a test failed, 2 a usage error or a "
               "program that does not check or start, 3 none failed but some need review, "
               "4 no test matched")
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files, or folders searched recursively for *.luma (default: .)")
    parser.add_argument("-k", dest="pattern", metavar="PATTERN",
                        help="run only the tests whose name contains PATTERN (ignoring case)")
    parser.add_argument("--tool-module", action="append", default=[], metavar="PATH",
                        dest="tool_modules", help="a Python module of tool handlers (repeatable)")
    parser.add_argument("--config", metavar="FILE", help="the luma.config.json to use")
    parser.add_argument("--model", metavar="NAME",
                        help="the declared model that answers in tests without a model: entry")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--record", metavar="DIR",
                       help="record each test's provider traffic into its own file in DIR")
    group.add_argument("--replay", metavar="DIR",
                       help="replay each test's provider traffic from DIR (no network, no key)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run up to N tests at once (default: 1)")
    parser.add_argument("--format", choices=("text", "json", "junit"), default="text",
                        help="the report on stdout (default: text)")
    return parser


def test_command(argv: Sequence[str]) -> int:
    from luma.compile import check_file, find_luma_files
    from luma.syntax.render import render_text, source_lookup
    from luma.testrun import (
        FAILED, NEEDS_REVIEW, TestOptions, json_report, junit_report, run_tests, selected,
        summary, text_line)

    parser = test_parser()
    args = parser.parse_checked(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")
    if args.replay is not None and not Path(args.replay).is_dir():
        parser.error(f"--replay {args.replay}: no such folder")
    if args.record is not None:
        Path(args.record).mkdir(parents=True, exist_ok=True)
    paths = args.paths or ["."]
    files, missing = find_luma_files(paths)
    if missing:
        parser.error(f"no such file or folder: {missing[0]}")
    named = {Path(p) for p in paths if Path(p).is_file()}
    work: list[tuple[CheckedFile, TestDecl]] = []
    broken: list[CheckedFile] = []
    for path in files:
        checked = check_file(path)
        if checked.program is not None and not checked.program.tests and path not in named:
            continue  # a file without tests, found in a folder, is not this command's concern
        if checked.has_errors:
            if checked.program is None and path not in named:
                continue  # found in a folder and does not parse: `luma check` says why
            broken.append(checked)
            continue
        assert checked.program is not None
        work.extend((checked, t) for t in selected(checked.program, args.pattern))
    if broken:
        for checked in broken:
            errors = [d for d in checked.diagnostics if d.is_error]
            sys.stderr.write(render_text(errors, source_lookup([checked.source])))
        sys.stderr.write(f"luma test: {len(broken)} file{'s' if len(broken) > 1 else ''} "
                         "with errors; no test ran\n")
        return EXIT_USAGE
    if args.model is not None:
        for checked in {id(c): c for c, _ in work}.values():
            assert checked.program is not None
            declared = [m.name for m in checked.program.models]
            if args.model not in declared and args.model != "test":
                parser.error(f"--model {args.model}: {checked.source.path} declares no model of "
                             f"that name (models: {', '.join([*declared, 'test'])})")
    if not work:
        what = f" matching '{args.pattern}'" if args.pattern is not None else ""
        sys.stderr.write(f"luma test: no test{what} in {', '.join(paths)}\n")
        return EXIT_NO_TESTS
    options = TestOptions(tuple(args.tool_modules), args.config, args.model, args.record,
                          args.replay)
    started = time.perf_counter()
    as_text = args.format == "text"
    results = run_tests(work, options, args.jobs,
                        on_result=(lambda r: _write_stdout(text_line(r))) if as_text else None)
    if as_text:
        _write_stdout(summary(results, time.perf_counter() - started))
    elif args.format == "json":
        _write_stdout(json.dumps(json_report(results), indent=2) + "\n")
    else:
        _write_stdout(junit_report(results))
    if any(r.start_error for r in results):
        return EXIT_USAGE
    if any(r.status == FAILED for r in results):
        return EXIT_FAILED
    if any(r.status == NEEDS_REVIEW for r in results):
        return EXIT_REVIEW
    return EXIT_OK
