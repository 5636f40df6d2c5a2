"""The OpenAI (and Azure) adapter against a real HTTP server speaking Chat Completions."""

from __future__ import annotations

import json
import time

import pytest

from luma.models.base import ChatRequest, Message, ToolCall
from luma.models.http import ModelHttp
from luma.models.openai import OpenAIProvider
from luma.runtime.errors import LumaError
from providers import openai_fake
from providers.harness import answer_format, run, settings, tools, user
from providers.openai_fake import KEY, completion

ENV = {"OPENAI_API_KEY": KEY}


def provider(server, env=ENV, **overrides) -> OpenAIProvider:
    s = settings("openai", server.base_url + "/v1", **overrides)
    return OpenAIProvider(s, ModelHttp(), env)


def turn(p: OpenAIProvider, request: ChatRequest):
    async def go():
        try:
            return await p.complete(request)
        finally:
            await p.http.aclose()
    return run(go())


def test_two_tool_calls_then_results_in_the_tool_slot():
    with openai_fake.server() as server:
        server.reply(completion(tool_calls=[
            ("call_a", "calculate", {"a": 2, "b": 3, "operation": "add"}),
            ("call_b", "text_stats", {"text": "hello world"})]))
        server.reply(completion("done"))
        p = provider(server)
        first = ChatRequest(p.settings, (Message("system", "Be careful."), user("Go")), tools())

        async def flow():
            r1 = await p.complete(first)
            history = first.messages + (
                Message("assistant", r1.content, r1.tool_calls),
                Message("tool", '{"result":5}', tool_call_id="call_a", tool_name="calculate"),
                Message("tool", "Tool 'text_stats' timed out after 3000 ms.",
                        tool_call_id="call_b", tool_name="text_stats", is_error=True))
            r2 = await p.complete(ChatRequest(p.settings, history, tools()))
            await p.http.aclose()
            return r1, r2

        r1, r2 = run(flow())

    assert [(c.id, c.name) for c in r1.tool_calls] == [("call_a", "calculate"),
                                                      ("call_b", "text_stats")]
    assert json.loads(r1.tool_calls[0].arguments) == {"a": 2, "b": 3, "operation": "add"}
    assert r1.finish_reason == "tool_calls" and r1.content is None
    assert r2.content == "done"

    sent = server.requests[0].body
    assert sent["model"] == "m-1"
    assert sent["messages"][0] == {"role": "system", "content": "Be careful."}
    assert sent["tool_choice"] == "auto"
    assert "response_format" not in sent
    assert [t["function"]["name"] for t in sent["tools"]] == ["calculate", "text_stats"]
    calc = sent["tools"][0]["function"]
    assert calc["strict"] is True and calc["description"] == "Add or multiply two numbers."
    stats = sent["tools"][1]["function"]["parameters"]
    # strict: the optional 'language' is required but nullable; 'needs db' never appears
    assert stats["required"] == ["text", "language"]
    assert stats["properties"]["language"]["type"] == ["string", "null"]
    assert "db" not in json.dumps(sent["tools"])

    second = server.requests[1].body["messages"]
    assert second[2]["role"] == "assistant"
    assert [c["id"] for c in second[2]["tool_calls"]] == ["call_a", "call_b"]
    assert second[3] == {"role": "tool", "tool_call_id": "call_a", "content": '{"result":5}'}
    assert second[4] == {"role": "tool", "tool_call_id": "call_b",
                         "content": "Tool 'text_stats' timed out after 3000 ms."}


def test_forced_tool_maps_to_a_function_tool_choice():
    with openai_fake.server() as server:
        server.reply(completion(tool_calls=[("c1", "calculate", {"a": 1, "b": 1,
                                                                 "operation": "add"})]))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("Settle"),), tools(), tool_choice="calculate"))
    assert r.tool_calls[0].name == "calculate"
    assert server.requests[0].body["tool_choice"] == {"type": "function",
                                                      "function": {"name": "calculate"}}


def test_structured_final_answer_uses_a_strict_json_schema_response_format():
    answer = {"summary": "Five.", "total": 5, "note": None}
    with openai_fake.server() as server:
        server.reply(completion(json.dumps(answer)))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("Sum"),), response_format=answer_format()))
    # strict mode's null for the optional 'note' means absent: it does not leave the adapter
    assert json.loads(r.content) == {"summary": "Five.", "total": 5}
    fmt = server.requests[0].body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Answer" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["summary", "total", "note"]
    assert schema["properties"]["note"]["type"] == ["string", "null"]
    assert "maxLength" not in schema["properties"]["note"]
    assert "at most 500 characters" in schema["properties"]["note"]["description"]
    assert "tools" not in server.requests[0].body and "tool_choice" not in server.requests[0].body


def test_strict_false_never_sends_strict():
    with openai_fake.server() as server:
        server.reply(completion(tool_calls=[("c1", "calculate", "{}")]))
        server.reply(completion("{}"))
        p = provider(server, strict=False)
        turn(p, ChatRequest(p.settings, (user("x"),), tools()))
        p = provider(server, strict=False)
        turn(p, ChatRequest(p.settings, (user("x"),), response_format=answer_format()))
    body = json.dumps([r.body for r in server.requests])
    assert '"strict"' not in body
    assert server.requests[1].body["response_format"]["json_schema"]["schema"]["required"] == \
        ["summary", "total"]


def test_strict_true_with_a_schema_that_cannot_be_strict_is_a_clear_error():
    from luma.models.base import ResponseFormat
    with openai_fake.server() as server:
        p = provider(server, strict=True)
        fmt = ResponseFormat("Counts", {"type": "object", "properties": {
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}}},
            "required": ["counts"], "additionalProperties": False})
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),), response_format=fmt))
    assert info.value.code == "MODEL_CONFIG"
    assert info.value.message == ("Model 'Main' requires strict schemas (strict: true), but the "
                                  "answer's schema cannot be made strict for OpenAI: field "
                                  "'counts' is a map with free-form keys.")
    assert server.requests == []


def test_invalid_then_valid_answer_in_sequence():
    good = {"summary": "Ok.", "total": 1, "note": None}
    with openai_fake.server() as server:
        server.reply(completion("The total is one."))
        server.reply(completion(json.dumps(good)))
        p = provider(server)
        fmt = answer_format()

        async def flow():
            r1 = await p.complete(ChatRequest(p.settings, (user("Sum"),), response_format=fmt))
            retry = (user("Sum"), Message("assistant", r1.content),
                     user("Your answer is not valid JSON. Answer again."))
            r2 = await p.complete(ChatRequest(p.settings, retry, response_format=fmt))
            await p.http.aclose()
            return r1, r2

        r1, r2 = run(flow())
    assert r1.content == "The total is one."
    assert json.loads(r2.content) == {"summary": "Ok.", "total": 1}
    assert server.requests[1].body["messages"][1] == {"role": "assistant",
                                                      "content": "The total is one."}


def test_unknown_tool_name_passes_through():
    with openai_fake.server() as server:
        server.reply(completion(tool_calls=[("c9", "get_ordr", {"id": "o-1"})]))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("x"),), tools()))
    assert r.tool_calls == (ToolCall("c9", "get_ordr", '{"id": "o-1"}'),)


def test_usage_with_cached_tokens():
    usage = {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280,
             "prompt_tokens_details": {"cached_tokens": 1024}}
    with openai_fake.server() as server:
        server.reply(completion("hi", usage=usage))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("x"),)))
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.cached_tokens) == (1200, 80, 1024)


def test_refusal_is_a_model_refusal():
    with openai_fake.server() as server:
        server.reply(completion(None, refusal="I can't help with that."))
        p = provider(server)
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),), response_format=answer_format()))
    assert info.value.code == "MODEL_REFUSAL"
    assert info.value.message == "Model 'Main' refused to answer: I can't help with that."


def test_429_with_retry_after_is_waited_for_then_succeeds():
    with openai_fake.server() as server:
        server.reply({"error": {"message": "Rate limit reached"}}, 429, {"Retry-After": "1"})
        server.reply(completion("hi"))
        p = provider(server)
        start = time.monotonic()
        r = turn(p, ChatRequest(p.settings, (user("x"),)))
        elapsed = time.monotonic() - start
    assert r.content == "hi"
    assert len(server.requests) == 2
    assert server.requests[1].at - server.requests[0].at >= 1.0
    assert elapsed < 4


def test_429_after_the_retries_is_rate_limited():
    with openai_fake.server() as server:
        for _ in range(2):
            server.reply({"error": {"message": "Rate limit reached"}}, 429, {"Retry-After": "0"})
        p = provider(server, max_retries=1)
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert info.value.code == "MODEL_RATE_LIMITED"
    assert info.value.message == "Model 'Main' is rate limited by OpenAI (HTTP 429) after 2 attempts."
    assert len(server.requests) == 2


def test_401_is_model_auth_without_the_key():
    with openai_fake.server() as server:
        p = provider(server, env={"OPENAI_API_KEY": "sk-wrong-key-987654321"})
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert info.value.code == "MODEL_AUTH"
    assert info.value.message == ("Model 'Main': OpenAI did not accept the API key in "
                                  "OPENAI_API_KEY (HTTP 401).")
    assert "sk-wrong" not in repr(info.value.to_value())
    assert len(server.requests) == 1  # 401 is not retried


def test_missing_key_fails_before_any_request():
    with openai_fake.server() as server:
        p = provider(server, env={}, name="GPT54Mini")
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert info.value.code == "MODEL_AUTH"
    assert info.value.message == "Model 'GPT54Mini' needs an API key in OPENAI_API_KEY."
    assert server.requests == []


def test_malformed_bodies_are_bad_responses():
    with openai_fake.server() as server:
        server.reply(b"<html>502 Bad Gateway</html>")
        server.reply({"id": "x", "object": "chat.completion"})
        p = provider(server)
        with pytest.raises(LumaError) as not_json:
            turn(p, ChatRequest(p.settings, (user("x"),)))
        p = provider(server)
        with pytest.raises(LumaError) as no_choices:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert not_json.value.code == "MODEL_BAD_RESPONSE"
    assert not_json.value.message == ("Model 'Main' sent a response that breaks the OpenAI wire "
                                      "format: the body is not JSON (<html>502 Bad "
                                      "Gateway</html>).")
    assert no_choices.value.code == "MODEL_BAD_RESPONSE"
    assert no_choices.value.message.endswith("'choices' is missing or empty.")


def test_timeout_is_model_timeout():
    with openai_fake.server() as server:
        server.reply(completion("late"), delay=1.5)
        p = provider(server, timeout_ms=300)
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert info.value.code == "MODEL_TIMEOUT"
    assert info.value.message == "Model 'Main' did not answer within 300 ms."


def test_http_error_has_status_and_a_short_excerpt_without_the_key():
    message = "Invalid value for 'temperature': " + "x" * 400 + f" (key {KEY})"
    with openai_fake.server() as server:
        server.reply({"error": {"message": message}}, 400)
        p = provider(server)
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert info.value.code == "MODEL_HTTP_ERROR"
    assert info.value.message.startswith("Model 'Main': OpenAI answered HTTP 400: Invalid value "
                                         "for 'temperature': xxx")
    assert len(info.value.message) < 300 and KEY not in info.value.message
    assert info.value.details == {"status": 400}


def test_max_tokens_and_sampling_are_sent():
    with openai_fake.server() as server:
        server.reply(completion("hi"))
        p = provider(server, temperature=0, top_p=0.5, max_tokens=99)
        turn(p, ChatRequest(p.settings, (user("x"),)))
    body = server.requests[0].body
    # a compatible server (not api.openai.com) gets max_tokens
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0, 0.5, 99)


def test_azure_uses_the_deployment_url_and_api_key_header():
    with openai_fake.server(azure=True, deployment="gpt-prod") as server:
        server.reply(completion(tool_calls=[("c1", "calculate", {"a": 1, "b": 2,
                                                                 "operation": "add"})]))
        s = settings("azure", server.base_url, model="gpt-prod", api_version="2024-10-21")
        p = OpenAIProvider(s, ModelHttp(), {"AZURE_OPENAI_API_KEY": KEY}, azure=True)
        r = turn(p, ChatRequest(s, (user("x"),), tools(), tool_choice="calculate"))
    assert r.tool_calls[0].id == "c1"
    req = server.requests[0]
    assert req.path == "/openai/deployments/gpt-prod/chat/completions"
    assert req.query == {"api-version": ["2024-10-21"]}
    assert req.headers["api-key"] == KEY and "model" not in req.body


def test_azure_without_a_base_url_is_a_config_error():
    s = settings("azure", None, model="gpt-prod")
    with pytest.raises(LumaError) as info:
        OpenAIProvider(s, ModelHttp(), {}, azure=True)
    assert info.value.code == "MODEL_CONFIG"
    assert info.value.message == ("Model 'Main' (azure) needs a base_url, the resource endpoint, "
                                  "e.g. https://<resource>.openai.azure.com.")


def test_strict_nulls_for_optional_tool_arguments_are_removed():
    with openai_fake.server() as server:
        server.reply(completion(tool_calls=[
            ("c1", "text_stats", {"text": "hi", "language": None}),
            ("c2", "calculate", '{"a": 1, "b": 2, "operation": null}'),
            ("c3", "text_stats", '{"text": "cut')]))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("x"),), tools()))
    assert json.loads(r.tool_calls[0].arguments) == {"text": "hi"}
    # a required field keeps its null (validation reports it); broken JSON stays as it came
    assert r.tool_calls[1].arguments == '{"a": 1, "b": 2, "operation": null}'
    assert r.tool_calls[2].arguments == '{"text": "cut'


def test_without_strict_mode_nulls_are_left_alone():
    with openai_fake.server() as server:
        server.reply(completion('{"summary": "x", "total": 1, "note": null}'))
        p = provider(server, strict=False)
        r = turn(p, ChatRequest(p.settings, (user("x"),), response_format=answer_format()))
    assert r.content == '{"summary": "x", "total": 1, "note": null}'
