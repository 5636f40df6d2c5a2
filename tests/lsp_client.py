"""A small LSP client: the real ``luma lsp`` process, spoken to over its stdin and stdout with
the protocol's framing (``Content-Length`` headers, JSON-RPC 2.0 bodies)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class LspClient:
    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "luma", "lsp"], cwd=ROOT,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        self.next_id = 0
        self.responses: dict[int, Any] = {}
        self.notifications: queue.Queue[dict[str, Any]] = queue.Queue()
        self.lock = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        out = self.process.stdout
        assert out is not None
        while True:
            headers: dict[str, str] = {}
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                key, _, value = line.decode("ascii").partition(":")
                headers[key.strip().lower()] = value.strip()
            body = json.loads(out.read(int(headers["content-length"])))
            if "id" in body and "method" not in body:
                with self.lock:
                    self.responses[body["id"]] = body
                    self.lock.notify_all()
            elif "method" in body and "id" in body:  # a request from the server
                self._send({"jsonrpc": "2.0", "id": body["id"], "result": None})
            else:
                self.notifications.put(body)

    def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode("utf-8")
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        stdin.flush()

    def request(self, method: str, params: Any, timeout: float = 20) -> Any:
        self.next_id += 1
        rid = self.next_id
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        with self.lock:
            while rid not in self.responses:
                left = deadline - time.monotonic()
                assert left > 0, f"no answer to {method}"
                self.lock.wait(left)
            answer = self.responses.pop(rid)
        assert "error" not in answer, answer["error"]
        return answer["result"]

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def diagnostics(self, uri: str, timeout: float = 20) -> list[dict[str, Any]]:
        """The next diagnostics published for ``uri``."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.notifications.get(timeout=max(0.01, deadline - time.monotonic()))
            if message["method"] == "textDocument/publishDiagnostics" \
                    and message["params"]["uri"] == uri:
                return list(message["params"]["diagnostics"])

    def initialize(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        result = self.request("initialize", {"processId": None, "rootUri": None,
                                             "capabilities": capabilities or {}})
        self.notify("initialized", {})
        return dict(result)

    def shutdown(self) -> int:
        self.request("shutdown", None)
        self.notify("exit", None)
        return self.process.wait(timeout=20)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
