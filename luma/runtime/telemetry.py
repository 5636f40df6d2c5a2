"""Telemetry events (RUNTIME.md §7): streamed as JSON Lines to ``--trace FILE`` and shown on
stderr with ``-v`` as they happen; only the last :data:`HISTORY` events stay in memory, so a run's
memory does not grow with its number of calls. Callers never pass secrets in; every event goes
through the run's :class:`~luma.runtime.secrets.SecretRedactor` before it is kept or written, as a
second line of defence."""

from __future__ import annotations

import json
import re
import sys
import threading
from collections import deque
from datetime import datetime, timezone
from collections.abc import Callable
from typing import IO, Any, Protocol

from luma.runtime.secrets import SecretRedactor

HISTORY = 1000
"""How many of the latest events a run keeps in memory (``Telemetry.events``)."""


_TRACE_START = re.compile(rb'\{"ts": "[^"]*", "event": "')


def is_trace(head: bytes) -> bool:
    """Whether a file starting with ``head`` is a trace Luma wrote (its first event line)."""
    return _TRACE_START.match(head) is not None


_VALUES = ("input", "result")


class View(Protocol):
    """What ``-v`` shows: told of each event (secrets already replaced), under the lock."""

    live: bool  # a display that redraws: other lines for stderr go through write()

    def event(self, record: dict[str, Any]) -> None: ...

    def write(self, text: str) -> None: ...

    def close(self) -> None: ...


EventListener = Callable[[dict[str, Any]], None]
"""Called with each event of a run as it happens (secrets already replaced)."""


class Telemetry:
    """The events of one run. ``trace_path`` opens a trace file of the run's own; ``shared``
    writes to a :class:`SharedTrace` that several runs append to (and that outlives them)."""

    def __init__(self, trace_path: str | None = None, *, verbose: bool = False,
                 stderr: IO[str] | None = None, redactor: SecretRedactor | None = None,
                 history: int = HISTORY, shared: SharedTrace | None = None,
                 listener: EventListener | None = None) -> None:
        self._history: deque[dict[str, Any]] = deque(maxlen=max(0, history))
        self.emitted = 0  # every event of the run, kept or not
        self.verbose = verbose
        self.stderr = stderr if stderr is not None else sys.stderr
        self.redactor = redactor if redactor is not None else SecretRedactor()
        self.listener = listener
        if shared is None and trace_path:
            shared = SharedTrace(trace_path)
            self._owns_trace = True
        else:
            self._owns_trace = False
        self.trace_path = shared.path if shared is not None else None
        self._sink = shared
        self._lock = shared.lock if shared is not None else threading.Lock()
        # -v: a live display on a terminal, plain lines elsewhere (luma.runtime.live)
        self.view: View | None = None
        if verbose:
            from luma.runtime.live import view_for

            self.view = view_for(self.stderr, self.redactor.redact)
        # someone watches the run as it goes: tool calls also emit a tool.start event
        self.watching = self.verbose or shared is not None
        # tool.start and tool.call carry the call's input and result (redacted)
        self.values = self.verbose or (shared is not None and shared.values)

    @property
    def events(self) -> list[dict[str, Any]]:
        """The latest events (at most ``history``), oldest first."""
        with self._lock:
            return list(self._history)

    def add_secret(self, value: str) -> None:
        """A value that must never be written: replaced by ``[secret]`` wherever it appears."""
        self.redactor.add(value)

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        record: dict[str, Any] = {"ts": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                                  "event": event}
        record.update(fields)
        redactor = self.redactor
        if redactor:
            record = redactor.redact_value(record)
        with self._lock:
            self.emitted += 1
            self._history.append(record)
            sink = self._sink
            trace = sink.stream if sink is not None else None
            if sink is not None and trace is not None:  # sink.values: --trace-no-values
                written = record
                if not sink.values and ("input" in record or "result" in record):
                    written = {k: v for k, v in record.items() if k not in _VALUES}
                line = redactor.redact(json.dumps(written, ensure_ascii=False, default=str))
                try:
                    trace.write(line + "\n")
                    trace.flush()
                except OSError as exc:
                    self._trace_failed(exc)
            if self.view is not None:
                self.view.event(record)
        if self.listener is not None:
            self.listener(record)
        return record

    def _trace_failed(self, exc: OSError) -> None:
        """A trace that cannot be written (a full disk) does not stop the run: the run's
        effects matter more than its record. Say so once and stop writing it (for every run
        that shares it). Called with the lock held."""
        sink = self._sink
        if sink is None or sink.stream is None:
            return
        trace, sink.stream = sink.stream, None
        try:
            trace.close()
        except OSError:
            pass
        self.stderr.write(f"warning: cannot write the trace file {self.trace_path}: "
                          f"{exc.strerror or exc}; the trace is incomplete\n")

    def write(self, text: str) -> None:
        """A line for stderr (a warning, a ``print``) above the live display (``view.live``)."""
        assert self.view is not None
        with self._lock:
            self.view.write(text)

    def close(self) -> None:
        """The end of the run: the live display stops; a trace of its own is closed, a shared
        one is left open."""
        view = self.view
        if view is not None:
            with self._lock:
                view.close()
        sink = self._sink
        if sink is None or not self._owns_trace:
            return
        with self._lock:
            trace, sink.stream = sink.stream, None
            if trace is not None:
                try:
                    trace.close()
                except OSError as exc:
                    sink.stream = None
                    self.stderr.write(f"warning: cannot write the trace file "
                                      f"{self.trace_path}: {exc.strerror or exc}; the trace is "
                                      "incomplete\n")


class SharedTrace:
    """A trace file that the runs of one loaded program append to, one event a line (lines of
    concurrent runs interleave, never mix). Opened at load, closed with the program."""

    def __init__(self, path: str, *, values: bool = True) -> None:
        self.path = path
        self.values = values  # tool arguments and results in the trace (--trace-no-values)
        self.stream: IO[str] | None = open(path, "w", encoding="utf-8")
        self.lock = threading.Lock()

    def close(self) -> None:
        with self.lock:
            stream, self.stream = self.stream, None
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
