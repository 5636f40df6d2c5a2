"""Telemetry events (RUNTIME.md §7): kept in memory for the run, written as JSON Lines with
``--trace FILE``, and shown on stderr with ``-v``. Callers never pass secrets in; the writer
also scrubs any value it was told is secret, as a second line of defence."""

from __future__ import annotations

import json
import re
import sys
import threading
from datetime import datetime, timezone
from typing import IO, Any


_TRACE_START = re.compile(rb'\{"ts": "[^"]*", "event": "')


def is_trace(head: bytes) -> bool:
    """Whether a file starting with ``head`` is a trace Luma wrote (its first event line)."""
    return _TRACE_START.match(head) is not None


class Telemetry:
    def __init__(self, trace_path: str | None = None, *, verbose: bool = False,
                 stderr: IO[str] | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.verbose = verbose
        self.stderr = stderr if stderr is not None else sys.stderr
        self.trace_path = trace_path
        self._trace: IO[str] | None = open(trace_path, "w", encoding="utf-8") if trace_path else None
        self._secrets: set[str] = set()
        self._lock = threading.Lock()

    def add_secret(self, value: str) -> None:
        """A value that must never be written: replaced by ``[secret]`` wherever it appears."""
        if value and len(value) >= 3:
            self._secrets.add(value)

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        record: dict[str, Any] = {"ts": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                                  "event": event}
        record.update(fields)
        with self._lock:
            self.events.append(record)
            if self._trace is not None or self.verbose:
                line = self._scrub(json.dumps(record, ensure_ascii=False, default=str))
                if self._trace is not None:
                    try:
                        self._trace.write(line + "\n")
                        self._trace.flush()
                    except OSError as exc:
                        self._trace_failed(exc)
                if self.verbose:
                    self.stderr.write(self._scrub(_human(record)) + "\n")
        return record

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "[secret]")
        return text

    def _trace_failed(self, exc: OSError) -> None:
        """A trace that cannot be written (a full disk) does not stop the run: the run's
        effects matter more than its record. Say so once and stop writing it."""
        trace, self._trace = self._trace, None
        try:
            if trace is not None:
                trace.close()
        except OSError:
            pass
        self.stderr.write(f"warning: cannot write the trace file {self.trace_path}: "
                          f"{exc.strerror or exc}; the trace is incomplete\n")

    def close(self) -> None:
        if self._trace is not None:
            trace, self._trace = self._trace, None
            try:
                trace.close()
            except OSError as exc:
                self._trace_failed(exc)


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
