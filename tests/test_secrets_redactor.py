"""The run's SecretRedactor: the forms it matches, what it leaves alone, the secrets it knows
from start-up, and the fast path the pipeline takes when there is none."""

from __future__ import annotations

import asyncio
import io
import json
from urllib.parse import quote

import pytest

from luma.models.ask import AskEngine
from luma.runtime.errors import LumaToolError
from luma.runtime.secrets import (
    MIN_SECRET_LENGTH,
    RedactingStream,
    SecretRedactor,
)
from runtime.harness import call, call_error, program, runtime

SECRET = "Pä\"ss\\wörd'-77"


@pytest.mark.parametrize("text", [
    SECRET,
    repr(SECRET),                                   # '...' with \' and \\
    repr(SECRET + '"')[:-2] + "'",
    ascii(SECRET),                                  # \xe4, \xf6
    json.dumps(SECRET),                             # \" \\ \u00e4
    json.dumps(SECRET, ensure_ascii=False),
    SECRET.encode("unicode_escape").decode("ascii"),
    quote(SECRET, safe=""),
    json.dumps(repr(SECRET)),                       # a repr inside a JSON trace line
    json.dumps({"needs": repr({"db": {"password": SECRET}})}),
], ids=["raw", "repr", "repr-single", "ascii", "json-ascii", "json", "unicode_escape", "url",
        "json-of-repr", "json-of-repr-dict"])
def test_every_escaped_form_is_replaced(text: str) -> None:
    redactor = SecretRedactor()
    redactor.add(SECRET)
    out = redactor.redact(f"before {text} after")
    assert out.startswith("before ") and out.endswith(" after")
    assert "[secret]" in out
    assert "-77" not in out and "P" not in out, out  # no piece of it is left


def test_short_values_are_not_scrubbed_and_text_without_a_secret_is_the_same_object() -> None:
    redactor = SecretRedactor()
    redactor.add("x" * (MIN_SECRET_LENGTH - 1))
    redactor.add("")
    redactor.add(None)
    assert not redactor and len(redactor) == 0
    text = "approved xxxxx"
    assert redactor.redact(text) is text
    value = {"a": [1, "b"]}
    assert redactor.redact_value(value) is value


def test_a_json_value_is_redacted_in_its_keys_and_values_and_kept_otherwise() -> None:
    redactor = SecretRedactor()
    redactor.add("hunter2-token")
    value = {"hunter2-token": 1, "list": ["a hunter2-token b", 3, None, True],
             "same": {"x": "y"}}
    out = redactor.redact_value(value)
    assert out == {"[secret]": 1, "list": ["a [secret] b", 3, None, True], "same": {"x": "y"}}
    assert out["same"] is value["same"]


def test_the_stream_wrapper_redacts_each_write_and_passes_everything_else_through() -> None:
    redactor = SecretRedactor()
    inner = io.StringIO()
    stream = RedactingStream.wrap(inner, redactor)  # type: ignore[arg-type]
    assert RedactingStream.wrap(stream, redactor) is stream
    stream.write("early hunter2-token\n")          # not a secret yet
    redactor.add("hunter2-token")
    stream.write("late hunter2-token\n")
    assert stream.getvalue() == "early hunter2-token\nlate [secret]\n"  # type: ignore[attr-defined]
    assert stream.isatty() is False


PROGRAM = """
schema Db { user: string, password: string }
schema Out { text: string }
tool early(x: string) -> Out { description: "Runs first, declares nothing." }
tool guarded(x: string) -> Out { description: "Never runs.", credential: "GUARD_TOKEN" }
tool reader(x: string) -> Out { description: "Reads the db.", needs db: Db }
model Main { provider: "openai", name: "gpt-test" }
"""
CONFIG = {"tool_contexts": {"db": {"user": {"env": "DB_USER"},
                                   "password": {"env": "DB_PASSWORD"},
                                   "extra": {"env": "DB_EXTRA", "parse": "json"},
                                   "port": {"env": "DB_PORT", "parse": "integer"}}}}
ENV = {"GUARD_TOKEN": "guard-token-1f2e", "DB_USER": "db-user-77a1",
       "DB_PASSWORD": "db-pass-9c3d", "DB_EXTRA": '{"inner": ["inner-token-5b"]}',
       "DB_PORT": "543210", "OPENAI_API_KEY": "sk-never-used-8d7c"}


def test_every_secret_the_program_can_use_is_known_before_any_call() -> None:
    leaked = " ".join(ENV[k] for k in ("GUARD_TOKEN", "DB_USER", "DB_PASSWORD", "OPENAI_API_KEY"))

    def early(input):
        raise LumaToolError("EARLY", f"{leaked} inner-token-5b", details={"port": "543210"})

    rt = runtime(program(PROGRAM), {"early": early, "guarded": early, "reader": early},
                 env=ENV, config=CONFIG)
    rt.ask_engine = AskEngine(rt)
    err = call_error(rt, "early", {"x": "a"})
    assert err.message == "[secret] [secret] [secret] [secret] [secret]"
    # an integer context is not secret-like: scrubbing it would corrupt ordinary numbers
    assert err.details == {"port": "543210"}
    assert "543210" not in rt.secrets


def test_a_value_that_does_not_parse_at_start_up_is_left_to_the_call_that_needs_it() -> None:
    env = {**ENV, "DB_EXTRA": "{not json"}
    rt = runtime(program(PROGRAM), {"early": lambda input: {"text": "ok"}},
                 env=env, config=CONFIG)
    assert "{not json" in rt.secrets            # the raw text of a json field is still secret
    assert call(rt, "early", {"x": "a"}) == {"text": "ok"}


def _count_scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    scans = [0]
    original = SecretRedactor._scan

    def counting(self: SecretRedactor, pattern, text: str) -> str:  # type: ignore[no-untyped-def]
        scans[0] += 1
        return original(self, pattern, text)

    monkeypatch.setattr(SecretRedactor, "_scan", counting)
    return scans


FAST = """
schema Out { text: string }
tool fail(x: string) -> Out { description: "Always fails." }
tool ok(x: string) -> Out { description: "Always answers." }
"""


def _loop(rt, n: int) -> None:  # type: ignore[no-untyped-def]
    from runtime.harness import context

    async def go() -> None:
        ctx = context(rt)
        for i in range(n):
            await rt.pipeline.call("ok", {"x": "a"}, ctx)
            try:
                await rt.pipeline.call("fail", {"x": "a"}, ctx)
            except Exception:
                pass

    asyncio.run(go())


def _raise(input):  # type: ignore[no-untyped-def]
    raise LumaToolError("NOPE", "no", details={"a": "b"})


def test_with_no_secret_the_pipeline_never_scans_a_text(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path) -> None:  # type: ignore[no-untyped-def]
    scans = _count_scans(monkeypatch)
    rt = runtime(program(FAST), {"ok": lambda input: {"text": "t"}, "fail": _raise},
                 trace=str(tmp_path / "t.jsonl"))
    _loop(rt, 500)
    rt.warn("SOFT_RULE", "a warning")
    assert scans[0] == 0
    # traced: each of the 1000 calls is a tool.start and a tool.call event, plus the warning
    assert rt.telemetry.emitted == 2001


def test_with_a_secret_every_failure_and_event_is_scanned(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path) -> None:  # type: ignore[no-untyped-def]
    scans = _count_scans(monkeypatch)
    rt = runtime(program(FAST), {"ok": lambda input: {"text": "t"}, "fail": _raise},
                 trace=str(tmp_path / "t.jsonl"))
    rt.secrets.add("hunter2-token")
    _loop(rt, 10)
    assert scans[0] > 0


ASK = """
model M {
  provider: "test"
  responses: "turns.json"
}
schema Out { text: string }
tool reveal(x: string) -> Out {
  description: "Answers with more than it should."
  side_effects: "read"
  credential: "REVEAL_TOKEN"
}
agent A {
  model: M
  tools: [reveal]
  tool_result_max_chars: 20
  fn run() -> string {
    ask "Reveal." -> string
  }
}
"""


def test_a_secret_cut_by_the_tool_result_limit_leaves_no_piece_in_the_prompt(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ask.harness import setup

    token = "tok-0123456789-abcdef"
    s = setup(ASK, tmp_path, handlers={"reveal": lambda input: {"text": f"key {token}"}},
              env={"REVEAL_TOKEN": token}, model=None,
              turns=[{"tool_calls": [{"name": "reveal", "arguments": {"x": "a"}}]},
                     {"content": "done"}])
    assert s.run() == "done"
    (result,) = [m.content for m in s.requests[1].messages if m.role == "tool"]
    full = '{"text":"key [secret]"}'
    assert result == (full[:20] + f"\n[truncated: {len(full) - 20} more characters were "
                      "omitted. Narrow the query or request a specific section.]")
    assert "tok-" not in result


CUT = """
schema Count {
  n: string @pattern("[0-9]+")
  label: string @pattern("[a-z]+") @severity("soft")
}
tool count(x: string) -> Count { description: "Counts.", credential: "COUNT_TOKEN" }
"""


def test_a_value_cut_short_in_a_validation_message_leaves_no_piece_of_a_secret() -> None:
    token = "tok-0123456789-abcdef"
    long = "x" * 66 + token                     # the message shows the first 70 characters
    rt = runtime(program(CUT), {"count": lambda input: {"n": long, "label": "ok"}},
                 env={"COUNT_TOKEN": token})
    err = call_error(rt, "count", {"x": "a"})
    assert err.message == (f"[TOOL_OUTPUT_INVALID] count.output.n: '{'x' * 66}[secret]' does "
                           "not match the pattern '[0-9]+'")
    rt2 = runtime(program(CUT), {"count": lambda input: {"n": "1", "label": long}},
                  env={"COUNT_TOKEN": token})
    assert call(rt2, "count", {"x": "a"}) == {"n": "1", "label": long}  # the program gets it all
    warning = rt2.stderr.getvalue()
    assert "tok-" not in warning and "[secret]" in warning, warning


APPROVE = """
schema Done { ok: bool }
tool store(text: string) -> Done {
  description: "Stores. Changes data."
  side_effects: "write"
  credential: "STORE_TOKEN"
}
agent W {
  tools: [store]
  tool_policy: "approval"
}
"""


def test_the_approval_prompt_cuts_the_input_after_its_secrets_are_out() -> None:
    from runtime.harness import context

    token = "tok-0123456789-abcdef"
    text = "x" * 1980 + token          # the prompt shows 2000 characters of the input
    rt = runtime(program(APPROVE), {"store": lambda input: {"ok": True}},
                 env={"STORE_TOKEN": token}, interactive=True)
    rt.pipeline.stdin = io.StringIO("n\n")
    err = call_error(rt, "store", {"text": text}, context(rt, "W"))
    assert err.code == "TOOL_PERMISSION_DENIED"
    prompt = rt.stderr.getvalue()
    assert f'  input: {{"text":"{"x" * 1980}[secret]"}}\n' in prompt
    assert "tok-" not in prompt
