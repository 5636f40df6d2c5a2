"""The offline ``test`` provider (MODELS.md §4–§5): which tools it calls, what it answers, and
scripted turns."""

from __future__ import annotations

import asyncio
import json

import pytest

from ask.harness import setup
from luma.models.base import (ChatRequest, Message, ModelSettings, ResponseFormat, ToolCall,
                              ToolSpec, Usage)
from luma.models.test import ScriptedTurns, TestProvider
from luma.runtime.errors import LumaError
from luma.runtime.errors import StartError
from luma.schema.formats import is_uuid

PROGRAM = """
schema CalcResult { result: float }
schema TextStats { characters: int, words: int }
schema Answer {
  summary: string
  total: float @range(10, 1000)
  kind: enum["short", "long"]
  contact: string @format("email")
  note?: string
}

tool calculate(
  a: float @range(0, 1000000),
  b: float @range(0, 1000000),
  operation: enum["add", "multiply"]
) -> CalcResult {
  description: "Add or multiply two numbers."
}
tool text_stats(text: string @example("Luma DSL")) -> TextStats {
  description: "Count words."
  side_effects: "read"
}
"""

HANDLERS = {
    "calculate": lambda input: {"result": input["a"] + input["b"]},
    "text_stats": lambda input: {"characters": len(input["text"]),
                                 "words": len(input["text"].split())},
}

SYNTHESIZED_ANSWER = {"summary": "summary", "total": 10.0, "kind": "short",
                      "contact": "contact@example.com"}


def program(model: str, ask: str = 'ask "Go." -> Answer') -> str:
    return PROGRAM + f"""
model Offline {{
  provider: "test"
  {model}
}}
agent A {{
  model: Offline
  tools: [text_stats, calculate]
  fn run() -> Answer {{
    {ask}
  }}
}}
"""


def first_calls(s) -> tuple[ToolCall, ...]:
    assistant = next(m for m in s.requests[1].messages if m.role == "assistant")
    return assistant.tool_calls


def test_call_tools_all_calls_each_visible_tool_once_in_name_order(tmp_path):
    s = setup(program(""), tmp_path, handlers=HANDLERS)
    assert s.run() == SYNTHESIZED_ANSWER
    assert first_calls(s) == (
        ToolCall("call_1", "calculate", {"a": 1.0, "b": 1.0, "operation": "add"}),
        ToolCall("call_2", "text_stats", {"text": "Luma DSL"}))
    assert [m.content for m in s.requests[1].messages if m.role == "tool"] == [
        '{"result":2.0}', '{"characters":8,"words":2}']
    assert len(s.requests) == 2
    assert all((e["tokens_in"], e["tokens_out"]) == (0, 0) for e in s.events("ask.response"))


def test_call_tools_lists_the_tools_to_call(tmp_path):
    s = setup(program("call_tools: [text_stats]"), tmp_path, handlers=HANDLERS)
    s.run()
    assert [c.name for c in first_calls(s)] == ["text_stats"]


def test_call_tools_none_answers_at_once_from_the_answer_type(tmp_path):
    s = setup(program('call_tools: "none"'), tmp_path, handlers=HANDLERS)
    assert s.run() == SYNTHESIZED_ANSWER
    (request,) = s.requests
    assert request.response_format is None and len(request.tools) == 2
    assert s.events("tool.call") == []


def test_using_tool_calls_only_the_forced_tool(tmp_path):
    s = setup(program('call_tools: "none"', 'ask "Go." -> Answer using tool calculate'),
              tmp_path, handlers=HANDLERS)
    s.run()
    assert [c.name for c in first_calls(s)] == ["calculate"]


def test_the_same_program_gives_the_same_output_every_time(tmp_path):
    outputs = set()
    for i in range(3):
        folder = tmp_path / str(i)
        folder.mkdir()
        s = setup(program(""), folder, handlers=HANDLERS)
        outputs.add(json.dumps([s.run(), [m.content for m in s.requests[1].messages]]))
    assert len(outputs) == 1


def test_plain_text_answers(tmp_path):
    source = """
model Offline { provider: "test" }
agent A {
  model: Offline
  fn run() -> string {
    ask "Say hi." -> string
  }
}
"""
    assert setup(source, tmp_path).run() == "value"


# --------------------------------------------------------------------- the provider alone


SETTINGS = ModelSettings(name="Offline", provider="test")
SPEC = ToolSpec("lookup", "Look up.", {"type": "object", "properties": {
    "id": {"type": "string", "format": "uuid"}}, "required": ["id"],
    "additionalProperties": False})


def complete(provider: TestProvider, request: ChatRequest):
    return asyncio.run(provider.complete(request))


def test_later_turns_answer_from_the_response_format():
    fmt = ResponseFormat("Out", {"type": "object", "properties": {"n": {"type": "integer"}},
                                 "required": ["n"], "additionalProperties": False})
    request = ChatRequest(SETTINGS, (Message("user", "hi"), Message("assistant", "x")),
                          (SPEC,), "auto", fmt)
    response = complete(TestProvider(SETTINGS, answer=None), request)
    assert (response.content, response.tool_calls, response.finish_reason, response.usage) == \
        ('{"n":1}', (), "stop", Usage(0, 0))


def test_tool_arguments_are_synthesized_from_the_input_schema():
    request = ChatRequest(SETTINGS, (Message("user", "hi"),), (SPEC,))
    first = complete(TestProvider(SETTINGS, answer={"type": "string"}), request)
    again = complete(TestProvider(SETTINGS, answer={"type": "string"}), request)
    (call,) = first.tool_calls
    assert (call.id, call.name, first.finish_reason) == ("call_1", "lookup", "tool_calls")
    assert is_uuid(call.arguments["id"])
    assert again.tool_calls == first.tool_calls


def test_call_ids_continue_after_the_calls_already_in_the_conversation():
    earlier = Message("assistant", None, (ToolCall("call_1", "lookup", {}),))
    request = ChatRequest(SETTINGS, (Message("system", "s"), Message("user", "hi")),
                          (SPEC,), "lookup")
    assert complete(TestProvider(SETTINGS, answer=None), request).tool_calls[0].id == "call_1"
    later = ChatRequest(SETTINGS, (Message("user", "hi"), earlier,
                                   Message("tool", "{}", tool_call_id="call_1")), (SPEC,))
    response = complete(TestProvider(SETTINGS, answer={"type": "integer"}), later)
    assert (response.tool_calls, response.content) == ((), "1")


# ------------------------------------------------------------------------ scripted turns


def test_scripted_turns_are_used_in_order_across_asks(tmp_path):
    source = PROGRAM + """
model Offline {
  provider: "test"
  responses: "turns.json"
}
agent A {
  model: Offline
  tools: [calculate]
  fn run() -> Answer {
    first = ask "One." -> Answer
    ask "Two." -> Answer
  }
}
"""
    one = {**SYNTHESIZED_ANSWER, "summary": "one"}
    two = {**SYNTHESIZED_ANSWER, "summary": "two"}
    s = setup(source, tmp_path, handlers=HANDLERS, model="",
              turns=[{"tool_calls": [{"name": "calculate",
                                      "arguments": {"a": 1, "b": 2, "operation": "add"}}]},
                     {"content": one}, {"content": two}])
    assert s.run() == two
    assert [e["finish_reason"] for e in s.events("ask.response")] == ["tool_calls", "stop",
                                                                      "stop"]


def test_running_out_of_scripted_turns_mid_flow(tmp_path):
    s = setup(program('responses: "turns.json"'), tmp_path, handlers=HANDLERS, model="",
              turns=[{"tool_calls": [{"name": "calculate",
                                      "arguments": {"a": 1, "b": 2, "operation": "add"}}]}])
    err = s.error()
    assert (err.code, err.message) == (
        "MODEL_SCRIPT_EXHAUSTED",
        "Model 'Offline' has no scripted turn left: turns.json holds 1 turn and the run asked "
        "for turn 2.")


@pytest.mark.parametrize("content, message", [
    ("{not json", "Model 'Offline': the scripted turns turns.json are not valid JSON: "
                  "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)."),
    ('{"content": "x"}', "Model 'Offline': the scripted turns turns.json are not usable: the "
                         "file must hold a list of turns."),
    ('[{"content": "x", "reply": 1}]', "Model 'Offline': the scripted turns turns.json are not "
                                       "usable: turn 1 has an unknown key 'reply'."),
    ('[{"tool_calls": [{"arguments": {}}]}]', "Model 'Offline': the scripted turns turns.json "
                                              "are not usable: turn 1, tool call 1 needs a "
                                              "\"name\"."),
    ('[{}]', "Model 'Offline': the scripted turns turns.json are not usable: turn 1 must be an "
             "object with \"content\" or \"tool_calls\"."),
])
def test_a_bad_turns_file_stops_the_start(tmp_path, content, message):
    (tmp_path / "turns.json").write_text(content, encoding="utf-8")
    with pytest.raises(StartError) as caught:
        setup(program('responses: "turns.json"'), tmp_path, handlers=HANDLERS)
    assert caught.value.lines == [message]


def test_a_missing_turns_file_stops_the_start(tmp_path):
    with pytest.raises(StartError) as caught:
        setup(program('responses: "missing.json"'), tmp_path, handlers=HANDLERS)
    (line,) = caught.value.lines
    assert line.startswith("Model 'Offline' cannot read its scripted turns ")
    assert line.endswith("missing.json: No such file or directory.")


def test_scripted_content_that_is_json_is_sent_as_compact_text(tmp_path):
    path = tmp_path / "turns.json"
    path.write_text(json.dumps([
        {"content": {"a": [1, 2]}},
        {"tool_calls": [{"name": "f", "arguments": "{oops", "id": "t-1"}]},
    ]), encoding="utf-8")
    turns = ScriptedTurns.load("Offline", str(path))
    provider = TestProvider(SETTINGS, answer=None, turns=turns)
    request = ChatRequest(SETTINGS, (Message("user", "hi"),))
    first, second = complete(provider, request), complete(provider, request)
    assert first.content == '{"a":[1,2]}'
    assert second.tool_calls == (ToolCall("t-1", "f", "{oops"),)
    with pytest.raises(LumaError):
        complete(provider, request)
