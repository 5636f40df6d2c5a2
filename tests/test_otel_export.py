"""The ``luma`` command's own OpenTelemetry export (RUNTIME.md §7): with
``OTEL_EXPORTER_OTLP_ENDPOINT`` set, a real run sends its spans with the SDK's OTLP/HTTP exporter
to a loopback receiver, which decodes the protobuf with the ``opentelemetry-proto`` classes. An
endpoint that does not answer costs a bounded wait and one warning, never the run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)

from cli_runner import luma

SECRET = "sk-otlp-secret-0123456789"

SOURCE = """
schema Stats {
  words: int
  note: string
}

tool count_words(text: string) -> Stats {
  description: "Count the words of a text."
  side_effects: "read"
  credential: "DESK_TOKEN"
}

model Offline {
  provider: "test"
  call_tools: [count_words]
}

agent Desk {
  model: Offline
  tools: [count_words]

  fn run(text: string) -> string {
    stats = tool count_words({ text: text })
    ask "Count the words of: {text}" -> string
  }
}
"""

TOOLS = f"""
def count_words(input):
    return {{"words": len(input["text"].split()), "note": "token {SECRET}"}}
"""


class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: every request it decodes, kept."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.content_types: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                message = ExportTraceServiceRequest()
                message.ParseFromString(body)
                receiver.paths.append(self.path)
                receiver.content_types.append(self.headers["Content-Type"])
                receiver.requests.append(message)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[tuple[Any, dict[str, Any], dict[str, Any]]]:
        """Each span with its resource's and its own attributes as plain values."""
        out = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        out.append((span, _attributes(span.attributes), resource))
        return out


def _attributes(pairs: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for kv in pairs:
        kind = kv.value.WhichOneof("value")
        if kind == "array_value":
            items = kv.value.array_value.values
            values[kv.key] = [getattr(v, v.WhichOneof("value")) for v in items]
        else:
            values[kv.key] = getattr(kv.value, kind)
    return values


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    thread = threading.Thread(target=r.server.serve_forever, daemon=True)
    thread.start()
    yield r
    r.server.shutdown()
    r.server.server_close()


@pytest.fixture()
def program(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "desk.luma").write_text(SOURCE)
    (tmp_path / "desk_tools.py").write_text(TOOLS)
    return str(tmp_path / "desk.luma"), str(tmp_path / "desk_tools.py")


def run(program: tuple[str, str], env: dict[str, str]) -> Any:
    source, tools = program
    return luma(source, "--tool-module", tools, "--arg", "text=secret words here",
                env={"DESK_TOKEN": SECRET, **env})


def test_a_cli_run_sends_its_spans_to_the_otlp_endpoint(receiver: Receiver,
                                                         program: tuple[str, str]) -> None:
    r = run(program, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url})
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout) == "value"
    assert r.stderr == ""
    assert set(receiver.paths) == {"/v1/traces"}
    assert set(receiver.content_types) == {"application/x-protobuf"}
    spans = receiver.spans()
    names = sorted(span.name for span, _, _ in spans)
    assert names == ["chat Offline", "chat Offline", "execute_tool count_words",
                     "execute_tool count_words", "invoke_agent Desk"]
    for _, _, resource in spans:
        assert resource["service.name"] == "luma"
    (agent, agent_attrs, _), = [s for s in spans if s[0].name == "invoke_agent Desk"]
    assert agent_attrs["gen_ai.operation.name"] == "invoke_agent"
    assert agent_attrs["gen_ai.agent.name"] == "Desk"
    assert agent.parent_span_id == b""
    children = [s for s in spans if s[0] is not agent]
    for span, _, _ in children:
        assert span.parent_span_id == agent.span_id
        assert span.trace_id == agent.trace_id
    tools = [attrs for span, attrs, _ in children if span.name.startswith("execute_tool")]
    assert [t.get("gen_ai.tool.call.id") for t in tools] == [None, "call_1"]
    for attrs in tools:
        assert attrs["gen_ai.tool.name"] == "count_words"
        assert attrs["gen_ai.tool.type"] == "function"
        assert attrs["luma.tool.side_effects"] == "read"
        assert attrs["luma.tool.attempts"] == 1
        assert attrs["luma.tool.cache"] == "off"
        assert attrs["luma.tool.single_flight"] is False
        assert attrs["luma.tool.idempotent_replay"] is False
    chats = [attrs for span, attrs, _ in children if span.name.startswith("chat")]
    for attrs in chats:
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == "test"
        assert attrs["gen_ai.request.model"] == "Offline"
        assert attrs["gen_ai.usage.input_tokens"] == 0
    assert [attrs["gen_ai.response.finish_reasons"] for attrs in chats] == [["tool_calls"],
                                                                          ["stop"]]
    everything = str([(span.name, attrs) for span, attrs, _ in spans])
    assert "secret words" not in everything  # no content without the opt-in
    assert SECRET not in everything


def test_content_with_the_opt_in_and_never_a_secret(receiver: Receiver,
                                                    program: tuple[str, str]) -> None:
    r = run(program, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "desk",
                      "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
    assert r.code == 0, r.stderr
    spans = receiver.spans()
    assert {resource["service.name"] for _, _, resource in spans} == {"desk"}
    tools = [attrs for span, attrs, _ in spans if span.name == "execute_tool count_words"]
    assert json.loads(tools[0]["gen_ai.tool.call.arguments"]) == {"text": "secret words here"}
    assert json.loads(tools[0]["gen_ai.tool.call.result"]) == {"words": 3,
                                                              "note": "token [secret]"}
    chats = [attrs for span, attrs, _ in spans if span.name == "chat Offline"]
    first = json.loads(chats[0]["gen_ai.input.messages"])
    assert first[-1] == {"role": "user", "parts": [
        {"type": "text", "content": "Count the words of: secret words here"}]}
    answer = json.loads(chats[0]["gen_ai.output.messages"])
    assert answer[0]["parts"][0]["type"] == "tool_call"
    assert answer[0]["parts"][0]["name"] == "count_words"
    second = json.loads(chats[1]["gen_ai.input.messages"])
    assert second[-1]["parts"][0]["type"] == "tool_call_response"
    assert "[secret]" in second[-1]["parts"][0]["response"]
    everything = str([(span.name, attrs) for span, attrs, _ in spans])
    assert SECRET not in everything
    assert "[secret]" in everything


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_endpoint_that_refuses_costs_one_warning_not_the_run(
        program: tuple[str, str]) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    r = run(program, {"OTEL_EXPORTER_OTLP_ENDPOINT": url})
    elapsed = time.monotonic() - started
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout) == "value"
    assert r.stderr.count("warning") == 1, r.stderr
    assert r.stderr.startswith(f"warning: cannot send OpenTelemetry spans to {url}/v1/traces (")
    assert r.stderr.endswith("); spans of this run are lost\n")
    assert "Traceback" not in r.stderr
    assert elapsed < 20


def test_an_endpoint_that_never_answers_is_waited_for_in_bounded_time(
        program: tuple[str, str]) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections (the kernel does), never answers
    url = f"http://user:{SECRET}@127.0.0.1:{silent.getsockname()[1]}"
    try:
        started = time.monotonic()
        r = run(program, {"OTEL_EXPORTER_OTLP_ENDPOINT": url})
        elapsed = time.monotonic() - started
    finally:
        silent.close()
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout) == "value"
    port = url.rsplit(":", 1)[1]
    assert r.stderr == (f"warning: cannot send OpenTelemetry spans to http://127.0.0.1:{port}"
                        "/v1/traces (no answer within 2 s); spans of this run are lost\n")
    assert elapsed < 9  # the exporter alone would wait 10 s


def test_without_the_endpoint_nothing_of_opentelemetry_is_imported(tmp_path: Path) -> None:
    (tmp_path / "probe.luma").write_text(
        "schema Loaded { modules: string[] }\n"
        'tool loaded() -> Loaded { description: "The OpenTelemetry modules loaded." }\n'
        "tool loaded({})\n")
    (tmp_path / "probe_tools.py").write_text(
        "import sys\n\ndef loaded(input):\n"
        "    return {'modules': sorted(m for m in sys.modules if m.startswith('opentelemetry'))}\n")
    r = luma(str(tmp_path / "probe.luma"), "--tool-module", str(tmp_path / "probe_tools.py"))
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout) == {"modules": []}


def test_without_the_sdk_the_endpoint_is_one_warning_naming_the_extra(
        program: tuple[str, str]) -> None:
    source, tools = program
    # a Python where the SDK cannot be imported, as without luma[otel]
    code = ("import sys; sys.modules['opentelemetry.sdk'] = None; "
            "sys.modules['opentelemetry.exporter'] = None; from luma.cli import main; "
            f"sys.exit(main([{source!r}, '--tool-module', {tools!r}, '--arg', 'text=a b']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "DESK_TOKEN": SECRET,
                               "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "value"
    assert done.stderr == ("warning: OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry "
                           "SDK or its OTLP/HTTP exporter is not installed; no spans are sent "
                           "(pip install 'luma[otel]')\n")
