"""Which model answers an ask (MODELS.md §1): declarations, config overrides, the default-model
rule with the offline fallback, API keys, and an HTTP provider end to end."""

from __future__ import annotations

import json

import pytest

from ask.harness import setup
from luma.models.resolve import ModelResolver
from luma.runtime.errors import StartError
from luma.syntax.parse import parse_text
from providers import openai_fake
from providers.openai_fake import KEY, completion

ANSWER_SCHEMA = "schema Answer { summary: string }\n"
ANSWER = {"summary": "ok"}

MODELS = """
model Fast {
  provider: "test"
}
model GPT54Mini {
  provider: "openai"
  name: "gpt-5.4-mini"
  temperature: 0
}
"""


def plain_agent(model: str = "") -> str:
    return ANSWER_SCHEMA + f"""
agent A {{
  {model}
  fn run() -> Answer {{
    ask "Go." -> Answer
  }}
}}
"""


def used_model(s) -> str:
    return s.events("ask.request")[0]["model"]


def test_with_nothing_configured_the_offline_model_answers_with_a_warning_once(tmp_path):
    source = ANSWER_SCHEMA + """
agent A {
  fn run() -> Answer {
    first = ask "One." -> Answer
    ask "Two." -> Answer
  }
}
"""
    s = setup(source, tmp_path)
    assert s.run() == {"summary": "summary"}
    assert used_model(s) == "test"
    assert s.events("ask.request")[0]["provider"] == "test"
    warning = ("warning[OFFLINE_MODEL] No model is configured, so the built-in offline model "
               "'test' answered with synthesized values; give the agent a model, set "
               "default_model in luma.config.json, or pass --model NAME.\n")
    assert s.stderr.count(warning) == 1


def test_the_command_line_model_is_the_default(tmp_path):
    s = setup(MODELS + plain_agent(), tmp_path, default_model="Fast",
              config={"default_model": "GPT54Mini"})
    s.run()
    assert used_model(s) == "Fast"
    assert "OFFLINE_MODEL" not in s.stderr


def test_the_config_default_model_comes_next(tmp_path):
    s = setup(MODELS + plain_agent(), tmp_path, config={"default_model": "Fast"})
    s.run()
    assert used_model(s) == "Fast"


def test_an_agent_model_beats_the_default(tmp_path):
    s = setup(MODELS + plain_agent("model: Fast"), tmp_path, default_model="GPT54Mini")
    s.run()
    assert used_model(s) == "Fast"


def test_the_offline_model_chosen_explicitly_does_not_warn(tmp_path):
    s = setup(plain_agent(), tmp_path, default_model="test")
    s.run()
    assert used_model(s) == "test"
    assert "OFFLINE_MODEL" not in s.stderr


@pytest.mark.parametrize("kwargs, message", [
    ({"default_model": "Nope"}, "--model: there is no model named 'Nope' "
                                "(models: Fast, GPT54Mini, test)"),
    ({"config": {"default_model": "Gpt"}},
     "luma.config.json: default_model: there is no model named 'Gpt' "
     "(models: Fast, GPT54Mini, test)"),
    ({"config": {"models": {"Fast": {"tempreature": 0}}}},
     "luma.config.json: models.Fast.tempreature: unknown key; did you mean 'temperature'?"),
    ({"config": {"models": {"GPT54Mini": {"temperature": 3}}}},
     "luma.config.json: models.GPT54Mini.temperature: must be a number from 0 to 2"),
    ({"config": {"models": {"GPT54Mini": {"provider": "mistral"}}}},
     "luma.config.json: models.GPT54Mini.provider: must be one of openai, azure, anthropic, "
     "gemini, test"),
])
def test_a_bad_model_choice_or_override_stops_the_start(tmp_path, kwargs, message):
    with pytest.raises(StartError) as caught:
        setup(MODELS + plain_agent(), tmp_path, **kwargs)
    assert caught.value.lines == [message]


def test_a_missing_api_key_fails_before_any_request(tmp_path):
    with openai_fake.server() as server:
        config = {"models": {"GPT54Mini": {"base_url": server.base_url + "/v1"}}}
        s = setup(MODELS + plain_agent("model: GPT54Mini"), tmp_path, config=config)
        err = s.error()
        assert (err.code, err.message) == (
            "MODEL_AUTH", "Model 'GPT54Mini' needs an API key in OPENAI_API_KEY.")
        assert server.requests == []


def test_api_key_env_names_the_variable(tmp_path):
    source = """
model Local {
  provider: "openai"
  name: "llama"
  base_url: "http://127.0.0.1:9/v1"
  api_key_env: "LOCAL_KEY"
}
""" + plain_agent("model: Local")
    err = setup(source, tmp_path).error()
    assert err.message == "Model 'Local' needs an API key in LOCAL_KEY."


def test_settings_come_from_the_declaration_with_the_config_laid_over_it():
    program, diagnostics = parse_text(MODELS + """
model Claude {
  provider: "anthropic"
  name: "claude-x"
  timeout: 3000
}
model Scripted {
  provider: "test"
  call_tools: [lookup]
  responses: "turns/one.json"
}
""", "m.luma")
    assert program is not None and not diagnostics
    resolver = ModelResolver(program, overrides={
        "GPT54Mini": {"base_url": "http://127.0.0.1:8000/v1", "max_retries": 0}},
        base_dir="/project")
    gpt = resolver.models["GPT54Mini"]
    assert (gpt.provider, gpt.model, gpt.temperature, gpt.base_url, gpt.max_retries,
            gpt.timeout_ms) == ("openai", "gpt-5.4-mini", 0.0, "http://127.0.0.1:8000/v1", 0,
                                60000)
    claude = resolver.models["Claude"]
    assert (claude.max_tokens, claude.timeout_ms) == (4096, 3000)   # anthropic requires it
    scripted = resolver.models["Scripted"]
    assert scripted.call_tools == ["lookup"]
    assert scripted.responses == "/project/turns/one.json"
    offline = resolver.models["test"]
    assert (offline.provider, offline.call_tools) == ("test", "all")
    assert resolver.for_agent(None).offline_default


def test_a_config_override_reaches_the_offline_model(tmp_path):
    source = ANSWER_SCHEMA + """
schema Echo { text: string }
tool echo(text: string) -> Echo { description: "Echo." }
agent A {
  tools: [echo]
  fn run() -> Answer {
    ask "Go." -> Answer
  }
}
"""
    s = setup(source, tmp_path, handlers={"echo": lambda input: input},
              config={"models": {"test": {"call_tools": "none"}}})
    assert s.run() == {"summary": "summary"}
    assert s.events("tool.call") == []


# ------------------------------------------------------------------------ over HTTP


def test_an_openai_model_runs_the_flow_over_http_and_the_client_is_closed(tmp_path):
    source = MODELS + """
schema Answer { summary: string, total: float }
schema CalcResult { result: float }
tool calculate(a: float, b: float) -> CalcResult {
  description: "Add two numbers."
}
agent A {
  model: GPT54Mini
  system: "Be careful."
  tools: [calculate]
  fn run() -> Answer {
    ask "Add 2 and 3." -> Answer
  }
}
"""
    with openai_fake.server() as server:
        server.reply(completion(tool_calls=[("call_a", "calculate", {"a": 2, "b": 3})]))
        server.reply(completion(json.dumps({"summary": "five", "total": 5})))
        config = {"models": {"GPT54Mini": {"base_url": server.base_url + "/v1"}}}
        s = setup(source, tmp_path, config=config, env={"OPENAI_API_KEY": KEY},
                  handlers={"calculate": lambda input: {"result": input["a"] + input["b"]}})
        assert s.run() == {"summary": "five", "total": 5}
        first, second = (r.body for r in server.requests)
    assert "response_format" not in first
    assert first["tool_choice"] == "auto"
    assert second["response_format"]["json_schema"]["name"] == "Answer"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_a",
                                      "content": '{"result":5}'}
    usage = s.events("ask.response")[0]
    assert (usage["tokens_in"], usage["tokens_out"], usage["provider"]) == (10, 5, "openai")
    assert s.engine._http is None            # closed by Runtime.aclose
    assert KEY not in json.dumps(s.runtime.telemetry.events)


def test_a_recorded_run_replays_offline_without_a_key(tmp_path):
    source = MODELS + plain_agent("model: GPT54Mini")
    recording = tmp_path / "run.json"
    with openai_fake.server() as server:
        server.reply(completion(json.dumps({"summary": "recorded"})))
        config = {"models": {"GPT54Mini": {"base_url": server.base_url + "/v1"}}}
        s = setup(source, tmp_path, config=config, env={"OPENAI_API_KEY": KEY},
                  record=str(recording))
        assert s.run() == {"summary": "recorded"}
    assert KEY not in recording.read_text()
    config = {"models": {"GPT54Mini": {"base_url": "http://127.0.0.1:9/v1"}}}
    replayed = setup(source, tmp_path, config=config, env={}, replay=str(recording))
    assert replayed.run() == {"summary": "recorded"}
    changed = setup(source.replace('"Go."', '"Go on."'), tmp_path, config=config, env={},
                    replay=str(recording))
    err = changed.error()
    assert err.code == "REPLAY_MISMATCH"
    assert "messages[0].content" in err.message


def test_record_and_replay_together_cannot_start(tmp_path):
    with pytest.raises(StartError) as caught:
        setup(plain_agent(), tmp_path, record=str(tmp_path / "a.json"),
              replay=str(tmp_path / "b.json"))
    assert caught.value.lines == ["--record and --replay cannot be used together"]
