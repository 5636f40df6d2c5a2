"""OpenTelemetry spans (RUNTIME.md §7), with the GenAI semantic conventions: ``invoke_agent
{agent}`` for an agent method call, ``chat {model}`` for a model request, ``execute_tool
{tool}`` for a tool call, each a child of the span current where it starts (a tool a model
calls is a child of the agent method that asked).

Nothing is imported unless the application has imported OpenTelemetry itself (and so may have
configured a tracer provider): :func:`active_tracer` looks in ``sys.modules`` first, so a
process without OpenTelemetry pays one dictionary lookup per run. With the API's default
(proxy) provider no span is made. Spans carry names, ids, counts and codes only — never a
secret, and a prompt, an argument or a result only with the GenAI conventions' explicit opt-in
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``), redacted.

The ``luma`` command sets up a provider of its own when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set
and nothing else configured one: :func:`export_from_environment`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

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


CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI conventions' opt-in: prompts, answers, tool arguments and results on spans."""


def captures_content(env: Mapping[str, str]) -> bool:
    return env.get(CAPTURE_CONTENT, "").strip().lower() == "true"


def content_text(value: Any, redact: Callable[[str], str]) -> str:
    """A value as a span attribute carries it: JSON text, every known secret replaced."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)
    return redact(text)


def input_messages(messages: Sequence[Any], redact: Callable[[str], str]) -> str:
    """``gen_ai.input.messages``: the request's messages, in the conventions' shape."""
    out = []
    for m in messages:
        parts: list[dict[str, Any]] = []
        if m.role == "tool":
            parts.append({"type": "tool_call_response", "id": m.tool_call_id,
                          "response": m.content})
        elif m.content is not None:
            parts.append({"type": "text", "content": m.content})
        for call in m.tool_calls:
            parts.append({"type": "tool_call", "id": call.id, "name": call.name,
                          "arguments": call.arguments})
        out.append({"role": m.role, "parts": parts})
    return content_text(out, redact)


def output_messages(response: Any, redact: Callable[[str], str]) -> str:
    """``gen_ai.output.messages``: the model's answer, in the conventions' shape."""
    parts: list[dict[str, Any]] = []
    if response.content is not None:
        parts.append({"type": "text", "content": response.content})
    for call in response.tool_calls:
        parts.append({"type": "tool_call", "id": call.id, "name": call.name,
                      "arguments": call.arguments})
    return content_text([{"role": "assistant", "parts": parts,
                          "finish_reason": response.finish_reason}], redact)


def provider_name(provider: str) -> str:
    return _PROVIDER_NAMES.get(provider, provider)


def start_tool_span(tracer: Any, tool: str, call_id: str | None, side_effects: str,
                    arguments: str | None = None) -> Any:
    attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool",
                                  "gen_ai.tool.name": tool, "gen_ai.tool.type": "function",
                                  "luma.tool.side_effects": side_effects}
    if call_id is not None:
        attributes["gen_ai.tool.call.id"] = call_id
    if arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = arguments
    return tracer.start_span(f"execute_tool {tool}", attributes=attributes)


def end_tool_span(span: Any, *, attempts: int, cache: str, single_flight: bool,
                  replayed: bool, error_code: str | None, message: str | None,
                  result: str | None = None) -> None:
    span.set_attributes({"luma.tool.attempts": attempts, "luma.tool.cache": cache,
                         "luma.tool.single_flight": single_flight,
                         "luma.tool.idempotent_replay": replayed})
    if result is not None:
        span.set_attribute("gen_ai.tool.call.result", result)
    if error_code is not None:
        _failed(span, error_code, message)
    span.end()


def start_chat_span(tracer: Any, model: str, provider: str, model_id: str,
                    messages: str | None = None) -> Any:
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider_name(provider),
                  "gen_ai.request.model": model_id, "luma.model": model}
    if messages is not None:
        attributes["gen_ai.input.messages"] = messages
    return tracer.start_span(f"chat {model_id}", attributes=attributes)


def end_chat_span(span: Any, *, finish_reason: str | None, input_tokens: int | None,
                  output_tokens: int | None, response_model: str | None,
                  error_code: str | None = None, message: str | None = None,
                  output: str | None = None) -> None:
    attributes: dict[str, Any] = {}
    if output is not None:
        attributes["gen_ai.output.messages"] = output
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


# ------------------------------------------------------------------- the luma command's export
FLUSH_TIMEOUT_MS = 2000
"""How long the end of a run waits at most for its last spans to be sent."""

_HEADER_VARIABLES = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")


class Export:
    """The SDK provider the ``luma`` command set up: its batch processor is flushed, for at
    most :data:`FLUSH_TIMEOUT_MS`, when the run ends (:meth:`close`)."""

    def __init__(self, processor: Any, exporter: _WarnOnce) -> None:
        self.processor = processor
        self.exporter = exporter

    def close(self) -> None:
        import threading

        # the processor's shutdown sends what is left and waits for the exporter, which
        # retries for up to its own timeout (10 s): wait for it in a daemon thread, bounded
        done = threading.Thread(target=self._shutdown, name="luma-otel-flush", daemon=True)
        done.start()
        done.join(FLUSH_TIMEOUT_MS / 1000)
        if done.is_alive() or self.exporter.busy:  # the spans it still holds are lost
            self.exporter.failed(f"no answer within {FLUSH_TIMEOUT_MS // 1000} s")

    def _shutdown(self) -> None:
        try:
            self.processor.shutdown()
        except Exception:  # an exporter's failure is not the run's
            self.exporter.failed("the export failed")


def export_from_environment(env: Mapping[str, str], warn: Callable[[str], None],
                            secret: Callable[[str], None]) -> Export | None:
    """For the ``luma`` command: with ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or its ``_TRACES_``
    form) set, no tracer provider configured yet (a tool module may have configured one), and
    ``luma[otel]`` installed, install an SDK provider that sends spans with the OTLP/HTTP
    exporter through a batch processor. ``service.name`` is ``OTEL_SERVICE_NAME`` or ``luma``.
    An endpoint that does not answer costs the run at most :data:`FLUSH_TIMEOUT_MS` at its end
    and one warning. Nothing is imported without the variable."""
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if not endpoint:  # the base URL: the exporter adds the signal's path
        endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        if not endpoint:
            return None
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" or \
            env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    try:
        secret(urlsplit(endpoint).password or "")  # a password in the URL, too
    except ValueError:
        pass
    for variable in _HEADER_VARIABLES:  # an exporter's headers carry API keys
        for pair in env.get(variable, "").split(","):
            value = pair.partition("=")[2].strip()
            if value:
                secret(value)
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        warn("warning: OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK or its "
             "OTLP/HTTP exporter is not installed; no spans are sent (pip install "
             "'luma[otel]')")
        return None
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None  # configured by the application: its choice, not ours
    _quiet_exporter_logs()
    attributes = {} if env.get("OTEL_SERVICE_NAME", "").strip() else {SERVICE_NAME: "luma"}
    provider = TracerProvider(resource=Resource.create(attributes), shutdown_on_exit=False)
    try:
        otlp = OTLPSpanExporter()
    except Exception as exc:  # a value the exporter cannot use: the run goes on without it
        warn(f"warning: cannot send OpenTelemetry spans to {_shown(endpoint)}: {exc}; no spans "
             "are sent")
        return None
    exporter = _WarnOnce(otlp, _shown(endpoint), warn)
    processor = BatchSpanProcessor(exporter)  # type: ignore[arg-type]
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return Export(processor, exporter)


def _shown(endpoint: str) -> str:
    """The endpoint as a warning names it: without a user, a password or a query."""
    from urllib.parse import urlunsplit

    try:
        parts = urlsplit(endpoint.strip())
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        return "the OTLP endpoint"


def _quiet_exporter_logs() -> None:
    """The exporter logs each failed batch and retry; the run says it once (_WarnOnce)."""
    import logging

    for name in ("opentelemetry.exporter.otlp", "opentelemetry.exporter.http",
                 "opentelemetry.sdk._shared_internal"):
        logger = logging.getLogger(name)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


class _WarnOnce:
    """The OTLP exporter, saying once on stderr that spans could not be sent."""

    def __init__(self, exporter: Any, endpoint: str, warn: Callable[[str], None]) -> None:
        self._exporter = exporter
        self._endpoint = endpoint
        self._warn = warn
        self._warned = False
        self.busy = False

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.busy = True
        try:
            result = self._exporter.export(spans)
        except Exception:  # an exporter's own failure must not reach the run
            result = SpanExportResult.FAILURE
        finally:
            self.busy = False
        if result is not SpanExportResult.SUCCESS:
            self.failed("the export failed")
        return result

    def failed(self, reason: str) -> None:
        if not self._warned:
            self._warned = True
            self._warn(f"warning: cannot send OpenTelemetry spans to {self._endpoint} "
                       f"({reason}); spans of this run are lost")

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self._exporter.force_flush(timeout_millis))
