"""The runs of one program share one HTTP connection pool, and each run may bring its own API
key (``env=``), against a real OpenAI-shaped server on 127.0.0.1 that keeps connections alive."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import luma
from tests.providers.openai_fake import completion

PROGRAM = """
schema Reply { text: string }

model Gpt { provider: "openai", name: "gpt-5.4-mini", base_url: "BASE/v1" }

agent Chat {
  model: Gpt

  fn run(q: string) -> Reply {
    ask "Answer: {q}" -> Reply
  }
}
"""


class KeepAliveServer:
    """Answers every chat completion with ``{"text": <the bearer's tenant>}``; records each
    request's client port (one per TCP connection) and its Authorization header."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str]] = []
        lock = threading.Lock()
        seen = self.seen

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real providers do

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("content-length") or 0)
                json.loads(self.rfile.read(length))
                auth = self.headers.get("authorization", "")
                with lock:
                    seen.append((self.client_address[1], auth))
                tenant = auth.removeprefix("Bearer sk-")[:8]
                body = json.dumps(completion(json.dumps({"text": tenant}))).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def server() -> Iterator[KeepAliveServer]:
    s = KeepAliveServer()
    s.thread.start()
    try:
        yield s
    finally:
        s.httpd.shutdown()
        s.httpd.server_close()


def _program(server: KeepAliveServer, **options: Any) -> luma.Program:
    return luma.loads(PROGRAM.replace("BASE", server.base_url), stderr=io.StringIO(), **options)


def test_runs_share_one_connection_pool(server: KeepAliveServer) -> None:
    async def main() -> list[Any]:
        async with _program(server, env={"OPENAI_API_KEY": "sk-shared0-key-123456"}) as program:
            return [await program.run("Chat", q=str(i)) for i in range(10)]

    assert asyncio.run(main()) == [{"text": "shared0-"}] * 10
    ports = {port for port, _ in server.seen}
    assert len(server.seen) == 10
    assert len(ports) == 1  # ten runs, one kept-alive connection


def test_each_run_may_bring_its_own_api_key(server: KeepAliveServer) -> None:
    keys = {"alpha": "sk-alpha000-secret-key-1", "beta": "sk-beta0000-secret-key-2"}
    events: list[dict[str, Any]] = []

    async def main() -> list[Any]:
        async with _program(server, env={}) as program:
            with pytest.raises(luma.RunError) as missing:
                await program.run("Chat", q="x")
            assert (missing.value.code, missing.value.message) == (
                "MODEL_AUTH", "Model 'Gpt' needs an API key in OPENAI_API_KEY.")
            return await asyncio.gather(*(
                program.run("Chat", q=tenant, env={"OPENAI_API_KEY": key},
                            on_event=events.append)
                for tenant, key in list(keys.items()) * 5))

    results = asyncio.run(main())
    assert results == [{"text": "alpha000"}, {"text": "beta0000"}] * 5
    assert sorted(auth for _, auth in server.seen) == sorted(
        [f"Bearer {keys['alpha']}"] * 5 + [f"Bearer {keys['beta']}"] * 5)
    text = json.dumps(events)
    assert "ask.request" in text
    assert keys["alpha"] not in text and keys["beta"] not in text
