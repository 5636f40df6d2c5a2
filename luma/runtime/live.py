"""What ``-v`` shows (CLI.md): on a terminal a ``rich`` live display of the run — the current
agent method, the model requests in flight and each tool call with its arguments while it runs
— above which each finished step stays as a line; elsewhere the same lines, one per event.

The events arrive with every known secret already replaced (:mod:`luma.runtime.telemetry`);
values are shown as compact JSON cut to :data:`VALUE_CHARS` characters. Warnings are not
repeated here: the runtime writes each one once (through :meth:`LiveView.write` while the
display is up)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import IO, Any

VALUE_CHARS = 120
"""How much of an argument or a result a line shows."""


_showing: LiveView | None = None  # the one live display of the process, while it is up
_showing_lock = threading.Lock()


def view_for(stream: IO[str], redact: Callable[[str], str]) -> Any:
    """The live display on a terminal, plain lines elsewhere — and for a run that starts while
    another run's display is up (one terminal holds one display)."""
    global _showing
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError, OSError):
        terminal = False
    if terminal:
        with _showing_lock:
            if _showing is None:
                _showing = LiveView(stream, redact)
                return _showing
    return PlainView(stream, redact)


def shown(value: Any) -> str:
    """A value as a line shows it: compact JSON, cut to :data:`VALUE_CHARS` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    except ValueError:  # a circular value
        text = repr(value)
    return _cut(" ".join(text.split()))


def _count(n: Any, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _cut(text: str) -> str:
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS - 1] + "…"


def line(record: dict[str, Any]) -> str | None:
    """The plain line of one event (None: an event ``-v`` does not show)."""
    event = record["event"]
    if event == "warning":
        return None  # the runtime writes each warning itself, once
    if event == "agent.call":
        return f"  agent {record.get('agent')}.{record.get('fn')}"
    if event == "tool.start":
        head = f"  tool {record.get('tool')} [{record.get('mode')}]"
        return f"{head} {shown(record['input'])}" if "input" in record else f"{head} ..."
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
        text = (f"  tool {record.get('tool')} [{record.get('mode')}] -> {record.get('outcome')} "
                f"in {record.get('duration_ms')} ms{more}")
        if "result" in record:
            return f"{text}: {shown(record['result'])}"
        if record.get("error"):
            return f"{text}: {_cut(' '.join(str(record['error']).split()))}"
        return text
    where = f"  model {record.get('model')} turn {record.get('turn')}"
    if event == "ask.request":
        tools = record.get("tools") or []
        offered = f", tools {', '.join(tools)}" if tools else ""
        return f"{where}: request ({_count(record.get('messages'), 'message')}{offered})"
    if event == "ask.response":
        outcome = record.get("outcome")
        if "tokens_in" not in record:
            return f"{where} -> {outcome} in {record.get('latency_ms')} ms"
        return (f"{where} -> {outcome} (finish {record.get('finish_reason')}, "
                f"{record.get('tokens_in')} in / {record.get('tokens_out')} out tokens, "
                f"{_count(record.get('tool_calls'), 'tool call')}) in "
                f"{record.get('latency_ms')} ms")
    if event == "ask.tool_result":
        return (f"{where} <- tool {record.get('tool')} result: {record.get('outcome')} "
                f"({record.get('chars')} chars)")
    if event == "ask.invalid_answer":
        errors = "; ".join(str(e) for e in record.get("errors") or [])
        return f"{where}: invalid answer (attempt {record.get('attempt')}): {errors}"
    bits = " ".join(f"{k}={v}" for k, v in record.items() if k not in ("ts", "event"))
    return f"  {event} {bits}"


class PlainView:
    """One line per event on a stream that is not a terminal."""

    live = False

    def __init__(self, stream: IO[str], redact: Callable[[str], str]) -> None:
        self.stream = stream
        self.redact = redact  # a second line of defence: the events come redacted

    def event(self, record: dict[str, Any]) -> None:
        text = line(record)
        if text is not None:
            self.stream.write(self.redact(text) + "\n")

    def write(self, text: str) -> None:
        self.stream.write(text)

    def close(self) -> None:
        pass


class LiveView:
    """A ``rich`` live display: finished steps scroll up as lines; below them, redrawn on each
    event, the current agent method, the model requests in flight and the tool calls
    running."""

    live = True

    def __init__(self, stream: IO[str], redact: Callable[[str], str]) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(file=stream, highlight=False)
        self.redact = redact
        self.method: str | None = None
        self.models: dict[tuple[Any, ...], str] = {}
        self.tools: dict[tuple[Any, ...], list[str]] = {}
        self._live = Live(self._render(), console=self.console, auto_refresh=False,
                          transient=True, redirect_stdout=False, redirect_stderr=False)
        self._live.start()
        self._stopped = False

    def event(self, record: dict[str, Any]) -> None:
        event = record["event"]
        if event == "agent.call":
            self.method = f"{record.get('agent')}.{record.get('fn')}"
        elif event == "ask.request":
            self.models[_model_key(record)] = (f"model {record.get('model')} turn "
                                               f"{record.get('turn')}: waiting for the answer")
        elif event == "ask.response":
            self.models.pop(_model_key(record), None)
        elif event == "tool.start":
            running = (line(record) or "").strip()
            self.tools.setdefault(_tool_key(record), []).append(running)
        elif event == "tool.call":
            calls = self.tools.get(_tool_key(record))
            if calls:
                calls.pop(0)
                if not calls:
                    del self.tools[_tool_key(record)]
        text = line(record) if event != "tool.start" else None
        if text is not None:
            self._print(self.redact(text))
        self._refresh()

    def write(self, text: str) -> None:
        self._print(self.redact(text).rstrip("\n"))  # a secret may end with a newline
        self._refresh()

    def close(self) -> None:
        global _showing
        if not self._stopped:
            self._stopped = True
            self._live.stop()
            with _showing_lock:
                if _showing is self:
                    _showing = None

    def _print(self, text: str) -> None:
        from rich.text import Text

        self.console.print(Text(text), soft_wrap=True)

    def _refresh(self) -> None:
        if not self._stopped:
            self._live.update(self._render(), refresh=True)

    def _render(self) -> Any:
        from rich.text import Text

        out = Text()
        if self.method is not None:
            out.append(f"▶ {self.method}", style="bold")
        for text in self.models.values():
            out.append(f"\n  ⋯ {text}", style="cyan")
        for running in self.tools.values():
            for text in running:
                out.append(f"\n  ⋯ {self.redact(text)}", style="yellow")
        return out


def _model_key(record: dict[str, Any]) -> tuple[Any, ...]:
    return record.get("model"), record.get("agent"), record.get("turn"), record.get("attempt")


def _tool_key(record: dict[str, Any]) -> tuple[Any, ...]:
    return record.get("tool"), record.get("mode"), record.get("call_id"), record.get("agent")
