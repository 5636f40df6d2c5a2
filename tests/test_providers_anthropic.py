"""The Anthropic adapter against a real HTTP server speaking the Messages API."""

from __future__ import annotations

import json
import time

import pytest

from luma.models.anthropic import AnthropicProvider
from luma.models.base import ChatRequest, Message, ResponseFormat, ToolCall
from luma.models.http import ModelHttp
from luma.runtime.errors import LumaError
from providers import anthropic_fake
from providers.anthropic_fake import KEY, message, text, tool_use
from providers.harness import answer_format, run, settings, tools, user

ENV = {"ANTHROPIC_API_KEY": KEY}


def provider(server, env=ENV, **overrides) -> AnthropicProvider:
    return AnthropicProvider(settings("anthropic", server.base_url, **overrides), ModelHttp(), env)


def turn(p: AnthropicProvider, request: ChatRequest):
    async def go():
        try:
            return await p.complete(request)
        finally:
            await p.http.aclose()
    return run(go())


def test_two_tool_calls_then_results_as_tool_result_blocks():
    with anthropic_fake.server() as server:
        server.reply(message([text("Let me check."),
                              tool_use("toolu_a", "calculate", {"a": 2, "b": 3,
                                                                "operation": "add"}),
                              tool_use("toolu_b", "text_stats", {"text": "hi there"})],
                             stop="tool_use"))
        server.reply(message([text("done")]))
        p = provider(server)
        first = ChatRequest(p.settings, (Message("system", "Be careful."), user("Go")), tools())

        async def flow():
            r1 = await p.complete(first)
            history = first.messages + (
                Message("assistant", r1.content, r1.tool_calls),
                Message("tool", '{"result":5}', tool_call_id="toolu_a", tool_name="calculate"),
                Message("tool", "Tool 'text_stats' timed out after 3000 ms.",
                        tool_call_id="toolu_b", tool_name="text_stats", is_error=True))
            r2 = await p.complete(ChatRequest(p.settings, history, tools()))
            await p.http.aclose()
            return r1, r2

        r1, r2 = run(flow())

    assert r1.tool_calls == (
        ToolCall("toolu_a", "calculate", {"a": 2, "b": 3, "operation": "add"}),
        ToolCall("toolu_b", "text_stats", {"text": "hi there"}))
    assert r1.content == "Let me check." and r1.finish_reason == "tool_use"
    assert r2.content == "done"

    sent = server.requests[0].body
    assert sent["system"] == "Be careful."
    assert sent["max_tokens"] == 4096 and sent["model"] == "m-1"
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Go"}]}]
    assert sent["tool_choice"] == {"type": "auto"}
    assert [t["name"] for t in sent["tools"]] == ["calculate", "text_stats"]
    stats = sent["tools"][1]["input_schema"]
    assert stats["required"] == ["text"] and "language" in stats["properties"]
    assert "db" not in json.dumps(sent["tools"])

    second = server.requests[1].body["messages"]
    assert second[1]["role"] == "assistant"
    assert second[1]["content"][1] == {"type": "tool_use", "id": "toolu_a", "name": "calculate",
                                       "input": {"a": 2, "b": 3, "operation": "add"}}
    assert second[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": '{"result":5}'},
        {"type": "tool_result", "tool_use_id": "toolu_b",
         "content": "Tool 'text_stats' timed out after 3000 ms.", "is_error": True}]}
    assert server.requests[1].headers["anthropic-version"] == "2023-06-01"


def test_tool_results_followed_by_a_user_message_share_one_user_turn():
    with anthropic_fake.server() as server:
        server.reply(message([text("ok")]))
        p = provider(server)
        history = (user("Go"), Message("assistant", None, (ToolCall("t1", "calculate", "{}"),)),
                   Message("tool", "{}", tool_call_id="t1"), user("Now answer."))
        turn(p, ChatRequest(p.settings, history, tools()))
    last = server.requests[0].body["messages"][-1]
    assert last["role"] == "user"
    assert [b["type"] for b in last["content"]] == ["tool_result", "text"]


def test_forced_tool_maps_to_tool_choice_tool():
    with anthropic_fake.server() as server:
        server.reply(message([tool_use("t1", "calculate", {"a": 1, "b": 1, "operation": "add"})],
                             stop="tool_use"))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("Settle"),), tools(), tool_choice="calculate"))
    assert r.tool_calls[0].name == "calculate"
    assert server.requests[0].body["tool_choice"] == {"type": "tool", "name": "calculate"}


def test_structured_final_answer_is_a_forced_final_answer_tool():
    answer = {"summary": "Five.", "total": 5}
    with anthropic_fake.server() as server:
        server.reply(message([tool_use("t9", "final_answer", answer)], stop="tool_use"))
        p = provider(server)
        history = (user("Sum"), Message("assistant", None, (ToolCall("t1", "calculate", {}),)),
                   Message("tool", '{"result":5}', tool_call_id="t1"))
        r = turn(p, ChatRequest(p.settings, history, tools(), response_format=answer_format()))
    assert json.loads(r.content) == answer
    assert r.tool_calls == ()
    sent = server.requests[0].body
    assert [t["name"] for t in sent["tools"]] == ["calculate", "text_stats", "final_answer"]
    final = sent["tools"][2]["input_schema"]
    assert final["required"] == ["summary", "total"] and final["additionalProperties"] is False
    assert sent["tool_choice"] == {"type": "tool", "name": "final_answer"}


def test_a_union_answer_is_wrapped_and_unwrapped():
    union = {"type": "object", "oneOf": [
        {"type": "object", "properties": {"kind": {"const": "A"}}, "required": ["kind"],
         "additionalProperties": False}], "x-luma-tag": "kind"}
    with anthropic_fake.server() as server:
        server.reply(message([tool_use("t9", "final_answer", {"value": {"kind": "A"}})],
                             stop="tool_use"))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("x"),),
                                response_format=ResponseFormat("Doc", union)))
    assert json.loads(r.content) == {"kind": "A"}
    schema = server.requests[0].body["tools"][0]["input_schema"]
    assert schema["required"] == ["value"] and "oneOf" in schema["properties"]["value"]


def test_invalid_then_valid_answer_in_sequence():
    with anthropic_fake.server() as server:
        server.reply(message([tool_use("t1", "final_answer", {"summary": "x"})], stop="tool_use"))
        server.reply(message([tool_use("t2", "final_answer", {"summary": "x", "total": 2})],
                             stop="tool_use"))
        p = provider(server)
        fmt = answer_format()

        async def flow():
            r1 = await p.complete(ChatRequest(p.settings, (user("Sum"),), response_format=fmt))
            retry = (user("Sum"), Message("assistant", r1.content),
                     user("total: missing required field. Answer again."))
            r2 = await p.complete(ChatRequest(p.settings, retry, response_format=fmt))
            await p.http.aclose()
            return r1, r2

        r1, r2 = run(flow())
    assert json.loads(r1.content) == {"summary": "x"}
    assert json.loads(r2.content) == {"summary": "x", "total": 2}
    assert server.requests[1].body["messages"][1] == {
        "role": "assistant", "content": [{"type": "text", "text": '{"summary":"x"}'}]}


def test_unknown_tool_name_passes_through():
    with anthropic_fake.server() as server:
        server.reply(message([tool_use("t1", "get_ordr", {"id": "o-1"})], stop="tool_use"))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("x"),), tools()))
    assert r.tool_calls == (ToolCall("t1", "get_ordr", {"id": "o-1"}),)


def test_usage_counts_cached_prompt_tokens():
    usage = {"input_tokens": 50, "output_tokens": 7, "cache_read_input_tokens": 1000,
             "cache_creation_input_tokens": 200}
    with anthropic_fake.server() as server:
        server.reply(message([text("hi")], usage=usage))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("x"),)))
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.cached_tokens) == (1250, 7, 1000)


def test_refusal_stop_reason_is_a_model_refusal():
    with anthropic_fake.server() as server:
        server.reply(message([text("I won't do that.")], stop="refusal"))
        p = provider(server)
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert info.value.code == "MODEL_REFUSAL"
    # the text before a refusal stop is partial output, not the reason
    assert info.value.message == ("Model 'Main' refused to answer: Anthropic stopped the answer "
                                  "(stop_reason: refusal).")


def test_429_with_retry_after_is_waited_for_then_succeeds():
    with anthropic_fake.server() as server:
        server.reply({"type": "error", "error": {"type": "rate_limit_error",
                                                 "message": "slow down"}}, 429,
                     {"retry-after": "1"})
        server.reply(message([text("hi")]))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("x"),)))
    assert r.content == "hi"
    assert server.requests[1].at - server.requests[0].at >= 1.0


def test_401_is_model_auth_without_the_key():
    with anthropic_fake.server() as server:
        p = provider(server, env={"CLAUDE_KEY": "sk-ant-wrong-000000"}, api_key_env="CLAUDE_KEY")
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert info.value.code == "MODEL_AUTH"
    assert info.value.message == ("Model 'Main': Anthropic did not accept the API key in "
                                  "CLAUDE_KEY (HTTP 401).")
    assert "sk-ant-wrong" not in str(info.value.to_value())


def test_missing_key_fails_before_any_request():
    with anthropic_fake.server() as server:
        p = provider(server, env={})
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert info.value.message == "Model 'Main' needs an API key in ANTHROPIC_API_KEY."
    assert server.requests == []


def test_malformed_body_is_a_bad_response():
    with anthropic_fake.server() as server:
        server.reply({"id": "msg_1", "type": "message", "role": "assistant"})
        server.reply(message([{"type": "tool_use", "name": "calculate", "input": {}}]))
        p = provider(server)
        with pytest.raises(LumaError) as no_content:
            turn(p, ChatRequest(p.settings, (user("x"),)))
        p = provider(server)
        with pytest.raises(LumaError) as no_id:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert no_content.value.code == "MODEL_BAD_RESPONSE"
    assert no_content.value.message == ("Model 'Main' sent a response that breaks the Anthropic "
                                        "wire format: 'content' is missing.")
    assert no_id.value.message.endswith("content[0] is a tool_use block without an id or a name.")


def test_timeout_is_model_timeout():
    with anthropic_fake.server() as server:
        server.reply(message([text("late")]), delay=4)
        p = provider(server, timeout_ms=250)
        start = time.monotonic()
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert info.value.code == "MODEL_TIMEOUT"
    assert time.monotonic() - start < 3  # not the server's 4 s


def test_sampling_settings_are_sent():
    with anthropic_fake.server() as server:
        server.reply(message([text("hi")]))
        p = provider(server, temperature=0.2, top_p=0.9, max_tokens=512)
        turn(p, ChatRequest(p.settings, (user("x"),)))
    body = server.requests[0].body
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.2, 0.9, 512)
    assert "tools" not in body and "tool_choice" not in body
