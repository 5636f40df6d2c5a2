"""OpenTelemetry spans (RUNTIME.md §7) with the GenAI semantic conventions, collected with the
SDK's in-memory exporter from real runs of a program on the offline model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import luma

EXPORTER = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(_provider)  # once per process, as an application does

SOURCE = """
schema Stats {
  words: int
}

tool count_words(text: string) -> Stats {
  description: "Count the words of a text."
  side_effects: "read"
  cache: true
}

tool broken(text: string) -> Stats {
  description: "A tool whose handler fails."
  credential: "DESK_TOKEN"
}

model Offline {
  provider: "test"
  call_tools: [count_words]
}

agent Desk {
  model: Offline
  tools: [count_words, broken]

  fn run(text: string) -> string {
    stats = tool count_words({ text: text })
    ask "Count the words of: {text}" -> string
  }

  fn fail(text: string) -> Stats {
    return tool broken({ text: text })
  }
}
"""


def broken(input: Any) -> Any:
    raise RuntimeError("down, token sk-otel-secret-0123456789")


@pytest.fixture()
def spans() -> Any:
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def load() -> luma.Program:
    return luma.loads(SOURCE, tools={"count_words": lambda i: {"words": len(i["text"].split())},
                                     "broken": broken},
                      env={"DESK_TOKEN": "sk-otel-secret-0123456789"})


def test_a_run_emits_invoke_agent_chat_and_execute_tool_spans_parented(spans: Any) -> None:
    with load() as program:
        assert program.run_sync("Desk", text="secret words here") == "value"
    finished = {s.name: s for s in spans.get_finished_spans()}
    names = [s.name for s in spans.get_finished_spans()]
    assert sorted(set(names)) == ["chat Offline", "execute_tool count_words",
                                  "invoke_agent Desk"]
    agent = finished["invoke_agent Desk"]
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "Desk"
    assert agent.parent is None
    tools = [s for s in spans.get_finished_spans() if s.name == "execute_tool count_words"]
    assert len(tools) == 2  # the direct call, then the model's call (from the cache)
    direct, native = tools
    for span in (direct, native):
        assert span.parent is not None and span.parent.span_id == agent.context.span_id
        assert span.attributes["gen_ai.tool.name"] == "count_words"
        assert span.attributes["gen_ai.tool.type"] == "function"
        assert span.attributes["luma.tool.side_effects"] == "read"
        assert span.attributes["luma.tool.attempts"] in (0, 1)
        assert span.attributes["luma.tool.single_flight"] is False
        assert span.attributes["luma.tool.idempotent_replay"] is False
    assert "gen_ai.tool.call.id" not in direct.attributes
    assert direct.attributes["luma.tool.cache"] == "miss"
    assert native.attributes["gen_ai.tool.call.id"] == "call_1"
    chats = [s for s in spans.get_finished_spans() if s.name == "chat Offline"]
    assert len(chats) == 2  # the turn that calls the tool, the turn that answers
    for chat in chats:
        assert chat.parent is not None and chat.parent.span_id == agent.context.span_id
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "test"
        assert chat.attributes["gen_ai.request.model"] == "Offline"
        assert chat.attributes["gen_ai.usage.input_tokens"] == 0
        assert chat.attributes["gen_ai.usage.output_tokens"] == 0
        assert len(chat.attributes["gen_ai.response.finish_reasons"]) == 1
    # no content without an opt-in: neither the prompt nor the arguments
    for span in spans.get_finished_spans():
        assert all("secret words" not in str(v) for v in span.attributes.values())


def test_errors_carry_the_luma_code_and_no_secret(spans: Any) -> None:
    with load() as program:
        with pytest.raises(luma.RunError):
            program.call_sync("Desk", "fail", text="x")
    finished = {s.name: s for s in spans.get_finished_spans()}
    tool = finished["execute_tool broken"]
    agent = finished["invoke_agent Desk"]
    for span in (tool, agent):
        assert span.attributes["error.type"] == "TOOL_FAILED"
        assert span.status.status_code == trace.StatusCode.ERROR
        assert "sk-otel-secret-0123456789" not in (span.status.description or "")
        assert "[secret]" in (span.status.description or "")


def test_without_opentelemetry_imported_nothing_is_imported() -> None:
    here = "tests/api"
    code = (f"import sys, luma; p = luma.load('{here}/triage.luma', "
            f"tool_modules=['{here}/triage_tools.py']); "
            "print(p.call_sync('Triage', 'summarize', text='a b')); "
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert done.stdout == "2 words\n[]\n"


# ------------------------------------------- the model that answered, from recorded responses
def _recorded_chat(tmp_path: Path, spans: Any, provider: str, model: str, env: dict[str, str],
                   server: Any, base: str) -> Any:
    from test_providers_recorded import run_ask

    rec = _recording(provider)
    with serve(server, rec) as running:
        run_ask(tmp_path, running, model, "string", env=env, base_url=running.base_url + base)
    (chat,) = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    return rec, chat


def _recording(provider: str) -> Any:
    from providers.replay import load as load_recording

    return load_recording(provider, "plain_answer")


def serve(server: Any, rec: Any) -> Any:
    from providers.replay import serve as serve_recording

    return serve_recording(server, rec)


def test_openai_chat_span_names_the_model_that_answered(tmp_path: Path, spans: Any) -> None:
    from providers import openai_fake

    rec, chat = _recorded_chat(tmp_path, spans, "openai", "GPT",
                               {"OPENAI_API_KEY": openai_fake.KEY}, openai_fake.server(), "/v1")
    assert chat.name == "chat gpt-4o"
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["gen_ai.request.model"] == "gpt-4o"
    assert chat.attributes["gen_ai.response.model"] == rec.response["model"] == \
        "o3-mini-2025-01-31"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 11
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)


def test_anthropic_chat_span_names_the_model_that_answered(tmp_path: Path, spans: Any) -> None:
    from providers import anthropic_fake

    rec, chat = _recorded_chat(tmp_path, spans, "anthropic", "Claude",
                               {"ANTHROPIC_API_KEY": anthropic_fake.KEY},
                               anthropic_fake.server(), "")
    assert chat.attributes["gen_ai.provider.name"] == "anthropic"
    assert chat.attributes["gen_ai.request.model"] == "claude-sonnet-4-5"
    assert chat.attributes["gen_ai.response.model"] == rec.response["model"] == \
        "claude-3-opus-20240229"


def test_gemini_chat_span_names_the_model_version_that_answered(tmp_path: Path,
                                                                spans: Any) -> None:
    from providers import gemini_fake
    from test_providers_recorded import GEMINI_ENV, gemini_server

    rec, chat = _recorded_chat(tmp_path, spans, "gemini", "Gemini", GEMINI_ENV,
                               gemini_server(), "")
    assert gemini_fake.KEY == GEMINI_ENV["GEMINI_API_KEY"]
    assert chat.attributes["gen_ai.provider.name"] == "gcp.gemini"
    assert chat.attributes["gen_ai.request.model"] == "gemini-2.5-flash"
    assert chat.attributes["gen_ai.response.model"] == rec.response["modelVersion"] == \
        "gemini-2.5-flash"


def test_the_offline_model_names_no_response_model(spans: Any) -> None:
    with load() as program:
        program.run_sync("Desk", text="a b")
    chats = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    assert chats and all("gen_ai.response.model" not in c.attributes for c in chats)


def test_content_only_with_the_opt_in_and_never_a_secret(spans: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    with load() as program:
        program.run_sync("Desk", text="words and sk-otel-secret-0123456789")
        with pytest.raises(luma.RunError):
            program.call_sync("Desk", "fail", text="x")
    finished = spans.get_finished_spans()
    chat = next(s for s in finished if s.name == "chat Offline")
    import json

    messages = json.loads(chat.attributes["gen_ai.input.messages"])
    assert messages[-1]["parts"] == [{"type": "text",
                                      "content": "Count the words of: words and [secret]"}]
    tool = next(s for s in finished if s.name == "execute_tool count_words")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {
        "text": "words and [secret]"}
    assert json.loads(tool.attributes["gen_ai.tool.call.result"]) == {"words": 3}
    broken = next(s for s in finished if s.name == "execute_tool broken")
    assert "gen_ai.tool.call.result" not in broken.attributes  # it failed: no result
    for span in finished:
        for value in span.attributes.values():
            assert "sk-otel-secret-0123456789" not in str(value)
