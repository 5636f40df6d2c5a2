"""A real HTTP server on 127.0.0.1, started by a test, answering scripted replies.

Each provider fake gives it a ``validate`` function that checks a request the way the provider
would (path, auth header, body shape) and answers 4xx with the provider's error shape when the
request breaks the wire format; the adapter under test never knows it is talking to a fake.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Reply:
    """One scripted answer: a JSON body (dict/list) or raw bytes, status, headers, a delay."""

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Captured:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw: bytes
    body: Any
    at: float


Validator = Callable[[Captured], "Reply | None"]


class FakeServer:
    """``with FakeServer(validate) as server: server.reply(...); ... server.requests``."""

    def __init__(self, validate: Validator | None = None) -> None:
        self.validate = validate
        self.replies: deque[Reply] = deque()
        self.requests: list[Captured] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------- control
    def reply(self, body: Any = None, status: int = 200, headers: dict[str, str] | None = None,
              delay: float = 0.0) -> FakeServer:
        self.replies.append(Reply(body, status, dict(headers or {}), delay))
        return self

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> FakeServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                server._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False  # a handler still sleeping must not hold up stop()
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------- serving
    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        parts = urlsplit(handler.path)
        captured = Captured("POST", parts.path, parse_qs(parts.query),
                            {k.lower(): v for k, v in handler.headers.items()}, raw, body,
                            time.monotonic())
        with self._lock:
            self.requests.append(captured)
            problem = self.validate(captured) if self.validate else None
            reply = problem or (self.replies.popleft() if self.replies else
                                Reply({"error": {"message": "no scripted reply left"}}, 500))
        if reply.delay:
            time.sleep(reply.delay)
        payload = reply.body if isinstance(reply.body, bytes) else \
            json.dumps(reply.body).encode()
        try:
            handler.send_response(reply.status)
            content_type = "application/json" if not isinstance(reply.body, bytes) else "text/plain"
            handler.send_header("content-type", content_type)
            handler.send_header("content-length", str(len(payload)))
            for k, v in reply.headers.items():
                handler.send_header(k, v)
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)


class WireError(Exception):
    """A request that breaks the provider's wire format, with the provider's answer to it."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def require(condition: bool, message: str, status: int = 400) -> None:
    if not condition:
        raise WireError(message, status)
