"""``luma batch`` against a loopback OpenAI-compatible server: the tokens in the progress lines
and the summary, and a rate limit (HTTP 429) longer than the retries, held instead of failing
rows (docs/batch.md)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cli_runner import luma
from run_programs import assert_no_traceback

KEY = "sk-batch-test-5b1d9e"
PROGRAM = """\
schema Label {{ label: string }}
model Fast {{ provider: "openai", name: "gpt-5.4-mini", base_url: "{base}/v1", max_retries: 1 }}
agent Triage {{
  model: Fast
  fn run(text: string) -> Label {{ ask "Label this ticket: {{text}}" -> Label }}
}}
"""


class Loopback:
    """Answers every chat completion after ``latency_s`` (20 prompt and 5 completion tokens),
    or with a 429 and ``Retry-After: 1`` while ``time.monotonic() < limited_until``."""

    def __init__(self, latency_s: float = 0.0, limited_for_s: float = 0.0) -> None:
        self.latency_s = latency_s
        self.limited_until = time.monotonic() + limited_for_s
        self.answers: list[tuple[float, int]] = []  # (when, status)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("content-length") or 0))
                time.sleep(outer.latency_s)
                now = time.monotonic()
                if now < outer.limited_until:
                    status, body, extra = 429, {"error": {"message": "slow down"}}, {
                        "retry-after": "1"}
                else:
                    status, extra = 200, {}
                    body = {"id": "c1", "object": "chat.completion", "created": 0,
                            "model": "gpt-5.4-mini", "choices": [{
                                "index": 0, "finish_reason": "stop", "message": {
                                    "role": "assistant",
                                    "content": json.dumps({"label": "billing"})}}],
                            "usage": {"prompt_tokens": 20, "completion_tokens": 5,
                                      "total_tokens": 25}}
                outer.answers.append((now, status))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"


@contextmanager
def loopback(**options: float) -> Iterator[Loopback]:
    found = Loopback(**options)
    thread = threading.Thread(target=found.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        found.server.shutdown()
        found.server.server_close()


def batch(tmp: Path, server: Loopback, rows: int, *more: str) -> tuple[int, str]:
    (tmp / "triage.luma").write_text(PROGRAM.format(base=server.base))
    (tmp / "in.jsonl").write_text("".join(json.dumps({"text": f"ticket {n}"}) + "\n"
                                          for n in range(rows)))
    done = luma("batch", "triage.luma", "--input", "in.jsonl", "--output", "out.jsonl", *more,
                cwd=tmp, env={"OPENAI_API_KEY": KEY})
    assert done.stdout == ""
    assert_no_traceback(done.stderr)
    assert KEY not in done.stderr
    return done.code, done.stderr


def results(tmp: Path) -> dict[int, Any]:
    return {row["index"]: row for row in
            map(json.loads, (tmp / "out.jsonl").read_text().splitlines())}


def test_tokens_in_the_progress_lines_and_the_summary(tmp_path: Path) -> None:
    with loopback(latency_s=0.1) as server:
        code, err = batch(tmp_path, server, 6, "--concurrency", "1", "--progress-every", "0.15")
    assert code == 0, err
    lines = err.splitlines()
    assert lines[-1] == "luma batch: 6 succeeded, 0 failed; 150 tokens (120 in, 30 out)"
    progress = lines[:-1]
    assert progress, err
    for line in progress:
        found = re.fullmatch(r"luma batch: ([1-6])/6 rows, 0 failed, [0-9.]+ rows/s, "
                             r"([0-9]+) tokens \(([0-9]+) in, ([0-9]+) out\)"
                             r"(, about [0-9]+ s left)?", line)
        assert found, line
        done = int(found.group(1))  # the tokens of the rows done so far
        assert [int(found.group(n)) for n in (2, 3, 4)] == [25 * done, 20 * done, 5 * done]
    assert all(row["ok"] for row in results(tmp_path).values())


def test_a_rate_limit_longer_than_the_retries_holds_the_rows_instead_of_failing_them(
        tmp_path: Path) -> None:
    # max_retries: 1 covers about a second of 429s; the server answers 429 for 3.5 s
    with loopback(limited_for_s=3.5) as server:
        began = time.monotonic()
        code, err = batch(tmp_path, server, 4, "--concurrency", "4")
        limited = [when for when, status in server.answers if status == 429]
    assert (code, err) == (0, "luma batch: 4 succeeded, 0 failed; 100 tokens (80 in, 20 out)\n")
    assert len(results(tmp_path)) == 4
    assert limited and max(limited) - began > 2.5  # the 429s went on past the retries
    # the shared pause: the rows wait out each Retry-After together, about one ask a second
    # for each row at most, not a retry storm
    assert len(limited) <= 4 * 5


def test_a_rate_limit_longer_than_max_wait_fails_the_rows(tmp_path: Path) -> None:
    with loopback(limited_for_s=30) as server:
        code, err = batch(tmp_path, server, 2, "--concurrency", "2", "--max-wait", "1.5")
    assert code == 1
    assert err == "luma batch: 0 succeeded, 2 failed (MODEL_RATE_LIMITED: 2)\n"
    for row in results(tmp_path).values():
        assert row["error"] == {
            "code": "MODEL_RATE_LIMITED",
            "message": "Model 'Fast' is still rate limited by OpenAI (HTTP 429): the limit did "
                       "not lift within 1.5 s, the longest a request waits for it."}
