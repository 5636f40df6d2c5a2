"""The tool pipeline, one step at a time (RUNTIME.md §3): each refusal with its code and its
exact message, validation on both sides, and how handler errors become Luma errors."""

from __future__ import annotations

import asyncio
import io

import pytest

from luma.runtime.errors import LumaError
from luma.runtime.interpreter import Interpreter
from runtime.harness import (
    call,
    call_error,
    context,
    fixture_handlers,
    fixture_program,
    last_event,
    program,
    runtime,
)

CALC = {"a": 2, "b": 3, "operation": "add"}
CREDENTIAL = {"DB_PASSWORD": "pw-123456"}


@pytest.fixture(scope="module")
def handlers():
    return fixture_handlers()


@pytest.fixture
def rt(handlers):
    return runtime(fixture_program(), handlers, env=CREDENTIAL)


# 1 registry lookup ----------------------------------------------------------------------------


def test_unknown_tool(rt):
    err = call_error(rt, "nope", {})
    assert (err.code, err.message, err.retryable, err.tool) == (
        "TOOL_NOT_FOUND", "Unknown tool 'nope'.", False, "nope")
    assert last_event(rt)["outcome"] == "TOOL_NOT_FOUND"


def test_declared_tool_without_handler(rt):
    err = call_error(rt, "unregistered", {"x": 1})
    assert err.code == "TOOL_NOT_FOUND"
    assert err.message == "'unregistered' is not registered in the tool registry."


def test_a_handler_registered_later_is_found(handlers):
    rt = runtime(fixture_program(), {}, env=CREDENTIAL)
    assert call_error(rt, "calculate", CALC).code == "TOOL_NOT_FOUND"
    rt.handlers["calculate"] = handlers["calculate"]
    assert call(rt, "calculate", CALC) == {"result": 5}


# 2 credential ---------------------------------------------------------------------------------


@pytest.mark.parametrize("env", [{}, {"DB_PASSWORD": ""}])
def test_missing_or_empty_credential(handlers, env):
    rt = runtime(fixture_program(), handlers, env=env)
    err = call_error(rt, "db_write", {"table": "t", "value": "v"}, context(rt, "Free"))
    assert (err.code, err.message) == ("TOOL_PERMISSION_DENIED",
                                       "Tool 'db_write' is missing credential: DB_PASSWORD.")


def test_credential_is_checked_at_top_level_too(handlers):
    rt = runtime(fixture_program(), handlers, env={})
    err = call_error(rt, "db_write", {"table": "t", "value": "v"})
    assert err.message == "Tool 'db_write' is missing credential: DB_PASSWORD."


def test_credential_is_checked_before_the_input(handlers):
    rt = runtime(fixture_program(), handlers, env={})
    err = call_error(rt, "db_write", "not an object")
    assert err.code == "TOOL_PERMISSION_DENIED"


# 3 scope --------------------------------------------------------------------------------------


def test_scope_not_granted(rt):
    err = call_error(rt, "db_write", {"table": "t", "value": "v"}, context(rt, "Unscoped"))
    assert (err.code, err.message) == ("TOOL_PERMISSION_DENIED",
                                       "Tool 'db_write' scope access was denied: db:write.")


def test_no_scope_check_without_tool_scopes(rt):
    assert call(rt, "db_write", {"table": "t", "value": "v"}, context(rt, "Free")) == {
        "ok": True, "table": "t"}


def test_no_scope_check_at_top_level(rt):
    assert call(rt, "db_write", {"table": "t", "value": "v"})["ok"] is True


# 4 deny_write ---------------------------------------------------------------------------------


def test_deny_write(rt):
    err = call_error(rt, "db_write", {"table": "t", "value": "v"}, context(rt, "ReadOnly"))
    assert (err.code, err.message) == (
        "TOOL_PERMISSION_DENIED",
        "Tool 'db_write' is a write tool and agent 'ReadOnly' has tool_policy deny_write.")


def test_deny_write_lets_read_tools_run():
    prog = program("""
schema R { ok: bool }
tool look(q: string) -> R { side_effects: "read" }
agent A { tools: [look], tool_policy: "deny_write" }
""")
    rt = runtime(prog, {"look": lambda input: {"ok": True}})
    assert call(rt, "look", {"q": "x"}, context(rt, "A")) == {"ok": True}


# 5 approval -----------------------------------------------------------------------------------

WRITE = {"table": "t", "value": "v"}


def test_approval_refused_when_not_interactive(handlers):
    rt = runtime(fixture_program(), handlers, env=CREDENTIAL)
    err = call_error(rt, "db_write", WRITE, context(rt, "Writer"))
    assert (err.code, err.message) == (
        "TOOL_PERMISSION_DENIED",
        "Tool 'db_write' requires approval: it is not in LUMA_APPROVED_TOOLS.")


def test_approval_from_the_environment(handlers):
    env = {**CREDENTIAL, "LUMA_APPROVED_TOOLS": "send_email, db_write"}
    rt = runtime(fixture_program(), handlers, env=env)
    assert call(rt, "db_write", WRITE, context(rt, "Writer")) == {"ok": True, "table": "t"}


def test_approval_list_is_matched_by_whole_name(handlers):
    env = {**CREDENTIAL, "LUMA_APPROVED_TOOLS": "db_write_all,db"}
    rt = runtime(fixture_program(), handlers, env=env)
    assert call_error(rt, "db_write", WRITE, context(rt, "Writer")).code == \
        "TOOL_PERMISSION_DENIED"


@pytest.mark.parametrize("answer", ["y\n", "yes\n", "Y\n"])
def test_interactive_approval(handlers, answer):
    rt = runtime(fixture_program(), handlers, env=CREDENTIAL, interactive=True)
    rt.pipeline.stdin = io.StringIO(answer)
    assert call(rt, "db_write", WRITE, context(rt, "Writer"))["ok"] is True
    prompt = rt.stderr.getvalue()
    assert "Tool 'db_write' wants to run (side effects: write)." in prompt
    assert '"table":"t"' in prompt and "Approve this call? [y/N]" in prompt
    assert "pw-123456" not in prompt


@pytest.mark.parametrize("answer", ["n\n", "\n", "", "maybe\n"])
def test_interactive_decline(handlers, answer):
    rt = runtime(fixture_program(), handlers, env=CREDENTIAL, interactive=True)
    rt.pipeline.stdin = io.StringIO(answer)
    err = call_error(rt, "db_write", WRITE, context(rt, "Writer"))
    assert (err.code, err.message) == ("TOOL_PERMISSION_DENIED",
                                       "Tool 'db_write' was not approved.")


def test_approval_only_applies_to_write_tools():
    prog = program("""
schema R { ok: bool }
tool look(q: string) -> R { side_effects: "read" }
agent A { tools: [look], tool_policy: "approval" }
""")
    rt = runtime(prog, {"look": lambda input: {"ok": True}})
    assert call(rt, "look", {"q": "x"}, context(rt, "A")) == {"ok": True}


def test_policy_refusals_do_not_count_for_the_circuit():
    prog = program("""
schema R { ok: bool }
tool w(q: string) -> R { side_effects: "write" }
agent A { tools: [w], tool_policy: "deny_write", tool_failure_limit: 1 }
""")
    rt = runtime(prog, {"w": lambda input: {"ok": True}})
    ctx = context(rt, "A")
    for _ in range(3):
        assert call_error(rt, "w", {"q": "x"}, ctx).code == "TOOL_PERMISSION_DENIED"
    assert ctx.method.failures == 0


# 6 input validation ---------------------------------------------------------------------------


def test_input_out_of_range(rt):
    err = call_error(rt, "calculate", {"a": 2000000, "b": 1, "operation": "add"})
    assert (err.code, err.message, err.retryable) == (
        "TOOL_INPUT_INVALID",
        "[TOOL_INPUT_INVALID] calculate.input.a: 2000000 is greater than the maximum of 1000000",
        False)


def test_every_input_violation_is_listed(rt):
    err = call_error(rt, "calculate", {"a": -1, "operation": "divide", "c": 1})
    assert err.message == (
        "[TOOL_INPUT_INVALID] calculate.input.a: -1 is less than the minimum of 0; "
        "calculate.input.operation: 'divide' is not one of 'add', 'multiply'; "
        "calculate.input: missing required field 'b'; calculate.input: unknown field 'c'")


@pytest.mark.parametrize("value, kind", [([1, 2], "list"), ("text", "string"), (None, "null"),
                                         (3, "int")])
def test_input_that_is_not_an_object(rt, value, kind):
    err = call_error(rt, "calculate", value)
    assert (err.code, err.message) == (
        "TOOL_INPUT_INVALID", f"[TOOL_INPUT_INVALID] calculate.input: expected object, got {kind}")


def test_defaults_are_filled_and_whole_floats_become_ints(rt):
    assert call(rt, "text_stats", {"text": "a b c"}) == {"characters": 5, "words": 3,
                                                         "limit": 10}
    result = call(rt, "text_stats", {"text": "a", "limit": 3.0})
    assert result["limit"] == 3 and type(result["limit"]) is int


def test_soft_rules_are_hard_on_input(rt):
    err = call_error(rt, "text_stats", {"text": "x" * 101})
    assert err.code == "TOOL_INPUT_INVALID"
    assert err.message.startswith("[TOOL_INPUT_INVALID] text_stats.input.text: ")
    assert "more than the maximum of 100" in err.message


def test_union_tag_is_written_when_one_member_fits(rt):
    assert call(rt, "file_document", {"doc": {"reference": "R-1"}}) == {"kind": "Receipt",
                                                                        "id": "R-1"}


def test_union_without_tag_that_fits_no_member(rt):
    err = call_error(rt, "file_document", {"doc": {"other": 1}})
    assert err.message == ("[TOOL_INPUT_INVALID] file_document.input.doc.kind must identify a "
                           "tagged union member.")


def test_the_handler_gets_a_copy_not_the_callers_value(rt):
    seen = []
    rt.handlers["calculate"] = lambda input: (seen.append(input), {"result": 1})[1]
    rt.pipeline.forget()
    value = {"a": 1, "b": 2, "operation": "add"}
    call(rt, "calculate", value)
    assert seen[0] == value and seen[0] is not value


# 11 output validation -------------------------------------------------------------------------


def test_tagged_union_output_must_carry_its_tag(rt):
    err = call_error(rt, "classify", {"text": "untagged"})
    assert (err.code, err.message) == (
        "TOOL_OUTPUT_INVALID",
        "[TOOL_OUTPUT_INVALID] classify.output.kind must identify a tagged union member.")


def test_tagged_union_output_with_tag(rt):
    assert call(rt, "classify", {"text": "receipt 7"}) == {"kind": "Receipt",
                                                           "reference": "R-7"}


def test_wrong_output_shape_lists_every_violation(rt):
    rt.handlers["calculate"] = lambda input: {"result": "five", "extra": True}
    rt.pipeline.forget()
    err = call_error(rt, "calculate", CALC)
    assert err.message == ("[TOOL_OUTPUT_INVALID] calculate.output.result: expected float, got "
                           "string; calculate.output: unknown field 'extra'")


def test_handler_returning_nothing(rt):
    rt.handlers["calculate"] = lambda input: None
    rt.pipeline.forget()
    err = call_error(rt, "calculate", CALC)
    assert err.message == "[TOOL_OUTPUT_INVALID] calculate.output: expected object, got null"


def test_soft_rule_on_output_warns_and_keeps_the_value(rt):
    assert call(rt, "score_text", {"text": "too much"}) == {"score": 120}
    warning = "warning[SOFT_RULE] score_text.output.score: 120 is greater than the maximum of 100"
    assert warning in rt.stderr.getvalue()
    assert rt.warnings == [{"code": "SOFT_RULE", "message": warning.split("] ", 1)[1]}]
    assert last_event(rt)["outcome"] == "ok"


def test_output_is_validated_on_the_direct_call_path_through_the_interpreter(handlers):
    prog = program("""
schema Invoice { invoice_number: string }
schema Receipt { reference: string }
schema Document = Invoice | Receipt tagged by kind
tool classify(text: string) -> Document {}
result = tool classify({ text: "untagged" })
""")
    rt = runtime(prog, handlers)
    with pytest.raises(LumaError) as caught:
        asyncio.run(Interpreter(rt).run_top_level())
    assert caught.value.message == ("[TOOL_OUTPUT_INVALID] classify.output.kind must identify a "
                                    "tagged union member.")


# 10 handler errors ----------------------------------------------------------------------------


def test_plain_exception_is_tool_failed(rt):
    err = call_error(rt, "broken", {"text": "x"})
    assert (err.code, err.message, err.retryable) == (
        "TOOL_FAILED", "Tool 'broken' failed: Unsupported operation", False)
    assert err.details == {"exception": "ValueError"}
    assert "Traceback" not in rt.stderr.getvalue()
    event = last_event(rt)
    assert event["outcome"] == "TOOL_FAILED"
    assert "Traceback (most recent call last)" in event["traceback"]
    assert "ValueError: Unsupported" in event["traceback"]


def test_exception_without_message_and_key_error(rt):
    def empty(input):
        raise RuntimeError()

    def missing_key(input):
        return {"result": {}["nope"]}

    rt.handlers["broken"] = empty
    rt.pipeline.forget()
    assert call_error(rt, "broken", {"text": "x"}).message == \
        "Tool 'broken' failed: RuntimeError"
    rt.handlers["broken"] = missing_key
    rt.pipeline.forget()
    assert call_error(rt, "broken", {"text": "x"}).message == \
        "Tool 'broken' failed: KeyError: 'nope'"


def test_handler_calling_exit_is_tool_failed(rt):
    def leave(input):
        raise SystemExit(3)

    rt.handlers["broken"] = leave
    rt.pipeline.forget()
    assert call_error(rt, "broken", {"text": "x"}).message == \
        "Tool 'broken' failed: the handler called exit(3)"


def test_typed_error_keeps_its_fields(rt):
    err = call_error(rt, "typed_error", {"code": "DB_TIMEOUT", "retryable": False})
    assert (err.code, err.message, err.retryable, err.tool) == (
        "DB_TIMEOUT", "The database timed out", False, "typed_error")
    assert err.details == {"table": "t"}
    assert err.to_value() == {"code": "DB_TIMEOUT", "message": "The database timed out",
                              "retryable": False, "tool": "typed_error",
                              "details": {"table": "t"}, "status": 503}
    assert last_event(rt)["outcome"] == "DB_TIMEOUT"


def test_typed_error_that_does_not_fit_its_schema(rt):
    err = call_error(rt, "bad_typed_error", {"code": "X"})
    assert (err.code, err.retryable) == ("TOOL_ERROR_INVALID", False)
    assert err.message == ("[TOOL_ERROR_INVALID] bad_typed_error.error: unknown field "
                           "'unexpected_field'")


def test_typed_error_caught_in_the_program(handlers):
    prog = program("""
schema CalcResult { result: float }
schema ToolError {
  code: string
  message: string
  retryable: bool
  details?: any
  status?: int
}
tool typed_error(code: string, retryable: bool) -> CalcResult { error: ToolError }
try {
  tool typed_error({ code: "DB_DOWN", retryable: false })
} catch err {
  err
}
""")
    rt = runtime(prog, handlers)
    assert asyncio.run(Interpreter(rt).run_top_level()) == {
        "code": "DB_DOWN", "message": "The database timed out", "retryable": False,
        "tool": "typed_error", "details": {"table": "t"}, "status": 503}


# telemetry ------------------------------------------------------------------------------------


def test_tool_call_event_fields(rt):
    call(rt, "calculate", CALC, context(rt, "Free", mode="native", call_id="call_7"))
    event = last_event(rt)
    assert set(event) == {"ts", "event", "tool", "agent", "mode", "call_id", "duration_ms",
                          "attempts", "cache", "single_flight", "idempotent_replay", "outcome"}
    assert {k: event[k] for k in ("tool", "agent", "mode", "call_id", "attempts", "cache",
                                  "single_flight", "idempotent_replay", "outcome")} == {
        "tool": "calculate", "agent": "Free", "mode": "native", "call_id": "call_7",
        "attempts": 1, "cache": "off", "single_flight": False, "idempotent_replay": False,
        "outcome": "ok"}
    assert isinstance(event["duration_ms"], float) and event["duration_ms"] >= 0


def test_direct_call_event_has_no_call_id(rt):
    call(rt, "calculate", CALC)
    event = last_event(rt)
    assert "call_id" not in event and event["mode"] == "direct" and event["agent"] is None


def test_failed_call_event_carries_the_message(rt):
    call_error(rt, "calculate", {"a": "x", "b": 1, "operation": "add"})
    event = last_event(rt)
    assert event["outcome"] == "TOOL_INPUT_INVALID" and event["attempts"] == 0
    assert event["error"] == ("[TOOL_INPUT_INVALID] calculate.input.a: expected float, got "
                              "string")


def test_trace_file_gets_the_event(handlers, tmp_path):
    trace = tmp_path / "trace.jsonl"
    rt = runtime(fixture_program(), handlers, env=CREDENTIAL, trace=str(trace))
    call(rt, "calculate", CALC)
    rt.telemetry.close()
    import json

    start, end = (json.loads(line) for line in trace.read_text().splitlines())
    assert start["event"] == "tool.start" and start["input"] == CALC
    assert end["event"] == "tool.call" and end["outcome"] == "ok"
    assert end["input"] == CALC and end["result"] == {"result": 5.0}
