"""Real provider responses, recorded from the live APIs (tests/providers/recorded/), served back
from a loopback server to Luma's real adapters: whole ``ask`` flows where the recording holds
the whole conversation, one adapter turn where it holds one answer. Every request Luma sends on
the way is checked by the provider's fake, which includes the official SDK's request types."""

from __future__ import annotations

import json

import pytest

from ask.harness import setup
from luma.models.anthropic import AnthropicProvider
from luma.models.base import ChatRequest
from luma.models.gemini import GeminiProvider
from luma.models.http import ModelHttp
from luma.models.openai import OpenAIProvider
from luma.runtime.errors import LumaError
from providers import anthropic_fake, gemini_fake, openai_fake
from providers.harness import run, settings, user
from providers.replay import Recording, load, serve

OPENAI_ENV = {"OPENAI_API_KEY": openai_fake.KEY}
AZURE_ENV = {"AZURE_OPENAI_API_KEY": openai_fake.KEY}
ANTHROPIC_ENV = {"ANTHROPIC_API_KEY": anthropic_fake.KEY}
GEMINI_ENV = {"GEMINI_API_KEY": gemini_fake.KEY}

DECLARATIONS = """
model GPT {
  provider: "openai"
  name: "gpt-4o"
}
model Azure {
  provider: "azure"
  name: "gpt-4o"
  base_url: "http://127.0.0.1:9"
}
model Claude {
  provider: "anthropic"
  name: "claude-sonnet-4-5"
}
model Gemini {
  provider: "gemini"
  name: "gemini-2.5-flash"
}
model GeminiCompat {
  provider: "openai"
  name: "gemini-2.5-flash"
}
schema CityLocation { city: string, country: string }
schema ConfigResponse { name: string, metadata: map[string] }
schema TreeNode { value: string, children?: TreeNode[] }
schema Temperature { celsius: float }
schema Weather { summary: string }
schema Time { time: string }
schema Country { name: string }
tool get_temperature(city: string) -> Temperature { description: "The temperature of a city." }
tool get_weather(city: string) -> Weather { description: "Get the current weather for a city." }
tool get_user_country() -> Country { description: "The user's country." }
tool get_current_time() -> Time { description: "The current time." }
"""

HANDLERS = {
    "get_temperature": lambda input: {"celsius": 20.0},
    "get_weather": lambda input: {"summary": f"Sunny, 22C in {input['city']}"},
    "get_user_country": lambda input: {"name": "Mexico"},
    "get_current_time": lambda input: {"time": "Noon"},
}


def program(model: str, returns: str, tools: tuple[str, ...] = (), prompt: str = "Go.") -> str:
    listed = f"tools: [{', '.join(tools)}]" if tools else ""
    return DECLARATIONS + f"""
agent A {{
  model: {model}
  {listed}
  fn run() -> {returns} {{
    ask {json.dumps(prompt)} -> {returns}
  }}
}}
"""


def run_ask(tmp_path, server, model: str, returns: str, tools: tuple[str, ...] = (), *,
            env: dict[str, str], base_url: str, prompt: str = "Go.", **override: str):
    config = {"models": {model: {"base_url": base_url, **override}}}
    s = setup(program(model, returns, tools, prompt), tmp_path, config=config, env=env,
              handlers=HANDLERS)
    return s, s.run()


def usage(s) -> tuple[int, int]:
    event = s.events("ask.response")[0]
    return event["tokens_in"], event["tokens_out"]


# ---------------------------------------------------------------------------------- OpenAI
def test_openai_plain_answer(tmp_path):
    rec = load("openai", "plain_answer")
    with serve(openai_fake.server(), rec) as server:
        s, value = run_ask(tmp_path, server, "GPT", "string", env=OPENAI_ENV,
                           base_url=server.base_url + "/v1", prompt="Are you a potato?")
        sent = server.requests[0].body
    assert value == rec.response["choices"][0]["message"]["content"]
    assert value.startswith("That's right\u2014I am a potato!")
    assert "response_format" not in sent and "tools" not in sent
    assert usage(s) == (11, 809)


def test_openai_tool_call_then_answer(tmp_path):
    first, second = load("openai", "tool_call"), load("openai", "tool_call_then_answer")
    with serve(openai_fake.server(), first, second) as server:
        _, value = run_ask(tmp_path, server, "GPT", "string", ("get_temperature",),
                           env=OPENAI_ENV, base_url=server.base_url + "/v1")
        sent = server.requests[1].body
    assert value == "The temperature in Tokyo is currently 20.0 degrees Celsius."
    assert sent["messages"][-1] == {"role": "tool", "tool_call_id": "call_bhZkmIKKItNGJ41whHUHB7p9",
                                    "content": '{"celsius":20.0}'}
    assert sent["messages"][-2]["tool_calls"][0]["function"] == {
        "name": "get_temperature", "arguments": '{"city":"Tokyo"}'}


def test_openai_structured_output_after_a_tool(tmp_path):
    tool_turn, rec = load("openai", "structured_output_tool_turn"), load("openai", "structured_output")
    with serve(openai_fake.server(), tool_turn, rec) as server:
        _, value = run_ask(tmp_path, server, "GPT", "CityLocation", ("get_user_country",),
                           env=OPENAI_ENV, base_url=server.base_url + "/v1")
        sent = server.requests[1].body
    assert value == {"city": "Mexico City", "country": "Mexico"}
    assert sent["response_format"]["json_schema"]["strict"] is True
    assert sent["messages"][-1]["content"] == '{"name":"Mexico"}'


def openai_turn(server, rec: Recording, *, azure: bool = False):
    base = server.base_url if azure else server.base_url + "/v1"
    s = settings("azure" if azure else "openai", base, model="gpt-4o")
    p = OpenAIProvider(s, ModelHttp(), AZURE_ENV if azure else OPENAI_ENV, azure=azure)

    async def go():
        try:
            return await p.complete(ChatRequest(s, (user("Go."),)))
        finally:
            await p.http.aclose()
    serve(server, rec)
    return run(go())


def test_openai_parallel_tool_calls():
    rec = load("openai", "parallel_tool_calls")
    with openai_fake.server() as server:
        r = openai_turn(server, rec)
    assert [(c.id, c.name, json.loads(c.arguments)) for c in r.tool_calls] == [
        ("call_jYdIdRZHxZTn5bWCq5jlMrJi", "delete_file", {"path": ".env"}),
        ("call_TmlTVWQbzrXCZ4jNsCVNbNqu", "create_file", {"path": "test.txt"})]
    assert r.content is None and r.finish_reason == "tool_calls"


def test_openai_error_body_reaches_the_user():
    rec = load("openai", "error_unsupported_system_role")
    with openai_fake.server() as server:
        with pytest.raises(LumaError) as err:
            openai_turn(server, rec)
    assert err.value.code == "MODEL_HTTP_ERROR"
    assert str(err.value.message) == (
        "Model 'Main': OpenAI answered HTTP 400: Unsupported value: 'messages[0].role' does not "
        "support 'system' with this model.")


def test_azure_plain_answer_with_content_filter_results(tmp_path):
    rec = load("azure", "plain_answer")
    with serve(openai_fake.server(azure=True, deployment="gpt-4o"), rec) as server:
        s, value = run_ask(tmp_path, server, "Azure", "string", env=AZURE_ENV,
                           base_url=server.base_url)
        sent = server.requests[0]
    assert value == "The capital of France is **Paris**."
    assert "model" not in sent.body and sent.query["api-version"]
    assert usage(s) == (rec.response["usage"]["prompt_tokens"],
                        rec.response["usage"]["completion_tokens"])


def test_gemini_openai_compatible_endpoint_tool_call_then_answer(tmp_path):
    first = load("gemini_openai", "tool_call_without_id")
    second = load("gemini_openai", "answer_after_tool")
    with serve(openai_fake.server(), first, second) as server:
        _, value = run_ask(tmp_path, server, "GeminiCompat", "string", ("get_current_time",),
                           env=OPENAI_ENV, base_url=server.base_url + "/v1")
        sent = server.requests[1].body
    assert value == "The current time is Noon."
    assert sent["messages"][-1]["content"] == '{"time":"Noon"}'


# ------------------------------------------------------------------------------- Anthropic
def test_anthropic_plain_answer(tmp_path):
    rec = load("anthropic", "plain_answer")
    with serve(anthropic_fake.server(), rec) as server:
        s, value = run_ask(tmp_path, server, "Claude", "string", env=ANTHROPIC_ENV,
                           base_url=server.base_url, prompt="What is the capital of France?")
    assert value == "The capital of France is Paris."
    assert usage(s) == (20, 10)


def test_anthropic_tool_call_then_answer(tmp_path):
    first = load("anthropic", "tool_call")
    second = load("anthropic", "tool_call_then_answer")
    with serve(anthropic_fake.server(), first, second) as server:
        _, value = run_ask(tmp_path, server, "Claude", "string", ("get_weather",),
                           env=ANTHROPIC_ENV, base_url=server.base_url)
        sent = server.requests[1].body
    assert value.startswith("The weather in Paris is currently sunny with a temperature of 22")
    result = sent["messages"][-1]["content"][0]
    assert result == {"type": "tool_result", "tool_use_id": "toolu_01WN4AuToBnJyXNQXwQBBebj",
                      "content": '{"summary":"Sunny, 22C in Paris"}'}


def test_anthropic_structured_answer_by_the_final_answer_tool(tmp_path):
    rec = load("anthropic", "final_answer_tool")
    # the recording's output tool is called 'final_result'; Luma names its own 'final_answer'
    body = json.loads(json.dumps(rec.response).replace('"final_result"', '"final_answer"'))
    with serve(anthropic_fake.server(), Recording(rec.source, None, 200, body)) as server:
        # a model without native structured output answers through the forced tool
        s, value = run_ask(tmp_path, server, "Claude", "CityLocation", env=ANTHROPIC_ENV,
                           base_url=server.base_url, name="claude-3-5-haiku-20241022")
        sent = server.requests[0].body
    assert value == {"city": "Mexico City", "country": "Mexico"}
    assert sent["tool_choice"] == {"type": "tool", "name": "final_answer"}
    assert usage(s) == (497, 56)


def test_anthropic_parallel_tool_calls():
    rec = load("anthropic", "parallel_tool_calls")
    with anthropic_fake.server() as server:
        s = settings("anthropic", server.base_url, model="claude-sonnet-4-5")
        p = AnthropicProvider(s, ModelHttp(), ANTHROPIC_ENV)

        async def go():
            try:
                return await p.complete(ChatRequest(s, (user("Who is the youngest?"),)))
            finally:
                await p.http.aclose()
        serve(server, rec)
        r = run(go())
    assert [(c.name, c.arguments) for c in r.tool_calls] == [
        ("retrieve_entity_info", {"name": n}) for n in ("Alice", "Bob", "Charlie", "Daisy")]
    assert r.content is not None and r.content.startswith("I'll help you find out who")
    assert r.finish_reason == "tool_use"
    assert (r.usage.input_tokens, r.usage.output_tokens) == (423, 202)


# ---------------------------------------------------------------------------------- Gemini
def gemini_server():
    return gemini_fake.server(model="gemini-2.5-flash")


def test_gemini_plain_answer(tmp_path):
    rec = load("gemini", "plain_answer")
    with serve(gemini_server(), rec) as server:
        s, value = run_ask(tmp_path, server, "Gemini", "string", env=GEMINI_ENV,
                           base_url=server.base_url, prompt="Hello!")
    assert value == "Hello! How can I help you today?"
    assert usage(s) == (9, 9 + 34)   # thinking tokens count as output


def test_gemini_tool_call_then_answer_sends_the_thought_signature_back(tmp_path):
    first, second = load("gemini", "tool_call"), load("gemini", "tool_call_then_answer")
    with serve(gemini_server(), first, second) as server:
        _, value = run_ask(tmp_path, server, "Gemini", "string", ("get_weather",),
                           env=GEMINI_ENV, base_url=server.base_url)
        sent = server.requests[1].body
    assert value == "The weather in Paris is sunny with a temperature of 22C."
    signature = first.response["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    model_turn, result_turn = sent["contents"][-2], sent["contents"][-1]
    assert model_turn["parts"][0]["thoughtSignature"] == signature
    assert result_turn["parts"][0]["functionResponse"] == {
        "name": "get_weather", "response": {"output": {"summary": "Sunny, 22C in Paris"}}}


def test_gemini_parallel_tool_calls_get_distinct_ids():
    rec = load("gemini", "parallel_tool_calls")
    with gemini_server() as server:
        s = settings("gemini", server.base_url, model="gemini-2.5-flash")
        p = GeminiProvider(s, ModelHttp(), GEMINI_ENV)

        async def go():
            try:
                return await p.complete(ChatRequest(s, (user("Three topics."),)))
            finally:
                await p.http.aclose()
        serve(server, rec)
        r = run(go())
    assert [c.name for c in r.tool_calls] == ["generate_topic"] * 3
    assert len({c.id for c in r.tool_calls}) == 3
    assert (r.usage.input_tokens, r.usage.output_tokens) == (83, 30 + 190)


def test_gemini_structured_answer(tmp_path):
    rec = load("gemini", "structured_output")
    with serve(gemini_server(), rec) as server:
        _, value = run_ask(tmp_path, server, "Gemini", "CityLocation", env=GEMINI_ENV,
                           base_url=server.base_url)
        sent = server.requests[0].body
    assert value == {"city": "Mexico City", "country": "Mexico"}
    assert sent["generationConfig"]["responseMimeType"] == "application/json"


def test_gemini_structured_answer_with_a_map(tmp_path):
    rec = load("gemini", "structured_output_map")
    with serve(gemini_server(), rec) as server:
        _, value = run_ask(tmp_path, server, "Gemini", "ConfigResponse", env=GEMINI_ENV,
                           base_url=server.base_url)
        sent = server.requests[0].body
    assert value == {"name": "api-config", "metadata": {"author": "Alice", "version": "1.0"}}
    schema = sent["generationConfig"]["responseJsonSchema"]
    assert schema["properties"]["metadata"] == {"type": "object",
                                                "additionalProperties": {"type": "string"}}
    assert "responseSchema" not in sent["generationConfig"]


def test_gemini_structured_answer_with_a_recursive_schema(tmp_path):
    rec = load("gemini", "structured_output_recursive")
    with serve(gemini_server(), rec) as server:
        _, value = run_ask(tmp_path, server, "Gemini", "TreeNode", env=GEMINI_ENV,
                           base_url=server.base_url)
        sent = server.requests[0].body
    assert value == {"value": "A", "children": [{"value": "B"}, {"value": "C"}]}
    schema = sent["generationConfig"]["responseJsonSchema"]
    assert schema["$defs"]["TreeNode"]["properties"]["children"]["items"] == {
        "$ref": "#/$defs/TreeNode"}
