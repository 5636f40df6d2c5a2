"""A loopback OpenAI-compatible chat completions server for the native-tool-loop benchmark.

Stdlib only, so that any Python can run it. It answers ``POST /v1/chat/completions``
deterministically from the model name ``loop-TxK``: while the conversation holds fewer than
``T*K`` tool results it answers with ``K`` calls to ``add(a, b)``; then it reads every tool
result in the conversation, adds them up and answers with the final JSON
``{"calls": N, "total": SUM}``, so a client that lost or garbled a result gets a wrong total.

It keeps its own time per request: reading the headers, then from the moment the whole body
has arrived to the last byte of the answer (parsing, counting, building and writing). Waiting
for the body is not counted: those bytes are the client's to send. It serves the running
totals on ``GET /stats``: ``{"requests", "request_bytes", "server_s", "server_cpu_s"}``. A
client's overhead is its wall time minus the ``server_s`` its run added.

    python bench/native_tool_loop_server.py [--port 0]

prints ``PORT <n>`` once it listens on 127.0.0.1 and serves until stdin closes or it is killed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_RE = re.compile(r"^loop-(\d+)x(\d+)$")


def final_total(messages: list[dict[str, Any]]) -> tuple[int, int]:
    """How many tool results the conversation holds and the sum of their values."""
    calls = total = 0
    for m in messages:
        if m.get("role") != "tool":
            continue
        calls += 1
        value = json.loads(m["content"])
        total += value["result"] if isinstance(value, dict) else value
    return calls, total


def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The status and JSON body that answer one chat completions request."""
    found = MODEL_RE.match(str(body.get("model", "")))
    messages = body.get("messages")
    if found is None or not isinstance(messages, list):
        return 400, {"error": {"message": "model must be loop-TxK and messages a list",
                               "type": "invalid_request_error"}}
    turns, per_turn = int(found.group(1)), int(found.group(2))
    done = sum(1 for m in messages if m.get("role") == "tool")
    if done < turns * per_turn:
        if not body.get("tools"):
            return 400, {"error": {"message": f"tools were not offered after {done} calls",
                                   "type": "invalid_request_error"}}
        turn = done // per_turn
        message: dict[str, Any] = {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": f"call_{turn}_{j}", "type": "function",
                            "function": {"name": "add",
                                         "arguments": json.dumps({"a": turn, "b": j})}}
                           for j in range(per_turn)]}
        finish = "tool_calls"
    else:
        calls, total = final_total(messages)
        message = {"role": "assistant",
                   "content": json.dumps({"calls": calls, "total": total})}
        finish = "stop"
    return 200, {"id": "chatcmpl-bench", "object": "chat.completion", "created": 0,
                 "model": body["model"],
                 "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                 "usage": {"prompt_tokens": len(messages), "completion_tokens": 1,
                           "total_tokens": len(messages) + 1}}


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.request_bytes = 0
        self.server_s = 0.0
        self.server_cpu_s = 0.0

    def add(self, size: int, wall: float, cpu: float) -> None:
        with self.lock:
            self.requests += 1
            self.request_bytes += size
            self.server_s += wall
            self.server_cpu_s += cpu

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"requests": self.requests, "request_bytes": self.request_bytes,
                    "server_s": self.server_s,
                    "server_cpu_s": self.server_cpu_s}


def make_server(port: int = 0) -> ThreadingHTTPServer:
    stats = Stats()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"      # keep-alive, as a real endpoint
        disable_nagle_algorithm = True

        def parse_request(self) -> bool:
            # the clock runs while the headers are read (the request line came while waiting)
            started = time.perf_counter()
            self.started_cpu = time.thread_time()
            ok = super().parse_request()
            self.headers_s = time.perf_counter() - started
            return ok

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path == "/stats":
                self._send(200, stats.snapshot())
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            started = time.perf_counter()
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"unexpected path {self.path}"}})
                return
            if not self.headers.get("authorization", "").startswith("Bearer "):
                self._send(401, {"error": {"message": "missing bearer key"}})
                return
            try:
                body = json.loads(raw)
                status, reply = answer(body)
            except (ValueError, KeyError, TypeError) as exc:
                status, reply = 400, {"error": {"message": f"bad request: {exc}",
                                                "type": "invalid_request_error"}}
            self._send(status, reply)
            stats.add(len(raw), self.headers_s + time.perf_counter() - started,
                      time.thread_time() - self.started_cpu)

        def _send(self, status: int, body: dict[str, Any]) -> None:
            payload = json.dumps(body, separators=(",", ":")).encode()
            head = (f"HTTP/1.1 {status} {self.responses[status][0]}\r\n"
                    "content-type: application/json\r\n"
                    f"content-length: {len(payload)}\r\n\r\n").encode()
            self.wfile.write(head + payload)     # one write: no Nagle/delayed-ACK stall

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    return httpd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    httpd = make_server(args.port)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print(f"PORT {httpd.server_address[1]}", flush=True)
    sys.stdin.read()          # serve until the parent closes our stdin (or exits)
    httpd.shutdown()


if __name__ == "__main__":
    main()
