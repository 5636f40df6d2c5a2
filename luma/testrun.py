"""``luma test``: run the ``test`` declarations of ``.luma`` files (docs/testing.md).

Each test runs in a program started for it alone (its own shared state: no cache, idempotency
store or circuit breaker is shared with another test), with its mocks in front of the
handlers and a record of its tool calls for ``calls("tool")``. A tool without a handler gets a
stand-in that fails the call, saying how to mock it.
"""

from __future__ import annotations

import asyncio
import copy
import io
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from luma.compile import CheckedFile
from luma.runtime.errors import LumaError, LumaToolError, StartError
from luma.runtime.interpreter import AssertionFailed
from luma.runtime.values import short
from luma.syntax import ast
from luma.syntax.source import Span

PASSED = "passed"
FAILED = "failed"
NEEDS_REVIEW = "needs_review"
STATUS_WORDS = {PASSED: "PASSED", FAILED: "FAILED", NEEDS_REVIEW: "NEEDS REVIEW"}


@dataclass(slots=True)
class Finding:
    """Why a test failed or needs review: a failed ``assert`` or ``check``, or an error."""

    kind: str  # "assert", "check" or "error"
    line: int
    source: str  # the statement's first source line
    details: list[str]  # "left: 3, right: 2", the message, the error


@dataclass(slots=True)
class TestResult:
    file: str
    name: str
    line: int
    status: str
    findings: list[Finding] = field(default_factory=list)
    duration_s: float = 0.0
    start_error: bool = False  # the program could not start (exit status 2)


@dataclass(frozen=True, slots=True)
class TestOptions:
    tool_modules: tuple[str, ...] = ()
    config: str | None = None
    model: str | None = None
    record: str | None = None  # a folder: one recording per test
    replay: str | None = None


def selected(program: ast.Program, pattern: str | None) -> list[ast.TestDecl]:
    """The program's tests whose name contains ``pattern`` (ignoring case), in source order."""
    tests = program.tests
    if pattern is None:
        return tests
    wanted = pattern.casefold()
    return [t for t in tests if wanted in t.name.casefold()]


def recording_name(test: ast.TestDecl, file: str) -> str:
    """The file name of a test's recording: the program's stem and the test's name, in
    lowercase words joined by ``-``."""
    words = re.sub(r"[^a-z0-9]+", "-", test.name.casefold()).strip("-") or "test"
    return f"{Path(file).stem}--{words}.json"


def run_tests(work: Sequence[tuple[CheckedFile, ast.TestDecl]], options: TestOptions,
              jobs: int = 1, on_result: Callable[[TestResult], None] | None = None
              ) -> list[TestResult]:
    """Run every test, ``jobs`` at a time; the results in the order of ``work``
    (``on_result`` hears of each as it ends, in that order too)."""
    def one(item: tuple[CheckedFile, ast.TestDecl]) -> TestResult:
        return asyncio.run(run_test(item[0], item[1], options))

    results: list[TestResult] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for result in pool.map(one, work):
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results


async def run_test(checked: CheckedFile, test: ast.TestDecl, options: TestOptions) -> TestResult:
    """Run one test in a program of its own."""
    from luma.api import start
    from luma.models.resolve import ModelConfigError
    from luma.runtime.interpreter import Interpreter

    text = checked.source.text
    file = checked.source.path
    result = TestResult(file, test.name, _line(text, test.span.start), PASSED)
    started = time.perf_counter()
    hooks = _Hooks(result, text)
    record = replay = None
    if options.record is not None:
        record = str(Path(options.record) / recording_name(test, file))
    if options.replay is not None:
        replay = str(Path(options.replay) / recording_name(test, file))
    stderr = io.StringIO()  # the offline model's notice and print() stay out of the report
    try:
        program = start(checked, tool_modules=options.tool_modules, config=options.config,
                        model=test.model or options.model, stderr=stderr,
                        stand_in=_stand_in, record=record, replay=replay)
        if program._ask_setup is not None:
            try:  # the test's model answers every ask, agents' own models included
                program._ask_setup.models.force(test.model or options.model)
            except ModelConfigError as exc:
                await program.aclose()
                raise StartError([f"--model: {m}" for m in exc.messages]) from None
    except StartError as exc:
        result.status, result.start_error = FAILED, True
        result.findings.append(Finding("error", result.line, _source_line(text, test.span),
                                       list(exc.lines)))
        return result
    try:
        program._wrap_handlers(hooks.wrap)
        runtime = program.new_runtime(stderr=stderr)
        runtime.call_observer = hooks.observe
        hooks.redact = program.secrets.redact
        try:
            await Interpreter(runtime).run_test(test, hooks)
        except AssertionFailed as failed:
            hooks.finding("assert", failed.stmt, failed.operands, failed.value, failed.message)
        except LumaError as err:
            span = err.span if err.span is not None else test.span
            message = program.secrets.redact(err.message)
            lines = [message if message.startswith(f"[{err.code}]")
                     else f"[{err.code}] {message}"]
            result.findings.append(Finding("error", _line(text, span.start),
                                           _source_line(text, span), lines))
        finally:
            await runtime.aclose()
            runtime.telemetry.close()
    finally:
        await program.aclose()
    if any(f.kind != "check" for f in result.findings):
        result.status = FAILED
    elif result.findings:
        result.status = NEEDS_REVIEW
    result.duration_s = time.perf_counter() - started
    return result


def _stand_in(name: str) -> Callable[..., Any]:
    def missing(_input: Any) -> Any:
        raise RuntimeError(f"no handler is registered for this test: mock it (mock tool {name} "
                           "returns ...) or give its tool module with --tool-module")

    return missing


class _Hooks:
    """One test's mocks, its record of tool calls and its findings."""

    def __init__(self, result: TestResult, text: str) -> None:
        self.result = result
        self.text = text
        self.mocks: dict[str, tuple[bool, Any]] = {}
        self.log: dict[str, list[dict[str, Any]]] = {}
        self.redact: Callable[[str], str] = lambda s: s

    # the body's side -----------------------------------------------------------------
    def mock(self, tool: str, throws: bool, value: Any) -> None:
        self.mocks[tool] = (throws, copy.deepcopy(value))

    def calls(self, tool: str) -> list[dict[str, Any]]:
        return copy.deepcopy(self.log.get(tool, []))

    def failed(self, stmt: ast.Assert, operands: tuple[Any, Any] | None, value: Any,
               message: str | None) -> None:
        self.finding("check", stmt, operands, value, message)

    def finding(self, kind: str, stmt: ast.Assert, operands: tuple[Any, Any] | None,
                value: Any, message: str | None) -> None:
        if operands is not None:
            details = [f"left: {self._shown(operands[0])}, right: {self._shown(operands[1])}"]
        elif isinstance(value, bool):
            details = ["the condition is false"]
        else:
            details = [f"the condition is {self._shown(value)}, not a bool"]
        if message is not None:
            details.append(self.redact(message))
        self.result.findings.append(Finding(kind, _line(self.text, stmt.span.start),
                                            _source_line(self.text, stmt.span), details))

    def _shown(self, value: Any) -> str:
        return self.redact(short(value, 200))

    # the runtime's side --------------------------------------------------------------
    def observe(self, name: str, given: Any, output: Any, err: LumaError | None,
                mode: str) -> None:
        self.log.setdefault(name, []).append({
            "input": copy.deepcopy(given), "output": copy.deepcopy(output), "mode": mode,
            "error": None if err is None else err.to_value()})

    def wrap(self, name: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        """``handler`` behind this test's mock of ``name`` (when there is one)."""
        from luma.runtime.handlers import HandlerInvoker

        invoker = HandlerInvoker(handler, name)
        inner = invoker.call
        mocked = self._mocked
        if invoker.is_async:
            async def mockable_async(input: Any, signal: Any, needs: Any) -> Any:
                if name in self.mocks:
                    return mocked(name)
                return await inner(input, signal, needs)

            return mockable_async

        def mockable(input: Any, signal: Any, needs: Any) -> Any:
            if name in self.mocks:
                return mocked(name)
            return inner(input, signal, needs)

        return mockable

    def _mocked(self, name: str) -> Any:
        throws, value = self.mocks[name]
        if not throws:
            return copy.deepcopy(value)
        fields = dict(value) if isinstance(value, dict) else {"message": str(value)}
        code = fields.pop("code", "TOOL_ERROR")
        message = fields.pop("message", "")
        retryable = fields.pop("retryable", False)
        details = fields.pop("details", None)
        raise LumaToolError(str(code), str(message), retryable is True, details, **fields)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _source_line(text: str, span: Span) -> str:
    start = text.rfind("\n", 0, span.start) + 1
    end = text.find("\n", span.start)
    return text[start:end if end >= 0 else len(text)].strip()


# ------------------------------------------------------------------------------- reports

def text_line(result: TestResult) -> str:
    """The report of one test: its status line and, under it, each finding."""
    where = f"{result.file}:{result.line}"
    lines = [f"{STATUS_WORDS[result.status]:<13}{result.name}  ({where})"]
    for f in result.findings:
        lines.append(f"    {result.file}:{f.line}: {f.source}")
        lines.extend(f"      {d}" for d in f.details)
    return "\n".join(lines) + "\n"


def summary(results: Sequence[TestResult], seconds: float) -> str:
    counts = {s: sum(1 for r in results if r.status == s) for s in STATUS_WORDS}
    total = len(results)
    parts = [f"{counts[PASSED]} passed", f"{counts[FAILED]} failed"]
    if counts[NEEDS_REVIEW]:
        parts.append(f"{counts[NEEDS_REVIEW]} need{'s' if counts[NEEDS_REVIEW] == 1 else ''} "
                     "review")
    return f"{total} test{'' if total == 1 else 's'}: {', '.join(parts)} in {seconds:.2f}s\n"


def json_report(results: Sequence[TestResult]) -> dict[str, Any]:
    return {
        "tests": [{"file": r.file, "name": r.name, "line": r.line, "status": r.status,
                   "duration_ms": round(r.duration_s * 1000, 3),
                   "findings": [{"kind": f.kind, "line": f.line, "source": f.source,
                                 "details": f.details} for f in r.findings]}
                  for r in results],
        "summary": {s: sum(1 for r in results if r.status == s) for s in STATUS_WORDS},
    }


def junit_report(results: Sequence[TestResult]) -> str:
    """JUnit XML: one ``testsuite`` per file; a test that needs review passes, its checks in
    ``system-out``."""
    from xml.etree import ElementTree as ET

    root = ET.Element("testsuites", name="luma test", tests=str(len(results)),
                      failures=str(sum(1 for r in results if r.status == FAILED)))
    suites: dict[str, ET.Element] = {}
    for r in results:
        suite = suites.get(r.file)
        if suite is None:
            mine = [x for x in results if x.file == r.file]
            suite = suites[r.file] = ET.SubElement(
                root, "testsuite", name=r.file, tests=str(len(mine)),
                failures=str(sum(1 for x in mine if x.status == FAILED)), errors="0",
                skipped="0")
        case = ET.SubElement(suite, "testcase", name=r.name, classname=Path(r.file).stem,
                             file=r.file, line=str(r.line), time=f"{r.duration_s:.3f}")
        body = "\n".join(f"{r.file}:{f.line}: {f.source}\n" + "\n".join(f"  {d}" for d in f.details)
                         for f in r.findings)
        if r.status == FAILED:
            first = r.findings[0] if r.findings else None
            message = first.details[-1] if first is not None and first.details else "failed"
            ET.SubElement(case, "failure", message=message,
                          type=first.kind if first is not None else "error").text = body
        elif r.status == NEEDS_REVIEW:
            ET.SubElement(case, "system-out").text = "needs review:\n" + body
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
