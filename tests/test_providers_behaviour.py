"""How the adapters meet what real providers do: reasoning models, cut-off answers, refusals and
content filters, tool calls without ids, parallel calls with strict tools, and Anthropic's
structured outputs. Every test runs against a real HTTP server on 127.0.0.1; real recorded
samples live in tests/providers/recorded/*/behaviour_*.json with their source noted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ask.harness import setup
from luma.models.anthropic import AnthropicProvider
from luma.models.base import ChatRequest, ResponseFormat
from luma.models.http import ModelHttp
from luma.models.openai import OpenAIProvider
from luma.runtime.errors import LumaError
from luma.runtime.errors import StartError
from providers import anthropic_fake, gemini_fake, openai_fake
from providers.anthropic_fake import message, text, tool_use
from providers.harness import answer_format, run, settings, tools, user
from providers.openai_fake import completion
from providers.server import Captured, FakeServer, Reply

RECORDED = Path(__file__).parent / "providers" / "recorded"
OPENAI_ENV = {"OPENAI_API_KEY": openai_fake.KEY}
AZURE_ENV = {"AZURE_OPENAI_API_KEY": openai_fake.KEY}
ANTHROPIC_ENV = {"ANTHROPIC_API_KEY": anthropic_fake.KEY}
GEMINI_ENV = {"GEMINI_API_KEY": gemini_fake.KEY}


def recorded(provider: str, name: str) -> list[dict[str, Any]]:
    data = json.loads((RECORDED / provider / f"behaviour_{name}.json").read_text("utf-8"))
    assert data["source"]["repo"] and data["source"]["commit"]
    exchanges: list[dict[str, Any]] = data["exchanges"]
    return exchanges


def turn(p: Any, request: ChatRequest) -> Any:
    async def go() -> Any:
        try:
            return await p.complete(request)
        finally:
            await p.http.aclose()
    return run(go())


def turns(p: Any, *requests: ChatRequest) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return [await p.complete(r) for r in requests]
        finally:
            await p.http.aclose()
    return run(go())


def openai_error(message: str, param: str, code: str) -> Reply:
    return Reply({"error": {"message": message, "type": "invalid_request_error",
                            "param": param, "code": code}}, 400)


def reasoning_server(*, azure: bool = False, deployment: str = "") -> FakeServer:
    """OpenAI (or an Azure deployment) serving a model that reasons: it refuses max_tokens and a
    temperature other than 1, as the real API does."""
    def validate(req: Captured) -> Reply | None:
        problem = openai_fake.validate(req, azure=azure, deployment=deployment)
        if problem is not None:
            return problem
        if "max_tokens" in req.body:
            return openai_error("Unsupported parameter: 'max_tokens' is not supported with this "
                                "model. Use 'max_completion_tokens' instead.", "max_tokens",
                                "unsupported_parameter")
        if req.body.get("temperature", 1) != 1:
            return openai_error(f"Unsupported value: 'temperature' does not support "
                                f"{req.body['temperature']} with this model. Only the default "
                                "(1) value is supported.", "temperature", "unsupported_value")
        return None
    return FakeServer(validate)


# ------------------------------------------------------------------------ reasoning models


def test_an_azure_reasoning_deployment_gets_max_completion_tokens():
    with reasoning_server(azure=True, deployment="o4-mini") as server:
        server.reply(completion("done"))
        s = settings("azure", server.base_url, model="o4-mini", max_tokens=300)
        p = OpenAIProvider(s, ModelHttp(), AZURE_ENV, azure=True)
        r = turn(p, ChatRequest(s, (user("Go"),)))
    assert r.content == "done"
    body = server.requests[0].body
    assert body["max_completion_tokens"] == 300 and "max_tokens" not in body
    assert server.requests[0].query["api-version"] == ["2025-04-01-preview"]


def test_reasoning_true_and_reasoning_effort_reach_a_compatible_server():
    with reasoning_server() as server:
        server.reply(completion("done"))
        s = settings("openai", server.base_url + "/v1", model="my-reasoner", max_tokens=300,
                     reasoning=True, reasoning_effort="high")
        turn(OpenAIProvider(s, ModelHttp(), OPENAI_ENV), ChatRequest(s, (user("Go"),)))
    body = server.requests[0].body
    assert body["reasoning_effort"] == "high"
    assert body["max_completion_tokens"] == 300 and "max_tokens" not in body


def test_a_model_that_does_not_reason_keeps_max_tokens_on_a_compatible_server():
    with openai_fake.server() as server:
        server.reply(completion("done"))
        s = settings("openai", server.base_url + "/v1", model="qwen2.5-7b-instruct",
                     max_tokens=300, temperature=0.0)
        turn(OpenAIProvider(s, ModelHttp(), OPENAI_ENV), ChatRequest(s, (user("Go"),)))
    body = server.requests[0].body
    assert body["max_tokens"] == 300 and body["temperature"] == 0
    assert "reasoning_effort" not in body


ANSWER_AGENT = """
schema Answer { summary: string }
agent A {
  model: Main
  retries: 2
  fn run() -> Answer {
    ask "Go." -> Answer
  }
}
"""


def test_a_config_override_that_sets_temperature_on_a_reasoning_model_stops_the_start(tmp_path):
    source = 'model Main {\n  provider: "openai"\n  name: "gpt-5-mini"\n}\n' + ANSWER_AGENT
    with pytest.raises(StartError) as caught:
        setup(source, tmp_path, config={"models": {"Main": {"temperature": 0}}},
              env=OPENAI_ENV)
    assert caught.value.lines == [
        "luma.config.json: models.Main: Model 'Main' is a reasoning model (gpt-5-mini) and "
        "always reasons, so it does not accept 'temperature'; remove 'temperature'."]


def test_a_config_override_with_a_bad_reasoning_effort_stops_the_start(tmp_path):
    source = 'model Main {\n  provider: "openai"\n  name: "o3"\n}\n' + ANSWER_AGENT
    with pytest.raises(StartError) as caught:
        setup(source, tmp_path, config={"models": {"Main": {"reasoning_effort": "max"}}},
              env=OPENAI_ENV)
    assert caught.value.lines == [
        "luma.config.json: models.Main.reasoning_effort: must be one of none, minimal, low, "
        "medium, high, xhigh"]


def tools_server(model: str) -> FakeServer:
    """OpenAI serving a gpt-5.2+ model: Chat Completions refuses function tools next to
    reasoning, and the model reasons by default unless sent reasoning_effort "none"."""
    by_default = model.startswith(("gpt-5.5", "gpt-5.6"))

    def validate(req: Captured) -> Reply | None:
        problem = openai_fake.validate(req)
        if problem is not None:
            return problem
        effort = req.body.get("reasoning_effort", "medium" if by_default else "none")
        if req.body.get("tools") and effort != "none":
            return openai_error(f"Function tools with reasoning_effort are not supported for "
                                f"{model} in /v1/chat/completions. To use function tools, use "
                                "/v1/responses or set reasoning_effort to 'none'.",
                                "reasoning_effort", "unsupported_value")
        return None
    return FakeServer(validate)


def test_a_model_that_reasons_by_default_is_sent_no_reasoning_next_to_tools():
    with tools_server("gpt-5.6") as server:
        server.reply(completion("done"))
        server.reply(completion("done"))
        s = settings("openai", server.base_url + "/v1", model="gpt-5.6")
        p = OpenAIProvider(s, ModelHttp(), OPENAI_ENV)
        turns(p, ChatRequest(s, (user("Go"),), tools()), ChatRequest(s, (user("Go"),)))
    assert [r.body.get("reasoning_effort") for r in server.requests] == ["none", None]


def test_reasoning_effort_next_to_tools_on_a_model_that_refuses_it_is_a_clear_error():
    with tools_server("gpt-5.4-mini") as server:
        s = settings("openai", server.base_url + "/v1", model="gpt-5.4-mini",
                     reasoning_effort="low")
        with pytest.raises(LumaError) as info:
            turn(OpenAIProvider(s, ModelHttp(), OPENAI_ENV),
                 ChatRequest(s, (user("Go"),), tools()))
    assert info.value.code == "MODEL_CONFIG"
    assert info.value.message == (
        "Model 'Main' (gpt-5.4-mini) cannot take tools while it reasons: OpenAI's Chat "
        "Completions refuses function tools next to reasoning_effort \"low\" for this model; "
        "set reasoning_effort: \"none\" on a model whose agent has tools.")
    assert server.requests == []


# ---------------------------------------------------------------------- cut-off answers


def openai_agent(model_id: str, extra: str = "") -> str:
    return (f'model Main {{\n  provider: "openai"\n  name: "{model_id}"\n{extra}}}\n'
            + ANSWER_AGENT)


def test_a_cut_off_openai_answer_is_truncated_and_not_retried(tmp_path):
    with openai_fake.server() as server:
        for _ in range(3):
            server.reply(completion('{"summary": "The ans', finish="length"))
        config = {"models": {"Main": {"base_url": server.base_url + "/v1"}}}
        s = setup(openai_agent("gpt-4.1-mini", "  max_tokens: 50\n"), tmp_path, config=config,
                  env=OPENAI_ENV)
        err = s.error()
    assert err.code == "MODEL_OUTPUT_TRUNCATED" and not err.retryable
    assert err.message == ("Model 'Main' stopped at its output limit (max_tokens: 50) before its "
                           "answer to A.run.ask was complete; raise max_tokens.")
    assert len(server.requests) == 1          # the same limit would stop at the same place
    assert s.events("ask.response")[0]["outcome"] == "MODEL_OUTPUT_TRUNCATED"


def test_a_reasoning_model_that_spent_its_limit_reasoning_says_so(tmp_path):
    usage = {"prompt_tokens": 12, "completion_tokens": 64, "total_tokens": 76,
             "completion_tokens_details": {"reasoning_tokens": 64}}
    with openai_fake.server() as server:
        server.reply(completion("", finish="length", usage=usage))
        config = {"models": {"Main": {"base_url": server.base_url + "/v1"}}}
        s = setup(openai_agent("gpt-5-mini", "  max_tokens: 64\n"), tmp_path, config=config,
                  env=OPENAI_ENV)
        err = s.error()
    assert err.code == "MODEL_OUTPUT_TRUNCATED"
    assert err.message == ("Model 'Main' stopped at its output limit (max_tokens: 64) before its "
                           "answer to A.run.ask was complete (64 of its 64 output tokens went to "
                           "reasoning); raise max_tokens or lower reasoning_effort.")
    assert len(server.requests) == 1
    assert server.requests[0].body["max_completion_tokens"] == 64
    response = s.events("ask.response")[0]
    assert (response["tokens_out"], response["reasoning_tokens"]) == (64, 64)


def gemini_program(model_id: str, type_: str, max_tokens: str = "") -> str:
    return f"""
model Main {{
  provider: "gemini"
  name: "{model_id}"
{max_tokens}}}
agent A {{
  model: Main
  retries: 2
  fn run() -> {type_} {{
    ask "What is the capital of France?" -> {type_}
  }}
}}
schema Answer {{ summary: string }}
"""


def test_gemini_max_tokens_without_parts_is_truncated_not_empty(tmp_path):
    answer = recorded("gemini", "max_tokens_without_parts")[0]["response"]
    with gemini_fake.server("gemini-2.5-pro") as server:
        server.reply(answer)
        config = {"models": {"Main": {"base_url": server.base_url}}}
        s = setup(gemini_program("gemini-2.5-pro", "Answer", "  max_tokens: 5\n"), tmp_path,
                  config=config, env=GEMINI_ENV)
        err = s.error()
    assert err.code == "MODEL_OUTPUT_TRUNCATED"
    assert err.message == ("Model 'Main' stopped at its output limit (max_tokens: 5) before its "
                           "answer to A.run.ask was complete (2 of its 2 output tokens went to "
                           "reasoning); raise max_tokens.")
    assert len(server.requests) == 1


def test_a_gemini_text_answer_cut_off_mid_sentence_is_not_returned_as_the_answer(tmp_path):
    answer = recorded("gemini", "max_tokens_with_parts")[0]["response"]
    with gemini_fake.server("gemini-2.5-flash") as server:
        server.reply(answer)
        config = {"models": {"Main": {"base_url": server.base_url}}}
        s = setup(gemini_program("gemini-2.5-flash", "string"), tmp_path, config=config,
                  env=GEMINI_ENV)
        err = s.error()
    assert err.code == "MODEL_OUTPUT_TRUNCATED"
    assert err.message == ("Model 'Main' stopped at the provider's default output limit before "
                           "its answer to A.run.ask was complete; set max_tokens higher.")
    assert len(server.requests) == 1


def test_anthropic_max_tokens_stop_is_truncated(tmp_path):
    source = ('model Main {\n  provider: "anthropic"\n  name: "claude-3-5-haiku-20241022"\n}\n'
              + ANSWER_AGENT)
    with anthropic_fake.server() as server:
        server.reply(message([tool_use("t1", "final_answer", {})], stop="max_tokens"))
        config = {"models": {"Main": {"base_url": server.base_url}}}
        s = setup(source, tmp_path, config=config, env=ANTHROPIC_ENV)
        err = s.error()
    assert err.code == "MODEL_OUTPUT_TRUNCATED"
    assert err.message == ("Model 'Main' stopped at its output limit (max_tokens: 4096) before "
                           "its answer to A.run.ask was complete; raise max_tokens.")
    assert len(server.requests) == 1


def test_an_anthropic_answer_cut_off_by_the_context_window_says_so(tmp_path):
    source = ('model Main {\n  provider: "anthropic"\n  name: "claude-sonnet-4-5"\n}\n'
              + ANSWER_AGENT)
    with anthropic_fake.server() as server:
        server.reply(message([text('{"summary": "The')], stop="model_context_window_exceeded"))
        config = {"models": {"Main": {"base_url": server.base_url}}}
        s = setup(source, tmp_path, config=config, env=ANTHROPIC_ENV)
        err = s.error()
    assert err.code == "MODEL_OUTPUT_TRUNCATED"
    assert err.message == ("Model 'Main' stopped at the end of its context window before its "
                           "answer to A.run.ask was complete; shorten the prompt, or lower "
                           "tool_result_max_chars.")
    assert len(server.requests) == 1


# ------------------------------------------------------------------ refusals and filters


def test_azure_content_filter_400_is_a_refusal_naming_the_categories():
    body = recorded("azure", "content_filter_400")[0]["response"]
    with openai_fake.server(azure=True, deployment="m-1") as server:
        server.reply(body, status=400)
        s = settings("azure", server.base_url)
        with pytest.raises(LumaError) as info:
            turn(OpenAIProvider(s, ModelHttp(), AZURE_ENV, azure=True),
                 ChatRequest(s, (user("x"),)))
    assert info.value.code == "MODEL_REFUSAL" and not info.value.retryable
    assert info.value.message == ("Model 'Main' refused to answer: Azure OpenAI's content filter "
                                  "blocked the prompt (hate: high, self-harm: high, violence: "
                                  "medium).")
    assert len(server.requests) == 1


def test_azure_content_filter_stop_names_the_category():
    answer = completion(None, finish="content_filter")
    answer["choices"][0]["content_filter_results"] = {
        "hate": {"filtered": False, "severity": "safe"},
        "violence": {"filtered": True, "severity": "medium"},
        "protected_material_text": {"filtered": True, "detected": True}}
    with openai_fake.server(azure=True, deployment="m-1") as server:
        server.reply(answer)
        s = settings("azure", server.base_url)
        with pytest.raises(LumaError) as info:
            turn(OpenAIProvider(s, ModelHttp(), AZURE_ENV, azure=True),
                 ChatRequest(s, (user("x"),)))
    assert info.value.code == "MODEL_REFUSAL"
    assert info.value.message == ("Model 'Main' refused to answer: Azure OpenAI's content filter "
                                  "stopped the answer (violence: medium, "
                                  "protected_material_text).")


def test_an_anthropic_refusal_gives_its_reason_not_the_partial_text():
    answer = message([text("Sure, here is the first step of the expl")], stop="refusal")
    answer["stop_details"] = {"type": "refusal", "category": "cyber",
                              "explanation": "Declined: request asked for offensive cyber "
                                             "tooling."}
    with anthropic_fake.server() as server:
        server.reply(answer)
        server.reply(message([text("Here is the")], stop="refusal"))
        p = AnthropicProvider(settings("anthropic", server.base_url), ModelHttp(),
                              ANTHROPIC_ENV)
        errors = []
        for _ in range(2):
            with pytest.raises(LumaError) as info:
                turn(p, ChatRequest(p.settings, (user("x"),)))
            errors.append(info.value)
    assert [e.code for e in errors] == ["MODEL_REFUSAL", "MODEL_REFUSAL"]
    assert errors[0].message == ("Model 'Main' refused to answer: Declined: request asked for "
                                 "offensive cyber tooling (category: cyber).")
    assert errors[1].message == ("Model 'Main' refused to answer: Anthropic stopped the answer "
                                 "(stop_reason: refusal).")


# ------------------------------------------------------------------------ tool-call ids


def gemini_compat_server() -> FakeServer:
    """Gemini's OpenAI-compatible endpoint: ids ``""`` on tool calls, and thought signatures
    that must come back with the calls."""
    def validate(req: Captured) -> Reply | None:
        if req.path != "/v1beta/openai/chat/completions":
            return Reply({"error": {"message": f"unexpected path {req.path}"}}, 404)
        if req.headers.get("authorization") != f"Bearer {openai_fake.KEY}":
            return Reply({"error": {"message": "API key not valid."}}, 401)
        seen: list[str] = []
        for m in req.body["messages"]:
            if m["role"] == "assistant" and m.get("tool_calls"):
                signed = "extra_content" in m or all("extra_content" in c
                                                     for c in m["tool_calls"])
                if not signed:
                    return Reply([{"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                             "message": "Function call is missing a "
                                             "thought_signature in functionCall parts."}}], 400)
                seen += [c["id"] for c in m["tool_calls"]]
            if m["role"] == "tool" and (not m["tool_call_id"] or
                                        seen.count(m["tool_call_id"]) != 1):
                return Reply({"error": {"message": "tool_call_id does not name exactly one "
                                                   "call"}}, 400)
        return None
    return FakeServer(validate)


CLOCK = """
model Main {
  provider: "openai"
  name: "gemini-2.5-pro-preview-05-06"
}
schema Clock { time: string }
schema Zone { zone: string }
tool get_current_time() -> Clock {
  description: "Get the current time."
  side_effects: "read"
}
tool get_zone() -> Zone {
  description: "Get the time zone."
  side_effects: "read"
}
agent A {
  model: Main
  tools: [get_current_time, get_zone]
  fn run() -> string {
    ask "What is the current time?" -> string
  }
}
"""
CLOCK_HANDLERS = {"get_current_time": lambda input: {"time": "Noon"},
                  "get_zone": lambda input: {"zone": "UTC"}}


def test_a_recorded_gemini_compat_call_without_an_id_gets_one_and_keeps_its_signature(tmp_path):
    exchanges = recorded("openai", "gemini_compat_empty_tool_call_id")
    with gemini_compat_server() as server:
        for exchange in exchanges:
            server.reply(exchange["response"])
        config = {"models": {"Main": {"base_url": server.base_url + "/v1beta/openai"}}}
        s = setup(CLOCK, tmp_path, config=config, env=OPENAI_ENV, handlers=CLOCK_HANDLERS)
        assert s.run() == "The current time is Noon."
    sent = server.requests[1].body["messages"]
    assistant, result = sent[1], sent[2]
    assert [c["id"] for c in assistant["tool_calls"]] == ["luma-call-1"]
    signature = exchanges[0]["response"]["choices"][0]["message"]["extra_content"]
    assert assistant["extra_content"] == signature
    assert result == {"role": "tool", "tool_call_id": "luma-call-1", "content": '{"time":"Noon"}'}


def test_two_calls_with_empty_ids_are_paired_by_the_ids_luma_gives_them(tmp_path):
    first = completion(tool_calls=[("", "get_zone", {}), ("", "get_current_time", {})])
    for i, call in enumerate(first["choices"][0]["message"]["tool_calls"]):
        call["extra_content"] = {"google": {"thought_signature": f"sig-{i}"}}
    with gemini_compat_server() as server:
        server.reply(first)
        server.reply(completion("Noon, UTC."))
        config = {"models": {"Main": {"base_url": server.base_url + "/v1beta/openai"}}}
        s = setup(CLOCK, tmp_path, config=config, env=OPENAI_ENV, handlers=CLOCK_HANDLERS)
        assert s.run() == "Noon, UTC."
    sent = server.requests[1].body["messages"]
    calls = sent[1]["tool_calls"]
    assert [(c["id"], c["function"]["name"], c["extra_content"]["google"]["thought_signature"])
            for c in calls] == [("luma-call-1", "get_zone", "sig-0"),
                                ("luma-call-2", "get_current_time", "sig-1")]
    assert [(m["tool_call_id"], m["content"]) for m in sent[2:]] == [
        ("luma-call-1", '{"zone":"UTC"}'), ("luma-call-2", '{"time":"Noon"}')]
    assert [e["call_id"] for e in s.events("ask.tool_result")] == ["luma-call-1", "luma-call-2"]


def test_a_repeated_id_within_one_answer_is_replaced():
    with openai_fake.server() as server:
        server.reply(completion(tool_calls=[("call_0", "calculate", {"a": 1, "b": 2,
                                                                     "operation": "add"}),
                                            ("call_0", "text_stats", {"text": "hi"})]))
        s = settings("openai", server.base_url + "/v1")
        r = turn(OpenAIProvider(s, ModelHttp(), OPENAI_ENV), ChatRequest(s, (user("Go"),),
                                                                          tools()))
    assert [c.id for c in r.tool_calls] == ["call_0", "luma-call-1"]


# ------------------------------------------------------- parallel calls with strict tools


@pytest.mark.parametrize("strict, sent", [(True, False), (None, None)])
def test_strict_true_turns_parallel_tool_calls_off(strict, sent):
    with openai_fake.server() as server:
        server.reply(completion("done"))
        s = settings("openai", server.base_url + "/v1", strict=strict)
        turn(OpenAIProvider(s, ModelHttp(), OPENAI_ENV), ChatRequest(s, (user("Go"),), tools()))
    assert server.requests[0].body.get("parallel_tool_calls") is sent


def test_the_o_series_is_never_sent_parallel_tool_calls():
    def validate(req: Captured) -> Reply | None:
        if "parallel_tool_calls" in req.body:
            return openai_error("Unsupported parameter: 'parallel_tool_calls' is not supported "
                                "with this model.", "parallel_tool_calls",
                                "unsupported_parameter")
        return openai_fake.validate(req)
    with FakeServer(validate) as server:
        server.reply(completion("done"))
        s = settings("openai", server.base_url + "/v1", model="o4-mini", strict=True)
        r = turn(OpenAIProvider(s, ModelHttp(), OPENAI_ENV), ChatRequest(s, (user("Go"),),
                                                                          tools()))
    assert r.content == "done"
    assert server.requests[0].body["tools"][0]["function"]["strict"] is True


# ------------------------------------------------------ Anthropic structured answers

UNSUPPORTED = ("minimum", "maximum", "minLength", "maxLength", "maxItems")


def structured_server(*, thinking: bool = False) -> FakeServer:
    """The Messages API with structured outputs: ``output_config.format`` takes closed objects
    and refuses the keywords it does not support; with thinking on (or on a model that never
    takes one) a forced tool_choice is refused."""
    def validate(req: Captured) -> Reply | None:
        problem = anthropic_fake.validate(req)
        if problem is not None:
            return problem
        body = req.body
        choice = body.get("tool_choice") or {}
        forced = choice.get("type") in ("tool", "any")
        if forced and thinking:
            return error("Thinking may not be enabled when tool_choice forces tool use.")
        if forced and body["model"].startswith("claude-fable"):
            return error("tool_choice forces tool use is not compatible with this model")
        fmt = (body.get("output_config") or {}).get("format")
        if fmt is not None:
            if fmt.get("type") != "json_schema":
                return error("output_config.format.type: Input should be 'json_schema'")
            for node in _nodes(fmt["schema"]):
                if node.get("type") == "object" and node.get("additionalProperties") is not False:
                    return error("output_config.format.schema: For 'object' type, "
                                 "'additionalProperties' must be explicitly set to false")
                for key in UNSUPPORTED:
                    if key in node:
                        return error(f"output_config.format.schema: '{key}' is not supported")
        return None
    return FakeServer(validate)


def error(text_: str) -> Reply:
    return Reply({"type": "error", "error": {"type": "invalid_request_error",
                                             "message": text_}}, 400)


def _nodes(schema: Any) -> list[dict[str, Any]]:
    if isinstance(schema, list):
        return [n for s in schema for n in _nodes(s)]
    if not isinstance(schema, dict):
        return []
    out = [schema]
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            out += [n for s in value.values() for n in _nodes(s)]
        elif isinstance(value, (dict, list)) and key not in ("enum", "const", "required"):
            out += _nodes(value)
    return out


def anthropic(server: FakeServer, model_id: str) -> AnthropicProvider:
    return AnthropicProvider(settings("anthropic", server.base_url, model=model_id),
                             ModelHttp(), ANTHROPIC_ENV)


PAYMENT = ResponseFormat("Payment", {"type": "object", "properties": {"amount": {
    "type": "number"}}, "required": ["amount"], "additionalProperties": False})


def test_a_model_with_structured_outputs_gets_output_config_format():
    exchange = recorded("anthropic", "native_output_config")[0]
    with structured_server() as server:
        server.reply(exchange["response"])
        p = anthropic(server, "claude-sonnet-4-5")
        r = turn(p, ChatRequest(p.settings, (user("Return exactly this payment amount: 12.34"),),
                                response_format=PAYMENT))
    assert json.loads(r.content) == {"amount": 12.34}
    sent = server.requests[0].body
    assert sent["output_config"] == exchange["request"]["output_config"] | {
        "format": {"type": "json_schema", "schema": PAYMENT.schema}}
    assert "tools" not in sent and "tool_choice" not in sent


def test_structured_outputs_get_a_schema_without_the_keywords_they_refuse():
    with structured_server() as server:
        server.reply(message([text('{"summary": "Five.", "total": 5}')]))
        p = anthropic(server, "claude-opus-4-5-20251101")
        r = turn(p, ChatRequest(p.settings, (user("Sum"),), tools(),
                                response_format=answer_format()))
    assert json.loads(r.content) == {"summary": "Five.", "total": 5}
    sent = server.requests[0].body
    schema = sent["output_config"]["format"]["schema"]
    assert schema["properties"]["total"] == {"type": "number",
                                             "description": "minimum: 0; maximum: 1000000"}
    assert [t["name"] for t in sent["tools"]] == ["calculate", "text_stats"]
    assert sent["tool_choice"] == {"type": "auto"}


@pytest.mark.parametrize("model_id, fmt", [
    ("claude-3-5-haiku-20241022", PAYMENT),
    ("claude-sonnet-4-20250514", PAYMENT),
    ("claude-sonnet-4-5", ResponseFormat("Node", {
        "type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}},
        "additionalProperties": False,
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}},
                           "additionalProperties": False}}})),
    ("claude-sonnet-4-5", ResponseFormat("Map", {
        "type": "object", "properties": {"tags": {"type": "object",
                                                  "additionalProperties": {"type": "string"}}},
        "required": ["tags"], "additionalProperties": False})),
])
def test_other_models_and_schemas_keep_the_forced_final_answer_tool(model_id, fmt):
    with structured_server() as server:
        server.reply(message([tool_use("t9", "final_answer", {"amount": 1})], stop="tool_use"))
        p = anthropic(server, model_id)
        turn(p, ChatRequest(p.settings, (user("x"),), response_format=fmt))
    sent = server.requests[0].body
    assert "output_config" not in sent
    assert sent["tool_choice"] == {"type": "tool", "name": "final_answer"}


def test_a_refused_forced_tool_choice_is_sent_again_as_auto_and_then_never_forced():
    with structured_server(thinking=True) as server:
        server.reply(message([tool_use("t1", "calculate", {"a": 1, "b": 2,
                                                           "operation": "add"})], "tool_use"))
        server.reply(message([tool_use("t2", "calculate", {"a": 1, "b": 2,
                                                           "operation": "add"})], "tool_use"))
        p = anthropic(server, "claude-3-7-sonnet-20250219")
        forced = ChatRequest(p.settings, (user("Add"),), tools(), tool_choice="calculate")
        first, second = turns(p, forced, forced)
    assert first.tool_calls[0].name == "calculate" and second.tool_calls[0].id == "t2"
    assert [r.body["tool_choice"] for r in server.requests] == [
        {"type": "tool", "name": "calculate"}, {"type": "auto"}, {"type": "auto"}]


def test_an_endpoint_that_refuses_output_config_gets_the_final_answer_tool():
    def validate(req: Captured) -> Reply | None:
        if "output_config" in req.body:
            return error("output_config: Extra inputs are not permitted")
        return anthropic_fake.validate(req)
    with FakeServer(validate) as server:
        server.reply(message([tool_use("t9", "final_answer", {"amount": 2})], "tool_use"))
        server.reply(message([tool_use("t8", "final_answer", {"amount": 3})], "tool_use"))
        p = anthropic(server, "claude-sonnet-4-5")
        request = ChatRequest(p.settings, (user("x"),), response_format=PAYMENT)
        first, second = turns(p, request, request)
    assert [json.loads(r.content) for r in (first, second)] == [{"amount": 2}, {"amount": 3}]
    assert ["output_config" in r.body for r in server.requests] == [True, False, False]


def test_a_model_that_never_takes_a_forced_tool_choice_is_sent_auto():
    with structured_server() as server:
        server.reply(message([tool_use("t1", "calculate", {"a": 1, "b": 2,
                                                           "operation": "add"})], "tool_use"))
        p = anthropic(server, "claude-fable-5")
        turn(p, ChatRequest(p.settings, (user("Add"),), tools(), tool_choice="calculate"))
    assert [r.body["tool_choice"] for r in server.requests] == [{"type": "auto"}]


def test_a_list_answer_through_structured_outputs_is_wrapped_and_unwrapped(tmp_path):
    source = """
model Main {
  provider: "anthropic"
  name: "claude-haiku-4-5-20251001"
}
schema Item { name: string @length(1, 40) }
agent A {
  model: Main
  fn run() -> Item[] {
    ask "List two." -> Item[]
  }
}
"""
    with structured_server() as server:
        server.reply(message([text('{"value": [{"name": "a"}, {"name": "b"}]}')]))
        config = {"models": {"Main": {"base_url": server.base_url}}}
        s = setup(source, tmp_path, config=config, env=ANTHROPIC_ENV)
        assert s.run() == [{"name": "a"}, {"name": "b"}]
    schema = server.requests[0].body["output_config"]["format"]["schema"]
    assert schema["required"] == ["value"] and schema["additionalProperties"] is False
    item = schema["properties"]["value"]["items"]
    item = schema["$defs"]["Item"] if "$ref" in item else item
    assert item["additionalProperties"] is False
    assert item["properties"]["name"]["description"] == "minLength: 1; maxLength: 40"
