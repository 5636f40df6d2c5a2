"""The ask flow (MODELS.md §2), driven by scripted turns of the offline model, asserting the
requests the engine sends and the tool results the model gets back."""

from __future__ import annotations

import io
import json

import pytest

from ask import tools as T
from ask.harness import messages, setup
from luma.models.ask import NOT_PERMITTED_TEXT
from luma.models.base import ToolCall
from luma.schema.compile import tool_input_name

SCHEMAS = """
schema CalcResult { result: float }
schema TextStats { characters: int, words: int }
schema Echo { text: string }
schema Answer {
  summary: string
  total: float @range(0, 1000)
  note?: string
}
schema Database { url: string }
"""

TOOLS = """
tool calculate(
  a: float @range(0, 1000000),
  b: float @range(0, 1000000),
  operation: enum["add", "multiply"]
) -> CalcResult {
  description: "Add or multiply two numbers."
}
tool text_stats(text: string) -> TextStats {
  description: "Count words."
  side_effects: "read"
}
"""

HANDLERS = {"calculate": T.calculate, "text_stats": T.text_stats, "flaky": T.flaky,
            "broken": T.broken, "echo": T.echo}

ANSWER = {"summary": "ok", "total": 5}


def agent(body: str = 'ask "Sum 2 and 3." -> Answer', *, config: str = "",
          returns: str = "-> Answer", tools: str = "[text_stats, calculate]") -> str:
    return f"""
agent A {{
  model: M
  system: "Be careful."
  tools: {tools}
  {config}
  fn run() {returns} {{
    {body}
  }}
}}
"""


def calls(*items: tuple[str, object]) -> dict[str, object]:
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in items]}


ADD = ("calculate", {"a": 2, "b": 3, "operation": "add"})


# ------------------------------------------------------------------------------ requests


def test_first_request_has_no_format_then_strict_after_a_tool_call(tmp_path):
    s = setup(SCHEMAS + TOOLS + agent(), tmp_path, handlers=HANDLERS,
              turns=[calls(ADD), {"content": ANSWER}])
    assert s.run() == ANSWER
    first, second = s.requests
    assert messages(first) == [("system", "Be careful."), ("user", "Sum 2 and 3.")]
    assert first.response_format is None
    assert [t.name for t in first.tools] == ["calculate", "text_stats"]   # sorted by name
    assert first.tool_choice == "auto"
    expected = s.runtime.schemas.standalone("Answer")
    expected.pop("$schema")
    assert second.response_format is not None
    assert second.response_format.name == "Answer"
    assert second.response_format.schema == expected
    assistant, result = second.messages[2:]
    assert assistant.role == "assistant"
    assert assistant.tool_calls == (ToolCall("call_1", "calculate", ADD[1]),)
    assert (result.role, result.content, result.tool_call_id, result.tool_name,
            result.is_error) == ("tool", '{"result":5}', "call_1", "calculate", False)


def test_tool_parameters_are_the_neutral_input_schema_without_needs(tmp_path):
    source = SCHEMAS + TOOLS + """
tool lookup(key: string @desc("What to look up"), limit?: int @default(10)) -> Echo {
  description: "Look a key up."
  side_effects: "read"
  needs db: Database
}
""" + agent(tools="[lookup]")
    s = setup(source, tmp_path, handlers={**HANDLERS, "lookup": T.echo},
              turns=[{"content": ANSWER}])
    s.run()
    (spec,) = s.requests[0].tools
    expected = s.runtime.schemas.standalone(tool_input_name("lookup"))
    expected.pop("$schema")
    assert spec.parameters == expected
    assert "db" not in json.dumps(spec.parameters)
    assert spec.description == "Look a key up."


def test_without_tools_the_first_request_is_strict(tmp_path):
    s = setup(SCHEMAS + agent(tools="[]"), tmp_path, turns=[{"content": ANSWER}])
    assert s.run() == ANSWER
    (request,) = s.requests
    assert request.tools == ()
    assert request.response_format is not None and request.response_format.name == "Answer"


def test_a_string_without_tools_is_plain_text(tmp_path):
    s = setup(agent('ask "Say hello." -> string', tools="[]", returns="-> string"), tmp_path,
              turns=[{"content": "Hello there."}])
    assert s.run() == "Hello there."
    assert s.requests[0].response_format is None


def test_a_non_object_type_is_wrapped_and_unwrapped(tmp_path):
    s = setup(SCHEMAS + agent('ask "Totals?" -> CalcResult[]', tools="[]",
                              returns="-> CalcResult[]"),
              tmp_path, turns=[{"content": {"value": [{"result": 1}, {"result": 2.5}]}}])
    assert s.run() == [{"result": 1}, {"result": 2.5}]
    fmt = s.requests[0].response_format
    assert fmt is not None
    assert fmt.name == "CalcResult_list"
    assert fmt.schema == {
        "type": "object", "additionalProperties": False, "required": ["value"],
        "properties": {"value": {"type": "array", "items": {"$ref": "#/$defs/CalcResult"}}},
        "$defs": {"CalcResult": {"type": "object", "properties": {"result": {"type": "number"}},
                                 "required": ["result"], "additionalProperties": False}}}


def test_a_string_with_tools_is_wrapped_once_a_tool_was_called(tmp_path):
    s = setup(SCHEMAS + TOOLS + agent('ask "Sum." -> string', returns="-> string"), tmp_path,
              handlers=HANDLERS, turns=[calls(ADD), {"content": {"value": "It is 5."}}])
    assert s.run() == "It is 5."
    assert s.requests[0].response_format is None
    assert s.requests[1].response_format.schema["properties"] == {"value": {"type": "string"}}


def test_a_string_answered_as_text_before_any_tool_call_is_kept(tmp_path):
    s = setup(SCHEMAS + TOOLS + agent('ask "Hi?" -> string', returns="-> string"), tmp_path,
              handlers=HANDLERS, turns=[{"content": "Hi! No tools needed."}])
    assert s.run() == "Hi! No tools needed."


# ------------------------------------------------------------------------- visible tools


POLICY_TOOLS = """
tool delete_row(id: string) -> Echo {
  description: "Delete a row."
  side_effects: "write"
}
tool admin(text: string) -> Echo {
  description: "Admin things."
  scope: "admin"
}
tool paid(text: string) -> Echo {
  description: "A paid API."
  credential: "PAID_KEY"
}
"""


@pytest.mark.parametrize("config, env, visible", [
    ('tool_policy: "deny_write"', {}, ["admin", "calculate"]),
    ('tool_scopes: ["db"]', {}, ["calculate", "delete_row"]),
    ('tool_scopes: ["admin"]', {"PAID_KEY": "k-123456"},
     ["admin", "calculate", "delete_row", "paid"]),
    ('tool_policy: "approval"', {}, ["admin", "calculate"]),
    ('tool_policy: "approval"', {"LUMA_APPROVED_TOOLS": "delete_row"},
     ["admin", "calculate", "delete_row"]),
])
def test_visible_tools_leave_out_what_the_static_policy_refuses(tmp_path, config, env, visible):
    source = SCHEMAS + TOOLS + POLICY_TOOLS + agent(
        config=config, tools="[paid, delete_row, calculate, admin]")
    s = setup(source, tmp_path, handlers=HANDLERS, env=env, turns=[{"content": ANSWER}])
    s.run()
    assert [t.name for t in s.requests[0].tools] == visible


def test_a_tool_hidden_from_the_model_is_unknown_to_it(tmp_path):
    source = SCHEMAS + TOOLS + POLICY_TOOLS + agent(
        config='tool_policy: "deny_write"', tools="[delete_row, calculate]")
    s = setup(source, tmp_path, handlers={**HANDLERS, "delete_row": T.echo},
              turns=[calls(("delete_row", {"id": "r-1"})), {"content": ANSWER}])
    assert s.run() == ANSWER
    assert s.requests[1].messages[-1].content == (
        "There is no tool named 'delete_row'. Available tools: calculate. Pick one of those or "
        "answer without a tool.")
    assert not [e for e in s.runtime.telemetry.events if e["event"] == "tool.call"]


def test_using_tool_forces_it_on_the_first_request_only(tmp_path):
    s = setup(SCHEMAS + TOOLS + agent('ask "Sum." -> Answer using tool calculate'), tmp_path,
              handlers=HANDLERS, turns=[calls(ADD), {"content": ANSWER}])
    assert s.run() == ANSWER
    assert [r.tool_choice for r in s.requests] == ["calculate", "auto"]


def test_using_a_tool_the_policy_refuses_ends_the_ask(tmp_path):
    source = SCHEMAS + TOOLS + POLICY_TOOLS + agent(
        'ask "Clean up." -> Answer using tool delete_row', config='tool_policy: "deny_write"',
        tools="[delete_row, calculate]")
    s = setup(source, tmp_path, handlers=HANDLERS, turns=[{"content": ANSWER}])
    err = s.error()
    assert err.code == "TOOL_PERMISSION_DENIED"
    assert err.message == ("Tool 'delete_row' is a write tool and agent 'A' has tool_policy "
                           "deny_write.")
    assert s.requests == []


# ----------------------------------------------------------------------- order of calls


GAUGED = """
tool r1(text: string) -> Echo { description: "Read one.", side_effects: "read" }
tool r2(text: string) -> Echo { description: "Read two.", side_effects: "none" }
tool w1(text: string) -> Echo { description: "Write one.", side_effects: "write" }
tool w2(text: string) -> Echo { description: "Write two.", side_effects: "write" }
"""


def test_reads_run_concurrently_up_to_the_limit_and_writes_after_them_in_order(tmp_path):
    gauge = T.Gauge()
    handlers = {name: gauge.handler(name) for name in ("r1", "r2", "w1", "w2")}
    turn = calls(("w2", {"text": "a"}), ("r1", {"text": "b"}), ("r2", {"text": "c"}),
                 ("w1", {"text": "d"}), ("r1", {"text": "e"}), ("r2", {"text": "f"}))
    source = SCHEMAS + GAUGED + agent(tools="[r1, r2, w1, w2]",
                                      config="tool_concurrency: 2\n  tool_rate_limit: 10")
    s = setup(source, tmp_path, handlers=handlers, turns=[turn, {"content": ANSWER}])
    assert s.run() == ANSWER
    assert gauge.peak == 2
    reads, writes = gauge.started[:4], gauge.started[4:]
    assert sorted(reads) == ["r1:b", "r1:e", "r2:c", "r2:f"]
    assert writes == ["w2:a", "w1:d"]
    results = s.requests[1].messages[3:]
    assert [(m.tool_call_id, m.content) for m in results] == [
        (f"call_{i}", json.dumps({"text": t}, separators=(",", ":")))
        for i, t in enumerate("abcdef", start=1)]


def test_sync_read_handlers_of_one_turn_really_run_side_by_side(tmp_path):
    import threading

    # Each handler waits until the other has started: this only finishes when both run at once.
    barrier = threading.Barrier(2, timeout=10)

    def meet(input):
        barrier.wait()
        return {"text": input["text"]}

    source = SCHEMAS + GAUGED + agent(tools="[r1, r2]", config="tool_concurrency: 2")
    s = setup(source, tmp_path, handlers={"r1": meet, "r2": meet},
              turns=[calls(("r1", {"text": "a"}), ("r2", {"text": "b"})), {"content": ANSWER}])
    assert s.run() == ANSWER
    assert [e["outcome"] for e in s.events("tool.call")] == ["ok", "ok"]


def test_one_read_at_a_time_by_default(tmp_path):
    gauge = T.Gauge()
    handlers = {"r1": gauge.handler("r1", 0.01), "r2": gauge.handler("r2", 0.01)}
    source = SCHEMAS + GAUGED + agent(tools="[r1, r2]")
    s = setup(source, tmp_path, handlers=handlers,
              turns=[calls(("r1", {"text": "a"}), ("r2", {"text": "b"})), {"content": ANSWER}])
    s.run()
    assert gauge.peak == 1


def test_native_calls_go_through_the_pipeline_with_their_call_ids(tmp_path):
    s = setup(SCHEMAS + TOOLS + agent(), tmp_path, handlers=HANDLERS,
              turns=[{"tool_calls": [{"id": "tc-9", "name": "calculate", "arguments": ADD[1]}]},
                     {"content": ANSWER}])
    s.run()
    (event,) = s.events("tool.call")
    assert (event["tool"], event["mode"], event["call_id"], event["agent"], event["outcome"]) == \
        ("calculate", "native", "tc-9", "A", "ok")
    assert s.requests[1].messages[-1].tool_call_id == "tc-9"


# ------------------------------------------------------------- results the model can use


FAILING = """
tool flaky(text: string) -> Echo { description: "Sometimes busy.", side_effects: "read" }
tool broken(text: string) -> Echo { description: "Always fails.", side_effects: "read" }
tool echo(text: string) -> Echo { description: "Echo.", side_effects: "read" }
"""


def tool_results(s, index: int = 1) -> list[str | None]:
    return [m.content for m in s.requests[index].messages if m.role == "tool"]


def test_an_unknown_tool_name_gets_the_list_of_tools(tmp_path):
    s = setup(SCHEMAS + TOOLS + agent(), tmp_path, handlers=HANDLERS,
              turns=[calls(("get_ordr", {})), {"content": ANSWER}])
    assert s.run() == ANSWER
    assert tool_results(s) == [
        "There is no tool named 'get_ordr'. Available tools: calculate, text_stats. Pick one of "
        "those or answer without a tool."]
    assert s.requests[1].messages[-1].is_error


def test_arguments_that_are_not_json_say_where_parsing_broke(tmp_path):
    s = setup(SCHEMAS + TOOLS + agent(), tmp_path, handlers=HANDLERS,
              turns=[calls(("calculate", '{"a": 2 "b": 3}')), {"content": ANSWER}])
    s.run()
    assert tool_results(s) == [
        "The arguments for 'calculate' are not valid JSON: Expecting ',' delimiter at line 1, "
        "column 9. Send the arguments as one JSON object."]


def test_arguments_that_are_not_an_object(tmp_path):
    s = setup(SCHEMAS + TOOLS + agent(), tmp_path, handlers=HANDLERS,
              turns=[calls(("calculate", "[2, 3]")), {"content": ANSWER}])
    s.run()
    assert tool_results(s) == [
        "The arguments for 'calculate' must be a JSON object, not a list. Send the arguments "
        "as one JSON object."]


def test_invalid_arguments_list_each_failing_field_by_path(tmp_path):
    s = setup(SCHEMAS + TOOLS + agent(), tmp_path, handlers=HANDLERS,
              turns=[calls(("calculate", {"a": 2000000, "operation": "divide"})),
                     {"content": ANSWER}])
    assert s.run() == ANSWER
    assert tool_results(s) == [
        "The arguments for 'calculate' do not fit its input schema:\n"
        "- a: 2000000 is greater than the maximum of 1000000\n"
        "- operation: 'divide' is not one of 'add', 'multiply'\n"
        "- missing required field 'b'\n"
        "Fix those fields and call the tool again."]
    assert s.events("tool.call")[0]["outcome"] == "TOOL_INPUT_INVALID"


def test_a_retryable_error_after_its_retries_reaches_the_model_and_others_are_kept(tmp_path):
    s = setup(SCHEMAS + FAILING + agent(tools="[flaky, echo]",
                                        config="tool_concurrency: 2"),
              tmp_path, handlers=HANDLERS,
              turns=[calls(("flaky", {"text": "x"}), ("echo", {"text": "y"})),
                     {"content": ANSWER}])
    assert s.run() == ANSWER
    assert tool_results(s) == ["The service is busy; try again in a moment.", '{"text":"y"}']
    flags = [m.is_error for m in s.requests[1].messages if m.role == "tool"]
    assert flags == [True, False]


def test_a_non_retryable_error_ends_the_ask_and_the_retry_loop(tmp_path):
    s = setup(SCHEMAS + FAILING + agent(tools="[broken, echo]", config="retries: 3"),
              tmp_path, handlers=HANDLERS,
              turns=[calls(("echo", {"text": "y"}), ("broken", {"text": "x"})),
                     {"content": ANSWER}])
    err = s.error()
    assert (err.code, err.message) == ("TOOL_FAILED", "Tool 'broken' failed: the disk is on fire")
    assert len(s.requests) == 1
    outcomes = {e["tool"]: e["outcome"] for e in s.events("ask.tool_result")}
    assert outcomes == {"echo": "ok", "broken": "TOOL_FAILED"}   # the other result is kept


def test_a_declined_approval_ends_the_ask_without_naming_the_tool_to_the_model(tmp_path):
    source = SCHEMAS + TOOLS + POLICY_TOOLS + agent(config='tool_policy: "approval"',
                                                    tools="[delete_row]")
    s = setup(source, tmp_path, handlers={**HANDLERS, "delete_row": T.echo}, interactive=True,
              turns=[calls(("delete_row", {"id": "r-1"})), {"content": ANSWER}])
    s.runtime.pipeline.stdin = io.StringIO("n\n")
    err = s.error()
    assert (err.code, err.message) == ("TOOL_PERMISSION_DENIED",
                                       "Tool 'delete_row' was not approved.")
    (event,) = s.events("ask.tool_result")
    assert event["content"] == NOT_PERMITTED_TEXT
    assert len(s.requests) == 1


def test_an_open_circuit_ends_the_ask(tmp_path):
    s = setup(SCHEMAS + TOOLS + agent(config="tool_failure_limit: 1"), tmp_path,
              handlers=HANDLERS,
              turns=[calls(("calculate", {"a": -1, "b": 1, "operation": "add"})),
                     {"content": ANSWER}])
    err = s.error()
    assert err.code == "TOOL_CIRCUIT_OPEN"
    assert err.message == "Tool 'calculate' failed 1 times in agent 'A'; the circuit is open."


def test_a_long_result_is_truncated_with_a_notice_and_kept_whole_in_the_trace(tmp_path):
    text = "x" * 100
    s = setup(SCHEMAS + FAILING + agent(tools="[echo]", config="tool_result_max_chars: 20"),
              tmp_path, handlers=HANDLERS,
              turns=[calls(("echo", {"text": text})), {"content": ANSWER}])
    s.run()
    full = json.dumps({"text": text}, separators=(",", ":"))
    assert tool_results(s) == [
        full[:20] + f"\n[truncated: {len(full) - 20} more characters were omitted. Narrow the "
        "query or request a specific section.]"]
    (event,) = s.events("ask.tool_result")
    assert event["result"] == {"text": text}
    assert event["truncated"] == len(full) - 20


# -------------------------------------------------------------------------- rate limit


def test_calls_beyond_the_limit_are_not_run_and_the_next_request_offers_no_tools(tmp_path):
    T.LOG.clear()
    s = setup(SCHEMAS + TOOLS + agent(config="tool_rate_limit: 2"), tmp_path,
              handlers=HANDLERS,
              turns=[calls(ADD, ("text_stats", {"text": "a b"}),
                           ("calculate", {"a": 1, "b": 1, "operation": "multiply"})),
                     {"content": ANSWER}])
    assert s.run() == ANSWER
    assert sorted(T.LOG) == ["calculate:add", "text_stats"]
    assert tool_results(s)[2] == "Tool call limit reached; answer with what you have."
    assert s.requests[1].tools == ()
    assert s.requests[1].response_format is not None


def test_a_tool_call_after_the_limit_fails_the_ask(tmp_path):
    s = setup(SCHEMAS + TOOLS + agent(config="tool_rate_limit: 1"), tmp_path,
              handlers=HANDLERS, turns=[calls(ADD), calls(ADD), {"content": ANSWER}])
    err = s.error()
    assert err.code == "ASK_TOOL_LIMIT"
    assert err.message == ("The model asked for another tool after agent 'A' reached its "
                           "tool_rate_limit of 1 native call in one ask.")


def test_the_limit_resets_on_each_retry_attempt(tmp_path):
    T.LOG.clear()
    s = setup(SCHEMAS + TOOLS + agent(config="tool_rate_limit: 1\n  retries: 1"), tmp_path,
              handlers=HANDLERS,
              turns=[calls(ADD), {"content": "no idea"},
                     calls(("calculate", {"a": 1, "b": 1, "operation": "multiply"})),
                     {"content": ANSWER}])
    assert s.run() == ANSWER
    assert T.LOG == ["calculate:add", "calculate:multiply"]
    assert [len(r.tools) for r in s.requests] == [2, 0, 2, 0]


def test_the_limit_resets_on_a_new_ask(tmp_path):
    body = 'first = ask "One." -> Answer\n    ask "Two." -> Answer'
    s = setup(SCHEMAS + TOOLS + agent(body, config="tool_rate_limit: 1"), tmp_path,
              handlers=HANDLERS,
              turns=[calls(ADD), {"content": ANSWER}, calls(ADD), {"content": ANSWER}])
    assert s.run() == ANSWER
    assert [len(r.tools) for r in s.requests] == [2, 0, 2, 0]


# ----------------------------------------------------------------------------- answers


def test_an_invalid_answer_is_retried_with_the_errors(tmp_path):
    s = setup(SCHEMAS + agent(tools="[]", config="retries: 1"), tmp_path,
              turns=[{"content": {"summary": "x", "total": 5000}}, {"content": ANSWER}])
    assert s.run() == ANSWER
    retry = s.requests[1]
    assert messages(retry)[2:] == [
        ("assistant", '{"summary":"x","total":5000}'),
        ("user", "Your answer does not fit the required schema:\n"
                 "- total: 5000 is greater than the maximum of 1000\n"
                 "Answer again with only the corrected JSON.")]


def test_an_answer_that_is_not_json_is_retried(tmp_path):
    s = setup(SCHEMAS + agent(tools="[]", config="retries: 1"), tmp_path,
              turns=[{"content": "I am not sure."}, {"content": ANSWER}])
    assert s.run() == ANSWER
    assert messages(s.requests[1])[-1] == (
        "user", "Your answer was not accepted: the answer is not JSON (Expecting value at line "
                "1 column 1).\nAnswer again with only the corrected JSON.")


def test_after_the_last_attempt_the_ask_fails_with_the_last_errors(tmp_path):
    s = setup(SCHEMAS + agent(tools="[]", config="retries: 1"), tmp_path,
              turns=[{"content": {"summary": "x", "total": 5000}},
                     {"content": {"summary": 3, "total": -1}}])
    err = s.error()
    assert err.code == "ASK_OUTPUT_INVALID"
    assert err.message == (
        "The model's answer to A.run.ask does not fit Answer after 2 attempts: summary: "
        "expected string, got int; total: -1 is less than the minimum of 0")
    assert err.details["attempts"] == 2


def test_wrapped_answer_errors_name_the_value_path_for_the_model(tmp_path):
    s = setup(agent('ask "Numbers?" -> int[]', tools="[]", returns="-> int[]",
                    config="retries: 1"), tmp_path,
              turns=[{"content": {"value": [1, "two"]}}, {"content": {"value": [1, 2]}}])
    assert s.run() == [1, 2]
    assert "- value[1]: expected int, got string" in s.requests[1].messages[-1].content


def test_the_error_listing_sent_back_is_cut_at_4096_characters(tmp_path):
    s = setup(agent('ask "Numbers?" -> int[]', tools="[]", returns="-> int[]",
                    config="retries: 1"), tmp_path,
              turns=[{"content": {"value": ["x"] * 2000}}, {"content": {"value": [1]}}])
    assert s.run() == [1]
    feedback = s.requests[1].messages[-1].content
    listing, tail = feedback.rsplit("\n", 1)
    assert len(listing) == 4096 and listing.endswith("...")
    assert tail == "Answer again with only the corrected JSON."


@pytest.mark.parametrize("content", [
    'Here it is:\n```json\n{"summary": "ok", "total": 5}\n```\nAnything else?',
    'Sure. The answer is {"summary": "ok", "total": 5} as requested.',
    '```\n{"summary": "ok", "total": 5}\n```',
])
def test_json_inside_a_fence_or_after_a_sentence_is_found(tmp_path, content):
    s = setup(SCHEMAS + agent(tools="[]"), tmp_path, turns=[{"content": content}])
    assert s.run() == ANSWER


def test_null_for_an_optional_field_means_absent(tmp_path):
    s = setup(SCHEMAS + agent(tools="[]"), tmp_path,
              turns=[{"content": {"summary": "ok", "total": 5, "note": None}}])
    assert s.run() == ANSWER


def test_null_for_a_required_field_is_still_invalid(tmp_path):
    s = setup(SCHEMAS + agent(tools="[]"), tmp_path,
              turns=[{"content": {"summary": None, "total": 5}}])
    assert s.error().message.endswith("summary: expected string, got null")


def test_a_soft_rule_on_the_answer_warns_and_keeps_the_value(tmp_path):
    source = """
schema Score { score: int @range(0, 100) @severity("soft") }
""" + agent('ask "Score it." -> Score', tools="[]", returns="-> Score")
    s = setup(source, tmp_path, turns=[{"content": {"score": 120}}])
    assert s.run() == {"score": 120}
    assert ("warning[SOFT_RULE] A.run.ask.score: 120 is greater than the maximum of 100"
            in s.stderr)


# --------------------------------------------------------------------------- telemetry


def test_ask_events_carry_model_provider_turn_tokens_latency_and_finish_reason(tmp_path):
    s = setup(SCHEMAS + TOOLS + agent(), tmp_path, handlers=HANDLERS,
              turns=[calls(ADD), {"content": ANSWER}])
    s.run()
    requests, responses = s.events("ask.request"), s.events("ask.response")
    assert [(e["model"], e["provider"], e["turn"], e["agent"]) for e in requests] == \
        [("M", "test", 1, "A"), ("M", "test", 2, "A")]
    assert requests[0]["tools"] == ["calculate", "text_stats"]
    assert requests[0]["response_format"] is None and requests[1]["response_format"] == "Answer"
    assert [(e["turn"], e["tokens_in"], e["tokens_out"], e["finish_reason"])
            for e in responses] == [(1, 0, 0, "tool_calls"), (2, 0, 0, "stop")]
    assert all(isinstance(e["latency_ms"], float) for e in responses)


def test_a_top_level_ask_has_no_tools_and_no_system_prompt(tmp_path):
    s = setup(SCHEMAS + 'x = ask "Summarize." -> Answer\nx', tmp_path,
              turns=[{"content": ANSWER}], default_model="M")
    assert s.run(agent=None) == ANSWER
    (request,) = s.requests
    assert messages(request) == [("user", "Summarize.")]
    assert request.tools == () and request.response_format is not None
