"""examples/service/: the FastAPI app, started with uvicorn on 127.0.0.1, answers concurrent
requests through one loaded program; and the Python examples of the docs run."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVICE = ROOT / "examples" / "service"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app:app", "--app-dir", str(SERVICE),
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise AssertionError(f"the service stopped: {process.stdout.read()}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("the service did not start in 30 s")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)


def test_the_service_answers_concurrent_requests(service: str) -> None:
    texts = [f"request {i}: the printer is on fire" for i in range(60)]

    async def main() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=service, timeout=30) as client:
            return await asyncio.gather(*(
                client.post("/triage", json={"text": text, "request_id": f"r{i % 30}"})
                for i, text in enumerate(texts)))

    responses = asyncio.run(main())
    assert [r.status_code for r in responses] == [200] * len(texts)
    bodies = [r.json() for r in responses]
    assert all(b["words"] == 7 and isinstance(b["urgent"], bool) for b in bodies)
    # one ticket per request id, whichever request came first: idempotency across requests
    tickets: dict[str, set[str]] = {}
    for i, body in enumerate(bodies):
        tickets.setdefault(f"r{i % 30}", set()).add(body["ticket"])
    assert all(len(ids) == 1 for ids in tickets.values())
    assert len({next(iter(ids)) for ids in tickets.values()}) == 30


def test_a_request_the_program_refuses_is_a_located_json_error(service: str) -> None:
    response = httpx.post(f"{service}/triage", json={"text": "", "request_id": "x"}, timeout=30)
    assert response.status_code == 422
    assert response.json() == {"detail": {
        "code": "ARGUMENT_INVALID", "retryable": False,
        "message": "Desk.run.input.text: '' has 0 characters, fewer than the minimum of 1"}}


def test_the_readme_shows_the_python_example_that_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = (ROOT / "examples" / "python" / "quickstart.py").read_text(encoding="utf-8")
    assert f"```python\n{example}```" in readme
    assert len(example.strip().splitlines()) == 5


def test_the_python_examples_of_the_docs_run() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    quickstart = subprocess.run([sys.executable, "examples/python/quickstart.py"], cwd=ROOT,
                                capture_output=True, text=True, env=env, timeout=120)
    assert (quickstart.returncode, quickstart.stdout) == (0, "42.0 5\n")
    suite = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                            "examples/python/test_quickstart.py"], cwd=ROOT,
                           capture_output=True, text=True, env=env, timeout=300)
    assert suite.returncode == 0, suite.stdout + suite.stderr
    assert "2 passed" in suite.stdout
