"""``luma eval``: how well a model chooses and fills an agent's tools on a golden set of cases
(docs/testing.md "Evals"). Each case runs in a program started for it alone, its model forced
for every ``ask``; the model's native tool calls are compared with the case's expectations."""

from __future__ import annotations

import asyncio
import copy
import io
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from luma.compile import CheckedFile
from luma.runtime.errors import LumaError, StartError


class CasesError(Exception):
    """A golden-set file that cannot be read: each message names its line."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__(messages[0])
        self.messages = messages


_CASE_KEYS = ("input", "expect_tools", "expect_args", "expect")


def read_cases(path: str) -> list[dict[str, Any]]:
    """The cases of a JSON Lines file: one object per line, blank lines skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CasesError([f"{path}: cannot read it: {exc.strerror or exc}"]) from None
    cases: list[dict[str, Any]] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            case = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{number}: not valid JSON: {exc.msg}")
            continue
        if not isinstance(case, dict):
            problems.append(f"{path}:{number}: a case is a JSON object")
            continue
        unknown = [k for k in case if k not in _CASE_KEYS]
        if unknown:
            problems.append(f"{path}:{number}: unknown key '{unknown[0]}' (a case has "
                            f"{', '.join(_CASE_KEYS)})")
        if not isinstance(case.get("input", {}), dict):
            problems.append(f"{path}:{number}: 'input' is an object of the agent's arguments")
        tools = case.get("expect_tools")
        if tools is not None and not (isinstance(tools, list)
                                      and all(isinstance(t, str) for t in tools)):
            problems.append(f"{path}:{number}: 'expect_tools' is a list of tool names")
        args = case.get("expect_args")
        if args is not None and not (isinstance(args, dict)
                                     and all(isinstance(v, dict) for v in args.values())):
            problems.append(f"{path}:{number}: 'expect_args' maps tool names to objects")
        cases.append(case)
    if problems:
        raise CasesError(problems)
    if not cases:
        raise CasesError([f"{path}: no cases"])
    return cases


def fits(value: Any, wanted: Any) -> bool:
    """``wanted`` is a subset of ``value``: every key of an object, recursively; other values
    equal."""
    if isinstance(wanted, dict):
        return isinstance(value, dict) and all(k in value and fits(value[k], v)
                                               for k, v in wanted.items())
    return bool(value == wanted and type(value) is type(wanted)) or (
        isinstance(value, (int, float)) and isinstance(wanted, (int, float))
        and not isinstance(value, bool) and not isinstance(wanted, bool) and value == wanted)


@dataclass(slots=True)
class Run:
    """One case run once: the tools the model called (name, input), the result or the error."""

    calls: list[tuple[str, Any]] = field(default_factory=list)
    result: Any = None
    error: str | None = None
    tokens: int = 0  # input and output tokens of every model turn
    invalid_answers: int = 0  # answers that did not fit the ask's type
    invalid_inputs: int = 0  # tool calls whose arguments did not fit the tool's input
    retries: int = 0  # model requests sent again because of one of those failures
    seconds: float = 0.0  # the whole run of the agent's method
    pending: bool = False  # a validation failure since the last model request

    def hear(self, event: dict[str, Any]) -> None:
        """Count what one telemetry event of the run says."""
        kind = event.get("event")
        if kind == "ask.request":
            if self.pending:
                self.retries += 1
                self.pending = False
        elif kind == "ask.response":
            self.tokens += int(event.get("tokens_in") or 0) + int(event.get("tokens_out") or 0)
        elif kind == "ask.invalid_answer":
            self.invalid_answers += 1
            self.pending = True
        elif kind == "ask.tool_result" and event.get("outcome") in _INVALID_INPUT:
            self.invalid_inputs += 1
            self.pending = True


# the outcomes of a native tool call whose arguments the runtime rejected, telling the model
_INVALID_INPUT = ("TOOL_INPUT_INVALID", "bad_arguments")


@dataclass(slots=True)
class ModelReport:
    model: str
    offline: bool
    runs: int = 0
    errors: int = 0
    selection: list[bool] = field(default_factory=list)
    args: list[bool] = field(default_factory=list)
    answers: list[bool] = field(default_factory=list)
    per_tool: dict[str, dict[str, int]] = field(default_factory=dict)  # tp, fp, fn
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)  # expected -> chosen
    tokens: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    invalid_answers: int = 0
    invalid_inputs: int = 0
    retries: int = 0
    by_repetition: dict[int, list[bool]] = field(default_factory=dict)  # selection per rep
    failures: list[tuple[int, int, str]] = field(default_factory=list)  # case, rep, error

    def latency(self, share: float) -> float | None:
        """The ``share`` quantile (0.5: p50) of the runs' durations, in milliseconds."""
        if not self.seconds:
            return None
        ordered = sorted(self.seconds)
        return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000, 1)

    @property
    def spread(self) -> tuple[float, float] | None:
        """The lowest and highest tool-selection accuracy of one repetition of every case."""
        rates = [r for r in (_rate(v) for v in self.by_repetition.values()) if r is not None]
        return (min(rates), max(rates)) if rates else None

    @property
    def accuracy(self) -> float | None:
        return _rate(self.selection)

    def add(self, case: dict[str, Any], run: Run, repetition: int = 1, number: int = 0) -> None:
        """Count ``run``, the ``repetition`` of case ``number`` (from 1)."""
        self.runs += 1
        if run.error is not None:
            self.errors += 1
            self.failures.append((number, repetition, run.error))
        self.tokens.append(run.tokens)
        self.seconds.append(run.seconds)
        self.invalid_answers += run.invalid_answers
        self.invalid_inputs += run.invalid_inputs
        self.retries += run.retries
        chosen = {name for name, _ in run.calls}
        expected_tools = case.get("expect_tools")
        if expected_tools is not None:
            expected = set(expected_tools)
            self.selection.append(chosen == expected)
            self.by_repetition.setdefault(repetition, []).append(chosen == expected)
            for tool in expected | chosen:
                counts = self.per_tool.setdefault(tool, {"tp": 0, "fp": 0, "fn": 0})
                counts["tp" if tool in expected and tool in chosen else
                       "fp" if tool in chosen else "fn"] += 1
            for tool in sorted(expected - chosen):
                row = self.confusion.setdefault(tool, {})
                instead = sorted(chosen - expected) or ["(none)"]
                for other in instead:
                    row[other] = row.get(other, 0) + 1
        for tool, wanted in (case.get("expect_args") or {}).items():
            self.args.append(any(name == tool and fits(given, wanted)
                                 for name, given in run.calls))
        if "expect" in case:
            self.answers.append(run.error is None and fits(run.result, case["expect"]))

    def as_json(self) -> dict[str, Any]:
        tools = {}
        for tool, c in sorted(self.per_tool.items()):
            tools[tool] = {"precision": _ratio(c["tp"], c["tp"] + c["fp"]),
                           "recall": _ratio(c["tp"], c["tp"] + c["fn"])}
        return {"model": self.model, "offline": self.offline, "runs": self.runs,
                "errors": self.errors, "tool_accuracy": self.accuracy,
                "argument_match": _rate(self.args), "answer_match": _rate(self.answers),
                "tools": tools, "confusion": self.confusion,
                "validation_failures": {"answers": self.invalid_answers,
                                        "tool_inputs": self.invalid_inputs},
                "retries": self.retries,
                "tokens": sum(self.tokens), "latency_ms": {"p50": self.latency(0.5),
                                                           "p95": self.latency(0.95)},
                "accuracy_spread": list(self.spread) if self.spread else None,
                "failures": [{"case": n, "repetition": r, "error": e}
                             for n, r, e in self.failures]}


def _rate(values: list[bool]) -> float | None:
    return _ratio(sum(values), len(values))


def _ratio(a: int, b: int) -> float | None:
    return None if b == 0 else round(a / b, 4)


async def run_case(checked: CheckedFile, agent: str, case: dict[str, Any], model: str, *,
                   tool_modules: tuple[str, ...], config: str | None, record: str | None,
                   replay: str | None) -> Run:
    from luma.api import start
    from luma.runtime.interpreter import Interpreter

    run = Run()
    program = start(checked, tool_modules=tool_modules, config=config, stderr=io.StringIO(),
                    stand_in=_stand_in, record=record, replay=replay)
    try:
        if program._ask_setup is not None:
            program._ask_setup.models.force(model)
        runtime = program.new_runtime(stderr=io.StringIO(), listener=run.hear)

        def observe(name: str, given: Any, output: Any, err: Any, mode: str) -> None:
            if mode == "native":
                run.calls.append((name, copy.deepcopy(given)))

        runtime.call_observer = observe
        started = time.perf_counter()
        try:
            run.result = await Interpreter(runtime).call_method(agent, "run",
                                                                dict(case.get("input") or {}))
        except LumaError as err:
            run.error = f"[{err.code}] {program.secrets.redact(err.message)}"
        finally:
            run.seconds = time.perf_counter() - started
            await runtime.aclose()
            runtime.telemetry.close()
    finally:
        await program.aclose()
    return run


def _stand_in(name: str) -> Any:
    def missing(_input: Any) -> Any:
        raise RuntimeError(f"no handler is registered for tool '{name}' (give its tool module "
                           "with --tool-module)")

    return missing


def evaluate(checked: CheckedFile, agent: str, cases: list[dict[str, Any]], models: list[str],
             *, repeat: int = 1, tool_modules: tuple[str, ...] = (), config: str | None = None,
             record: str | None = None, replay: str | None = None,
             jobs: int = 1) -> list[ModelReport]:
    """Every case ``repeat`` times on each model, ``jobs`` runs at a time; one report per
    model, in the order given, the runs counted in the same order whatever ``jobs`` is.
    ``record``/``replay`` is a folder: one recording per model, case and repetition."""
    assert checked.program is not None
    offline = {m.name for m in checked.program.models if _is_offline(m)} | {"test"}
    work = [(model, number, case, rep) for model in models
            for number, case in enumerate(cases, start=1) for rep in range(1, repeat + 1)]

    def one(item: tuple[str, int, dict[str, Any], int]) -> Run:
        model, number, case, rep = item
        name = f"{model}--case-{number}--{rep}.json"
        return asyncio.run(run_case(
            checked, agent, case, model, tool_modules=tool_modules, config=config,
            record=None if record is None else str(Path(record) / name),
            replay=None if replay is None else str(Path(replay) / name)))

    reports = {model: ModelReport(model, model in offline) for model in models}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for (model, number, case, rep), run in zip(work, pool.map(one, work)):
            reports[model].add(case, run, rep, number)
    return list(reports.values())


def _is_offline(decl: Any) -> bool:
    entry = decl.entry("provider")
    value = getattr(entry.value, "value", None) if entry is not None else None
    return value == "test"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def text_report(reports: list[ModelReport], cases: int, repeat: int) -> str:
    rows: list[tuple[str, list[str]]] = [
        ("tool selection (exact set)", [_percent(r.accuracy) for r in reports]),
        ("argument match", [_percent(_rate(r.args)) for r in reports]),
        ("final answer match", [_percent(_rate(r.answers)) for r in reports]),
        ("runs that failed", [f"{r.errors}/{r.runs}" for r in reports]),
        ("invalid answers", [str(r.invalid_answers) for r in reports]),
        ("invalid tool inputs", [str(r.invalid_inputs) for r in reports]),
        ("re-asked after an invalid one", [str(r.retries) for r in reports]),
        ("tokens per run", [f"{sum(r.tokens) / max(1, r.runs):.0f}" for r in reports]),
        # one row each: a cell of both would make the columns as wide as the slowest run
        ("latency p50 (ms)", [str(r.latency(0.5)) for r in reports]),
        ("latency p95 (ms)", [str(r.latency(0.95)) for r in reports]),
    ]
    if repeat > 1:
        rows.insert(1, ("selection spread over repeats", [
            "-" if r.spread is None else f"{_percent(r.spread[0])}-{_percent(r.spread[1])}"
            for r in reports]))
    tools = sorted({t for r in reports for t in r.per_tool})
    for tool in tools:
        cells_p, cells_r = [], []
        for r in reports:
            c = r.per_tool.get(tool, {"tp": 0, "fp": 0, "fn": 0})
            cells_p.append(_percent(_ratio(c["tp"], c["tp"] + c["fp"])))
            cells_r.append(_percent(_ratio(c["tp"], c["tp"] + c["fn"])))
        rows.append((f"{tool}: precision", cells_p))
        rows.append((f"{tool}: recall", cells_r))
    width = max(len(label) for label, _ in rows)
    widths = [max(len(r.model), *(len(cells[i]) for _, cells in rows))
              for i, r in enumerate(reports)]
    lines = [f"{cases} case{'s' if cases != 1 else ''} x {repeat} on "
             f"{len(reports)} model{'s' if len(reports) != 1 else ''}",
             " " * width + "  " + "  ".join(r.model.rjust(w) for r, w in zip(reports, widths))]
    lines += [label.ljust(width) + "  " + "  ".join(c.rjust(w) for c, w in zip(cells, widths))
              for label, cells in rows]
    for r in reports:
        for tool, row in sorted(r.confusion.items()):
            instead = ", ".join(f"{other} x{n}" for other, n in sorted(row.items()))
            lines.append(f"{r.model}: expected {tool}, chose {instead}")
    for r in reports:
        for number, rep, error in r.failures:
            run = f" (repetition {rep})" if repeat > 1 else ""
            lines.append(f"{r.model}: case {number}{run} failed: {error}")
    for r in reports:
        if r.offline:
            lines.append(f"note: {r.model} is the offline model: this measures the harness "
                         "(the contract and the cases), not a model")
    return "\n".join(lines) + "\n"


__all__ = ["CasesError", "ModelReport", "StartError", "evaluate", "fits", "read_cases",
           "text_report"]
