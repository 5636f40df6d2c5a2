"""OpenTelemetry spans (RUNTIME.md §7), with the GenAI semantic conventions: ``invoke_agent
{agent}`` for an agent method call, ``chat {model}`` for a model request, ``execute_tool
{tool}`` for a tool call, each a child of the span current where it starts (a tool a model
calls is a child of the agent method that asked).

Nothing is imported unless the application has imported OpenTelemetry itself (and so may have
configured a tracer provider): :func:`active_tracer` looks in ``sys.modules`` first, so a
process without OpenTelemetry pays one dictionary lookup per run. With the API's default
(proxy) provider no span is made. Spans carry names, ids, counts and codes only — never a
prompt, an argument, a result or a secret.
"""

from __future__ import annotations

import sys
from typing import Any

from luma.version import __version__

# the GenAI conventions' names of the providers Luma has adapters for
_PROVIDER_NAMES = {"openai": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini"}


def active_tracer() -> Any:
    """The tracer of the configured tracer provider, or None (OpenTelemetry not imported, or
    no provider configured)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        return None
    return provider.get_tracer("luma", __version__)


def provider_name(provider: str) -> str:
    return _PROVIDER_NAMES.get(provider, provider)


def start_tool_span(tracer: Any, tool: str, call_id: str | None, side_effects: str) -> Any:
    attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool",
                                  "gen_ai.tool.name": tool, "gen_ai.tool.type": "function",
                                  "luma.tool.side_effects": side_effects}
    if call_id is not None:
        attributes["gen_ai.tool.call.id"] = call_id
    return tracer.start_span(f"execute_tool {tool}", attributes=attributes)


def end_tool_span(span: Any, *, attempts: int, cache: str, single_flight: bool,
                  replayed: bool, error_code: str | None, message: str | None) -> None:
    span.set_attributes({"luma.tool.attempts": attempts, "luma.tool.cache": cache,
                         "luma.tool.single_flight": single_flight,
                         "luma.tool.idempotent_replay": replayed})
    if error_code is not None:
        _failed(span, error_code, message)
    span.end()


def start_chat_span(tracer: Any, model: str, provider: str, model_id: str) -> Any:
    return tracer.start_span(f"chat {model_id}", attributes={
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider_name(provider),
        "gen_ai.request.model": model_id, "luma.model": model})


def end_chat_span(span: Any, *, finish_reason: str | None, input_tokens: int | None,
                  output_tokens: int | None, response_model: str | None,
                  error_code: str | None = None, message: str | None = None) -> None:
    attributes: dict[str, Any] = {}
    if finish_reason is not None:
        attributes["gen_ai.response.finish_reasons"] = [finish_reason]
    if input_tokens is not None:
        attributes["gen_ai.usage.input_tokens"] = input_tokens
    if output_tokens is not None:
        attributes["gen_ai.usage.output_tokens"] = output_tokens
    if response_model is not None:
        attributes["gen_ai.response.model"] = response_model
    span.set_attributes(attributes)
    if error_code is not None:
        _failed(span, error_code, message)
    span.end()


def agent_span(tracer: Any, agent: str, fn: str) -> Any:
    """A context manager: the ``invoke_agent`` span, current while the method runs."""
    return tracer.start_as_current_span(
        f"invoke_agent {agent}", record_exception=False, set_status_on_exception=False,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
                    "luma.agent.method": fn})


def agent_failed(span: Any, error_code: str, message: str) -> None:
    _failed(span, error_code, message)


def _failed(span: Any, error_code: str, message: str | None) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", error_code)
    span.set_status(Status(StatusCode.ERROR, message))
