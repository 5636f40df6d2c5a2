"""``luma batch`` throughput against a loopback OpenAI-compatible server with a fixed latency.

The server answers every chat completion after ``--latency-ms`` (default 50) with a JSON reply;
the program's one agent makes one ``ask`` per row. The script writes the program and the input
in a temporary folder, runs ``luma batch`` as a user would (a subprocess of ``bench/.venv-wheel``, Luma installed
from a wheel of this checkout, see ``bench/venvs.py``; ``--dev``: this interpreter), ``--runs``
times, checks that every row succeeded, and prints the medians of the wall time, the ideal time
(rows / concurrency × latency) and Luma's overhead per row (the difference, per row, times the
concurrency: the time one slot spends on a row outside the server's latency), and the CPU time
of the ``luma batch`` process (start-up included).

    .venv/bin/python bench/batch_throughput.py [--rows 2000] [--concurrency 64] [--latency-ms 50]
        [--runs 5] [--dev]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

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


def serve(latency_s: float) -> Server:
    """An OpenAI-compatible chat completions endpoint on loopback: one asyncio loop in a thread
    of this process (not Luma's), HTTP/1.1 keep-alive, every answer ``latency_s`` after its
    request. A thread per connection would make the server, not Luma, the bottleneck at 64
    connections on a small machine."""
    answer = json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-5.4-mini",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": json.dumps({"label": "billing"})}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}).encode()
    reply = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
             + str(len(answer)).encode() + b"\r\n\r\n" + answer)
    return Server(reply, latency_s)


class Server:
    def __init__(self, reply: bytes, latency_s: float) -> None:
        self.reply = reply
        self.latency_s = latency_s
        self.requests = 0
        self.connections = 0
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.server_address: tuple[str, int] = ("127.0.0.1", 0)

        async def start() -> None:
            server = await asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=1024)
            self.server_address = server.sockets[0].getsockname()[:2]
            ready.set()

        def run() -> None:
            self.loop.run_until_complete(start())
            self.loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        ready.wait()

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                self.requests += 1
                await asyncio.sleep(self.latency_s)
                writer.write(self.reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def shutdown(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


def one_batch(python: str, options: argparse.Namespace) -> tuple[float, float]:
    """Wall time and CPU time of one ``luma batch`` of ``options.rows`` rows."""
    server = serve(options.latency_ms / 1000)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        (tmp / "triage.luma").write_text(PROGRAM.replace("BASE", base))
        (tmp / "in.jsonl").write_text("".join(json.dumps({"text": f"ticket {n}"}) + "\n"
                                              for n in range(options.rows)))
        env = dict(os.environ, OPENAI_API_KEY="sk-bench")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        done = subprocess.run(
            [python, "-m", "luma", "batch", "triage.luma", "--input", "in.jsonl",
             "--output", "out.jsonl", "--concurrency", str(options.concurrency)],
            cwd=tmp, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        rows = [json.loads(line) for line in (tmp / "out.jsonl").read_text().splitlines()]
    server.shutdown()
    if done.returncode != 0 or len(rows) != options.rows or not all(r["ok"] for r in rows):
        sys.exit(f"the batch did not succeed: exit {done.returncode}\n{done.stderr}")
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--runs", type=int, default=5, help="batches to run; the median counts")
    parser.add_argument("--dev", action="store_true",
                        help="run the interpreter running this script, not bench/.venv-wheel")
    options = parser.parse_args()
    if options.dev:
        python = sys.executable
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from venvs import wheel_python

        python = str(wheel_python())
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    walls, cpus = [], []
    for _ in range(options.runs):
        wall, cpu = one_batch(python, options)
        walls.append(wall)
        cpus.append(cpu)
        print(f"  wall {wall:.2f} s, CPU {cpu:.2f} s")
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    ideal = options.rows / options.concurrency * options.latency_ms / 1000
    overhead = (wall - ideal) / options.rows * options.concurrency
    print(f"rows {options.rows}, concurrency {options.concurrency}, "
          f"latency {options.latency_ms:g} ms; medians of {options.runs} runs")
    print(f"wall time (process start to exit) {wall:.2f} s, ideal {ideal:.2f} s")
    print(f"rows/s {options.rows / wall:.0f}; overhead per row and slot "
          f"{overhead * 1000:.1f} ms; wall time over the ideal per row "
          f"{(wall - ideal) / options.rows * 1000:.2f} ms")
    print(f"luma's CPU time {cpu:.2f} s in all, {cpu / options.rows * 1000:.2f} ms per row "
          "(start-up included)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
