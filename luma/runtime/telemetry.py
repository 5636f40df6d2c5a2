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
from typing import IO, Any

from luma.runtime.secrets import SecretRedactor

HISTORY = 1000
"""How many of the latest events a run keeps in memory (``Telemetry.events``)."""


_TRACE_START = re.compile(rb'\{"ts": "[^"]*", "event": "')


def is_trace(head: bytes) -> bool:
    """Whether a file starting with ``head`` is a trace Luma wrote (its first event line)."""
    return _TRACE_START.match(head) is not None


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
            trace = self._sink.stream if self._sink is not None else None
            if trace is not None:
                line = redactor.redact(json.dumps(record, ensure_ascii=False, default=str))
                try:
                    trace.write(line + "\n")
                    trace.flush()
                except OSError as exc:
                    self._trace_failed(exc)
            if self.verbose:
                self.stderr.write(redactor.redact(_human(record)) + "\n")
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

    def close(self) -> None:
        """The end of the run: a trace of its own is closed, a shared one is left open."""
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

    def __init__(self, path: str) -> None:
        self.path = path
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


def _human(record: dict[str, Any]) -> str:
    event = record["event"]
    if event == "tool.call":
        extra = []
        if record.get("cache") == "hit":
            extra.append("cache hit")
        if record.get("single_flight"):
            extra.append("single-flight")
        if record.get("idempotent_replay"):
            extra.append("idempotent replay")
        if record.get("attempts", 1) > 1:
            extra.append(f"{record['attempts']} attempts")
        more = f" ({', '.join(extra)})" if extra else ""
        return (f"  tool {record.get('tool')} [{record.get('mode')}] -> {record.get('outcome')} "
                f"in {record.get('duration_ms')} ms{more}")
    if event.startswith("ask."):
        bits = " ".join(f"{k}={record[k]}" for k in ("model", "turn", "tokens_in", "tokens_out",
                                                     "finish_reason", "latency_ms") if k in record)
        return f"  {event} {bits}"
    if event == "warning":
        return f"  warning {record.get('code')}: {record.get('message')}"
    bits = " ".join(f"{k}={v}" for k, v in record.items() if k not in ("ts", "event"))
    return f"  {event} {bits}"
