"""``luma batch`` throughput against a loopback OpenAI-compatible server with a fixed latency.

The server answers every chat completion after ``--latency-ms`` (default 50) with a JSON reply;
the program's one agent makes one ``ask`` per row. The script writes the program and the input
in a temporary folder, runs ``luma batch`` as a user would (a subprocess of this interpreter),
checks that every row succeeded, and prints the wall time, the ideal time
(rows / concurrency × latency) and Luma's overhead per row (the difference, per row, times the
concurrency: the time one slot spends on a row outside the server's latency), and the CPU time
of the ``luma batch`` process (start-up included).

    .venv/bin/python bench/batch_throughput.py [--rows 2000] [--concurrency 64] [--latency-ms 50]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PROGRAM = """
schema Label { label: string }

model Fast { provider: "openai", name: "gpt-5.4-mini", base_url: "BASE/v1" }

agent Triage {
  model: Fast

  fn run(text: string) -> Label {
    ask "Label this ticket: {text}" -> Label
  }
}
"""


def serve(latency_s: float) -> ThreadingHTTPServer:
    answer = json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-5.4-mini",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": json.dumps({"label": "billing"})}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            self.rfile.read(int(self.headers.get("content-length") or 0))
            time.sleep(latency_s)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.request_queue_size = 256
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    options = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    server = serve(options.latency_ms / 1000)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        (tmp / "triage.luma").write_text(PROGRAM.replace("BASE", base))
        (tmp / "in.jsonl").write_text("".join(json.dumps({"text": f"ticket {n}"}) + "\n"
                                              for n in range(options.rows)))
        env = dict(os.environ, OPENAI_API_KEY="sk-bench")
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "luma", "batch", "triage.luma", "--input", "in.jsonl",
             "--output", "out.jsonl", "--concurrency", str(options.concurrency)],
            cwd=tmp, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - began
        child = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = child.ru_utime + child.ru_stime
        rows = [json.loads(line) for line in (tmp / "out.jsonl").read_text().splitlines()]
    server.shutdown()
    if done.returncode != 0 or len(rows) != options.rows or not all(r["ok"] for r in rows):
        sys.exit(f"the batch did not succeed: exit {done.returncode}\n{done.stderr}")
    ideal = options.rows / options.concurrency * options.latency_ms / 1000
    overhead = (wall - ideal) / options.rows * options.concurrency
    print(f"rows {options.rows}, concurrency {options.concurrency}, "
          f"latency {options.latency_ms:g} ms")
    print(f"wall time (process start to exit) {wall:.2f} s, ideal {ideal:.2f} s")
    print(f"rows/s {options.rows / wall:.0f}; overhead per row and slot "
          f"{overhead * 1000:.1f} ms")
    print(f"luma's CPU time {cpu:.2f} s in all, {cpu / options.rows * 1000:.2f} ms per row "
          "(start-up included)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
