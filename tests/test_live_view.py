"""What ``-v`` shows (CLI.md): plain lines when stderr is not a terminal, a ``rich`` live display
on a terminal (run under a pseudo-terminal), and the same facts with the tool calls' values in
``--trace`` (``--trace-no-values`` leaves them out). Secrets and ``needs`` values never appear."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from cli_runner import luma, on_a_terminal

TOKEN = "sk-live-secret-0123456789"
PASSWORD = "pw-needs-secret-77aa01"

SOURCE = """
schema Stats {
  words: int
  note: string
}
schema Vault { password: string }

tool count_words(text: string) -> Stats {
  description: "Count the words of a text."
  side_effects: "read"
  credential: "DESK_TOKEN"
  needs vault: Vault
}

model Offline {
  provider: "test"
  call_tools: [count_words]
}

agent Desk {
  model: Offline
  tools: [count_words]

  fn run(text: string) -> string {
    stats = tool count_words({ text: text })
    ask "Count the words of: {text}" -> string
  }
}
"""

TOOLS = """
def count_words(input, needs=None):
    words = input["text"].split()
    return {"words": len(words), "note": f"vault {needs['vault']['password']} " + "x" * 200}
"""

CONFIG = {"tool_contexts": {"vault": {"password": {"env": "DESK_VAULT_PASSWORD"}}}}

ENV = {"DESK_TOKEN": TOKEN, "DESK_VAULT_PASSWORD": PASSWORD}


@pytest.fixture()
def desk(tmp_path: Path) -> list[str]:
    (tmp_path / "desk.luma").write_text(SOURCE)
    (tmp_path / "desk_tools.py").write_text(TOOLS)
    (tmp_path / "luma.config.json").write_text(json.dumps(CONFIG))
    # the argument holds the credential's value: it is scrubbed from what is shown too
    return [str(tmp_path / "desk.luma"), "--tool-module", str(tmp_path / "desk_tools.py"),
            "--arg", f"text=two words {TOKEN}"]


def _no_durations(text: str) -> str:
    return re.sub(r"in \d+(\.\d+)? ms", "in N ms", text)


NOTE = "vault [secret] " + "x" * 200
CUT = json.dumps({"words": 3, "note": NOTE}, separators=(", ", ": "))[:119] + "…"

PLAIN = f"""\
  agent Desk.run
  tool count_words [direct] {{"text": "two words [secret]"}}
  tool count_words [direct] -> ok in N ms: {CUT}
  model Offline turn 1: request (1 message, tools count_words)
  model Offline turn 1 -> ok (finish tool_calls, 0 in / 0 out tokens, 1 tool call) in N ms
  tool count_words [native] {{"text": "text"}}
  tool count_words [native] -> ok in N ms: {CUT.replace('"words": 3', '"words": 1')}
  model Offline turn 1 <- tool count_words result: ok (236 chars)
  model Offline turn 2: request (3 messages, tools count_words)
  model Offline turn 2 -> ok (finish stop, 0 in / 0 out tokens, 0 tool calls) in N ms
"""


def test_verbose_writes_one_plain_line_per_event_when_stderr_is_not_a_terminal(
        desk: list[str]) -> None:
    r = luma(*desk, "-v", env=ENV)
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout) == "value"
    assert _no_durations(r.stderr) == PLAIN
    assert TOKEN not in r.stderr and PASSWORD not in r.stderr


def test_the_trace_carries_tool_values_redacted(desk: list[str], tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    r = luma(*desk, "--trace", str(trace), env=ENV)
    assert r.code == 0, r.stderr
    assert r.stderr == ""
    text = trace.read_text()
    assert TOKEN not in text and PASSWORD not in text
    events = [json.loads(line) for line in text.splitlines()]
    assert [e["event"] for e in events if e["event"].startswith("tool.")] == [
        "tool.start", "tool.call", "tool.start", "tool.call"]
    start, call = [e for e in events if e["event"].startswith("tool.")][:2]
    assert {k: v for k, v in start.items() if k != "ts"} == {
        "event": "tool.start", "tool": "count_words", "agent": "Desk", "mode": "direct",
        "input": {"text": "two words [secret]"}}
    assert call["input"] == {"text": "two words [secret]"}
    assert call["result"] == {"words": 3, "note": NOTE}  # whole in the trace, never cut
    native = [e for e in events if e["event"] == "tool.start"][1]
    assert native["call_id"] == "call_1" and native["mode"] == "native"


def test_trace_no_values_leaves_the_values_out(desk: list[str], tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    r = luma(*desk, "--trace", str(trace), "--trace-no-values", "-v", env=ENV)
    assert r.code == 0, r.stderr
    assert _no_durations(r.stderr) == PLAIN  # -v still shows them
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    tools = [e for e in events if e["event"].startswith("tool.")]
    assert [e["event"] for e in tools] == ["tool.start", "tool.call", "tool.start",
                                           "tool.call"]
    for event in tools:
        assert "input" not in event and "result" not in event
    assert "two words" not in trace.read_text()


WARNS = """
schema Out { n: int @range(0, 0) @severity("soft") }
tool count(n: int) -> Out { description: "Echo n." }
tool count({ n: 5 })
"""


def test_each_warning_once_with_verbose(tmp_path: Path) -> None:
    (tmp_path / "w.luma").write_text(WARNS)
    (tmp_path / "w_tools.py").write_text("def count(input):\n    return {'n': input['n']}\n")
    r = luma(str(tmp_path / "w.luma"), "--tool-module", str(tmp_path / "w_tools.py"), "-v")
    assert r.code == 0, r.stderr
    assert _no_durations(r.stderr) == (
        '  tool count [direct] {"n": 5}\n'
        "warning[SOFT_RULE] count.output.n: 5 is greater than the maximum of 0\n"
        '  tool count [direct] -> ok in N ms: {"n": 5}\n')
    text = terminal_run([str(tmp_path / "w.luma"), "--tool-module",
                         str(tmp_path / "w_tools.py"), "-v"])
    assert text.count("SOFT_RULE") == 1, text


def terminal_run(args: list[str], env: dict[str, str] | None = None) -> str:
    """``luma ARGS`` with stderr on a pseudo-terminal: what the terminal received."""
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    environ.update({"TERM": "xterm-256color", "COLUMNS": "200", **(env or {})})
    received, child = on_a_terminal(args, environ, stdout=subprocess.PIPE)
    assert child.wait(timeout=30) == 0
    assert child.stdout is not None
    assert json.loads(child.stdout.read())
    child.stdout.close()
    return received.decode("utf-8")


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_on_a_terminal_a_live_display_shows_what_runs(desk: list[str]) -> None:
    received = terminal_run(desk + ["-v"], ENV)
    assert TOKEN not in received and PASSWORD not in received
    shown = _plain(received)
    assert "\x1b[" in received  # drawn with the terminal's controls
    # while it runs: the current method, the tool call with its arguments, the model request
    assert "▶ Desk.run" in shown
    assert '⋯ tool count_words [direct] {"text": "two words [secret]"}' in shown
    assert '⋯ tool count_words [native] {"text": "text"}' in shown
    assert "⋯ model Offline turn 1: waiting for the answer" in shown
    # when each is done: its line, with the outcome and the (cut) result
    assert _no_durations(shown).count(
        f"  tool count_words [direct] -> ok in N ms: {CUT}") == 1
    assert "  model Offline turn 2 -> ok (finish stop" in shown
