"""Helpers for testing a Luma program from a user's own test suite (docs/python.md "Testing").

    from luma import testing

    calls = testing.ToolCalls()
    program = testing.load("triage.luma", tools={"lookup": lookup}, calls=calls,
                           script=[testing.call("lookup", id="T-42"),
                                   testing.answer({"team": "billing"})])
    assert program.run_sync("Triage", text="…") == {"team": "billing"}
    calls.assert_called("lookup", {"id": "T-42"})

- a scripted model: every model of the program plays the given turns, in order across each
  run (no network, no key);
- ``replay=``: the provider traffic of a recording made with ``--record``/``record=``;
- :class:`ToolCalls`: which tools ran, with which (validated) input, in order.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from luma.api import Program, _load_checked

__all__ = ["RecordedCall", "ToolCalls", "answer", "call", "calls", "load", "loads"]


# -------------------------------------------------------------------------------- the script

def call(tool: str, arguments: Mapping[str, Any] | None = None, /, *,
         call_id: str | None = None, **fields: Any) -> dict[str, Any]:
    """A model turn that calls one tool: ``call("lookup", id="T-42")`` or
    ``call("lookup", {"id": "T-42"})`` (a mapping for names that are not identifiers, or that
    are ``call_id``, the id of the call itself)."""
    entry: dict[str, Any] = {"name": tool, "arguments": {**(arguments or {}), **fields}}
    if call_id is not None:
        entry["id"] = call_id
    return {"tool_calls": [entry]}


def calls(*turns: dict[str, Any]) -> dict[str, Any]:
    """One turn that calls several tools at once: ``calls(call("a"), call("b", x=1))``."""
    return {"tool_calls": [c for turn in turns for c in turn["tool_calls"]]}


def answer(value: Any) -> dict[str, Any]:
    """A model turn that answers: text, or a JSON value (sent as its JSON text)."""
    return {"content": value}


# ------------------------------------------------------------------------------- tool calls

@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One handler call: the tool and the input it received (validated, defaults filled)."""

    tool: str
    input: Any


class ToolCalls:
    """Records every handler call of the programs it is given to (thread-safe)."""

    def __init__(self) -> None:
        self._calls: list[RecordedCall] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._calls)

    def __iter__(self) -> Any:
        return iter(self.all)

    @property
    def all(self) -> list[RecordedCall]:
        """Every call so far, in the order the handlers were called."""
        with self._lock:
            return list(self._calls)

    @property
    def names(self) -> list[str]:
        """The tools called, in order."""
        return [c.tool for c in self.all]

    def of(self, tool: str) -> list[Any]:
        """The inputs ``tool`` was called with, in order."""
        return [c.input for c in self.all if c.tool == tool]

    def clear(self) -> None:
        with self._lock:
            self._calls.clear()

    def assert_called(self, tool: str, input: Mapping[str, Any] | None = None, *,
                      times: int | None = None) -> None:
        """``tool`` ran (``times`` times, when given) — with ``input`` when given: every field
        of ``input`` has that value in the call's input (other fields may be there too)."""
        inputs = self.of(tool)
        matching = [i for i in inputs if input is None or _fits(i, input)]
        if not matching or (times is not None and len(matching) != times):
            wanted = f"'{tool}'" + (f" with {input!r}" if input is not None else "")
            count = "" if times is None else f" {times} time{'' if times == 1 else 's'}"
            raise AssertionError(f"expected a call of {wanted}{count}; "
                                 f"{self._described()}")

    def assert_not_called(self, tool: str) -> None:
        if self.of(tool):
            raise AssertionError(f"expected no call of '{tool}'; {self._described()}")

    def _described(self) -> str:
        made = self.all
        if not made:
            return "no tool was called"
        return "the calls were: " + ", ".join(f"{c.tool}({c.input!r})" for c in made)

    def _record(self, tool: str, value: Any) -> None:
        with self._lock:
            self._calls.append(RecordedCall(tool, copy.deepcopy(value)))

    def wrap(self, tool: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        """``handler`` called as before, its calls recorded."""
        from luma.runtime.handlers import HandlerInvoker

        invoker = HandlerInvoker(handler, tool)
        inner = invoker.call
        record = self._record
        if invoker.is_async:
            async def recorded_async(input: Any, signal: Any, needs: Any) -> Any:
                record(tool, input)
                return await inner(input, signal, needs)

            return recorded_async

        def recorded(input: Any, signal: Any, needs: Any) -> Any:
            record(tool, input)
            return inner(input, signal, needs)

        return recorded


def _fits(value: Any, wanted: Mapping[str, Any]) -> bool:
    return isinstance(value, dict) and all(k in value and value[k] == v
                                           for k, v in wanted.items())


# ---------------------------------------------------------------------------------- loading

def load(path: str | os.PathLike[str], *, script: Iterable[dict[str, Any]] | None = None,
         calls: ToolCalls | None = None, **options: Any) -> Program:
    """:func:`luma.load` for a test: ``script`` makes every model play these turns (see
    :func:`call`, :func:`calls`, :func:`answer`); ``calls`` records the handler calls; the
    other options are :func:`luma.load`'s (``replay=`` serves a recording)."""
    from luma.api import LoadError
    from luma.compile import check_file

    try:
        checked = check_file(os.fspath(path))
    except OSError as exc:
        raise LoadError([f"cannot read {os.fspath(path)}: {exc.strerror or exc}"]) from None
    return _for_test(checked, script, calls, options)


def loads(source: str, *, path: str | os.PathLike[str] = "<string>.luma",
          script: Iterable[dict[str, Any]] | None = None, calls: ToolCalls | None = None,
          **options: Any) -> Program:
    """:func:`load` of source text."""
    from luma.compile import check_text

    return _for_test(check_text(source, os.fspath(path)), script, calls, options)


def _for_test(checked: Any, script: Iterable[dict[str, Any]] | None, calls: ToolCalls | None,
              options: dict[str, Any]) -> Program:
    if script is not None:
        options["script"] = list(script)
    program = _load_checked(checked, **options)
    if calls is not None:
        program._wrap_handlers(calls.wrap)
    return program
