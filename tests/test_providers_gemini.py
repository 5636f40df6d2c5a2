"""The Gemini adapter against a real HTTP server speaking generateContent."""

from __future__ import annotations

import json

import pytest

from luma.models.base import ChatRequest, Message, ToolCall
from luma.models.gemini import GeminiProvider
from luma.models.http import ModelHttp
from luma.runtime.errors import LumaError
from providers import gemini_fake
from providers.gemini_fake import KEY, call, response, text
from providers.harness import answer_format, run, settings, tools, user

ENV = {"GEMINI_API_KEY": KEY}


def provider(server, env=ENV, **overrides) -> GeminiProvider:
    return GeminiProvider(settings("gemini", server.base_url, **overrides), ModelHttp(), env)


def turn(p: GeminiProvider, request: ChatRequest):
    async def go():
        try:
            return await p.complete(request)
        finally:
            await p.http.aclose()
    return run(go())


def test_two_function_calls_then_function_responses():
    with gemini_fake.server() as server:
        server.reply(response([call("calculate", {"a": 2, "b": 3, "operation": "add"},
                                    signature="c2lnLTE="),  # base64, as the API sends it
                               call("text_stats", {"text": "hi there"})]))
        server.reply(response([text("done")]))
        p = provider(server)
        first = ChatRequest(p.settings, (Message("system", "Be careful."), user("Go")), tools())

        async def flow():
            r1 = await p.complete(first)
            a, b = r1.tool_calls
            history = first.messages + (
                Message("assistant", r1.content, r1.tool_calls),
                Message("tool", '{"result":5}', tool_call_id=a.id, tool_name="calculate"),
                Message("tool", "Tool 'text_stats' timed out after 3000 ms.",
                        tool_call_id=b.id, tool_name="text_stats", is_error=True))
            r2 = await p.complete(ChatRequest(p.settings, history, tools()))
            await p.http.aclose()
            return r1, r2

        r1, r2 = run(flow())

    assert [(c.name, c.arguments) for c in r1.tool_calls] == [
        ("calculate", {"a": 2, "b": 3, "operation": "add"}), ("text_stats", {"text": "hi there"})]
    ids = [c.id for c in r1.tool_calls]
    assert len(set(ids)) == 2 and all(ids)
    assert r2.content == "done"

    sent = server.requests[0].body
    assert sent["systemInstruction"] == {"parts": [{"text": "Be careful."}]}
    assert sent["contents"] == [{"role": "user", "parts": [{"text": "Go"}]}]
    assert sent["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    declarations = sent["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declarations] == ["calculate", "text_stats"]
    # the parameters go as JSON Schema, which keeps the closed objects
    assert "parameters" not in declarations[0]
    assert declarations[0]["parametersJsonSchema"]["additionalProperties"] is False
    assert declarations[0]["parametersJsonSchema"]["properties"]["operation"] == {
        "type": "string", "enum": ["add", "multiply"], "description": "The operation to perform"}
    assert "db" not in json.dumps(declarations)

    second = server.requests[1].body["contents"]
    assert second[1]["role"] == "model"
    assert second[1]["parts"][0] == {"functionCall": {"name": "calculate",
                                                      "args": {"a": 2, "b": 3,
                                                               "operation": "add"}},
                                     "thoughtSignature": "c2lnLTE="}
    assert second[2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "calculate", "response": {"output": {"result": 5}}}},
        {"functionResponse": {"name": "text_stats",
                              "response": {"error": "Tool 'text_stats' timed out after "
                                                    "3000 ms."}}}]}


def test_call_ids_from_the_model_are_kept_and_sent_back():
    with gemini_fake.server() as server:
        server.reply(response([call("calculate", {"a": 1, "b": 1, "operation": "add"},
                                    cid="fc-7")]))
        server.reply(response([text("ok")]))
        p = provider(server)

        async def flow():
            r1 = await p.complete(ChatRequest(p.settings, (user("x"),), tools()))
            history = (user("x"), Message("assistant", None, r1.tool_calls),
                       Message("tool", "2", tool_call_id="fc-7"))
            await p.complete(ChatRequest(p.settings, history, tools()))
            await p.http.aclose()
            return r1

        r1 = run(flow())
    assert r1.tool_calls[0].id == "fc-7"
    parts = server.requests[1].body["contents"]
    assert parts[1]["parts"][0]["functionCall"]["id"] == "fc-7"
    assert parts[2]["parts"][0]["functionResponse"] == {
        "name": "calculate", "response": {"output": 2}, "id": "fc-7"}


def test_forced_tool_maps_to_mode_any_with_allowed_function_names():
    with gemini_fake.server() as server:
        server.reply(response([call("calculate", {"a": 1, "b": 1, "operation": "add"})]))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("Settle"),), tools(), tool_choice="calculate"))
    assert r.tool_calls[0].name == "calculate"
    assert server.requests[0].body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["calculate"]}}


def test_structured_answer_without_tools_uses_the_response_json_schema():
    answer = {"summary": "Five.", "total": 5}
    with gemini_fake.server() as server:
        server.reply(response([text(json.dumps(answer))]))
        p = provider(server, temperature=0, max_tokens=300)
        r = turn(p, ChatRequest(p.settings, (user("Sum"),), response_format=answer_format()))
    assert json.loads(r.content) == answer
    generation = server.requests[0].body["generationConfig"]
    assert generation["responseMimeType"] == "application/json"
    assert "responseSchema" not in generation
    assert generation["responseJsonSchema"]["required"] == ["summary", "total"]
    # Gemini's JSON Schema has no string lengths: they are said in words
    assert generation["responseJsonSchema"]["properties"]["note"] == {
        "type": "string", "description": "At least 0 characters; at most 500 characters."}
    assert (generation["temperature"], generation["maxOutputTokens"]) == (0, 300)
    assert "tools" not in server.requests[0].body


def test_structured_answer_with_tools_is_a_forced_final_answer_function():
    answer = {"summary": "Five.", "total": 5}
    with gemini_fake.server() as server:
        server.reply(response([call("final_answer", answer)]))
        p = provider(server)
        history = (user("Sum"), Message("assistant", None, (ToolCall("c1", "calculate", {}),)),
                   Message("tool", '{"result":5}', tool_call_id="c1", tool_name="calculate"))
        r = turn(p, ChatRequest(p.settings, history, tools(), response_format=answer_format()))
    assert json.loads(r.content) == answer and r.tool_calls == ()
    body = server.requests[0].body
    assert [d["name"] for d in body["tools"][0]["functionDeclarations"]][-1] == "final_answer"
    assert body["toolConfig"] == {"functionCallingConfig": {
        "mode": "ANY", "allowedFunctionNames": ["final_answer"]}}
    assert "generationConfig" not in body


def test_invalid_then_valid_answer_in_sequence():
    with gemini_fake.server() as server:
        server.reply(response([text("```json\n{\"summary\": 1}\n```")]))
        server.reply(response([text('{"summary": "ok", "total": 1}')]))
        p = provider(server)
        fmt = answer_format()

        async def flow():
            r1 = await p.complete(ChatRequest(p.settings, (user("Sum"),), response_format=fmt))
            retry = (user("Sum"), Message("assistant", r1.content),
                     user("summary: expected a string. Answer again."))
            r2 = await p.complete(ChatRequest(p.settings, retry, response_format=fmt))
            await p.http.aclose()
            return r1, r2

        r1, r2 = run(flow())
    assert r1.content == "```json\n{\"summary\": 1}\n```"
    assert json.loads(r2.content) == {"summary": "ok", "total": 1}
    contents = server.requests[1].body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]


def test_unknown_tool_name_passes_through():
    with gemini_fake.server() as server:
        server.reply(response([call("get_ordr", {"id": "o-1"})]))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("x"),), tools()))
    assert (r.tool_calls[0].name, r.tool_calls[0].arguments) == ("get_ordr", {"id": "o-1"})


def test_usage_metadata():
    usage = {"promptTokenCount": 900, "candidatesTokenCount": 40, "thoughtsTokenCount": 10,
             "cachedContentTokenCount": 512, "totalTokenCount": 950}
    with gemini_fake.server() as server:
        server.reply(response([text("hi")], usage=usage))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("x"),)))
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.cached_tokens) == (900, 50, 512)


def test_blocked_prompt_is_a_refusal():
    with gemini_fake.server() as server:
        server.reply({"promptFeedback": {"blockReason": "SAFETY"}})
        p = provider(server)
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert info.value.code == "MODEL_REFUSAL"
    assert info.value.message == "Model 'Main' refused to answer: the prompt was blocked (SAFETY)."


def test_429_with_retry_after_is_waited_for_then_succeeds():
    with gemini_fake.server() as server:
        server.reply({"error": {"code": 429, "message": "Resource has been exhausted",
                                "status": "RESOURCE_EXHAUSTED"}}, 429, {"Retry-After": "1"})
        server.reply(response([text("hi")]))
        p = provider(server)
        r = turn(p, ChatRequest(p.settings, (user("x"),)))
    assert r.content == "hi"
    assert server.requests[1].at - server.requests[0].at >= 1.0


def test_401_and_an_invalid_key_are_model_auth_without_the_key():
    with gemini_fake.server() as server:
        server.reply({"error": {"code": 401, "message": "Unauthorized"}}, 401)
        p = provider(server, env={"GEMINI_API_KEY": KEY})
        with pytest.raises(LumaError) as unauthorized:
            turn(p, ChatRequest(p.settings, (user("x"),)))
        p = provider(server, env={"GEMINI_API_KEY": "AIzaWrong999999"})
        with pytest.raises(LumaError) as invalid:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert unauthorized.value.code == invalid.value.code == "MODEL_AUTH"
    assert unauthorized.value.message == ("Model 'Main': Gemini did not accept the API key in "
                                          "GEMINI_API_KEY (HTTP 401).")
    assert invalid.value.message == ("Model 'Main': Gemini did not accept the API key in "
                                     "GEMINI_API_KEY (HTTP 400).")
    assert "AIzaWrong" not in str(invalid.value.to_value())


def test_missing_key_fails_before_any_request():
    with gemini_fake.server() as server:
        p = provider(server, env={"OTHER": "x"})
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert info.value.message == "Model 'Main' needs an API key in GEMINI_API_KEY."
    assert server.requests == []


def test_malformed_body_is_a_bad_response():
    with gemini_fake.server() as server:
        server.reply({"usageMetadata": {}})
        p = provider(server)
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert info.value.code == "MODEL_BAD_RESPONSE"
    assert info.value.message == ("Model 'Main' sent a response that breaks the Gemini wire "
                                  "format: 'candidates' is missing or empty.")


def test_timeout_is_model_timeout():
    with gemini_fake.server() as server:
        server.reply(response([text("late")]), delay=1.5)
        p = provider(server, timeout_ms=250)
        with pytest.raises(LumaError) as info:
            turn(p, ChatRequest(p.settings, (user("x"),)))
    assert info.value.code == "MODEL_TIMEOUT"
    assert info.value.message == "Model 'Main' did not answer within 250 ms."


def test_model_name_with_models_prefix():
    with gemini_fake.server(model="gemini-2.5-flash") as server:
        server.reply(response([text("hi")]))
        p = provider(server, model="models/gemini-2.5-flash")
        assert turn(p, ChatRequest(p.settings, (user("x"),))).content == "hi"
