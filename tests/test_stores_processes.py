"""The file idempotency store across real processes: one run per key, dead holders, SIGKILL.

Each process is ``tests/stores/worker.py`` started with this interpreter; see its docstring.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import selectors
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from luma.runtime.file_store import FileIdempotencyStore
from luma.runtime.stores import IdempotencyOutcome, input_fingerprint

WORKER = Path(__file__).parent / "stores" / "worker.py"
SECRET = "a-long-and-secure-key"


def start(*args: str, encrypted: bool = False) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.pop("LUMA_IDEMPOTENCY_KEY", None)
    if encrypted:
        env["LUMA_IDEMPOTENCY_KEY"] = SECRET
    return subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)


def open_store(path: Path, encrypted: bool, warnings: list[str]) -> FileIdempotencyStore:
    return FileIdempotencyStore(path, encryption="aes-256-gcm" if encrypted else None,
                                environ={"LUMA_IDEMPOTENCY_KEY": SECRET},
                                warn=warnings.append)


def fingerprint(key: str) -> str:
    return input_fingerprint({"request_id": key})


def replay(store: FileIdempotencyStore, key: str) -> IdempotencyOutcome:
    async def must_not_run() -> Any:
        raise AssertionError(f"the handler of {key} ran again")

    return asyncio.run(store.run_once("db_write", key, fingerprint(key), 60_000, must_not_run))


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_processes_hammering_the_same_keys_run_each_handler_once(tmp_path: Path,
                                                                  encrypted: bool) -> None:
    path, runs_file = tmp_path / "idem.json", tmp_path / "runs.txt"
    keys = [f"r-{n}" for n in range(25)]
    workers = [start("hammer", str(path), str(runs_file), str(seed), *keys, encrypted=encrypted)
               for seed in range(4)]
    for worker in workers:
        assert worker.stdout is not None
        assert worker.stdout.readline() == b"ready\n"
    (tmp_path / "runs.txt.go").touch()
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err.decode()
        assert err == b""
        results.append(json.loads(out))

    runs = [line.split() for line in runs_file.read_text().splitlines()]
    assert Counter(key for key, _ in runs) == Counter(keys)  # each handler ran exactly once
    runner = {key: int(pid) for key, pid in runs}
    assert len(set(runner.values())) > 1  # the work really was spread over processes
    for result in results:
        assert result == {key: {"key": key, "pid": runner[key]} for key in keys}


def test_a_killed_holder_releases_its_key_at_once(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    holder = start("hold", str(path), "r-1")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"computing\n"
        store = FileIdempotencyStore(path)

        async def compute() -> Any:
            return {"taken_over": True}

        async def call(timeout: float) -> IdempotencyOutcome:
            return await asyncio.wait_for(
                store.run_once("db_write", "r-1", fingerprint("r-1"), 60_000, compute), timeout)

        # While the holder lives, this process waits for the key (and can give up waiting).
        with pytest.raises(asyncio.TimeoutError):
            asyncio.run(call(0.3))
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        began = time.monotonic()
        assert asyncio.run(call(5)) == IdempotencyOutcome({"taken_over": True}, replayed=False)
        assert time.monotonic() - began < 3  # not the holder's 60 s
    finally:
        holder.kill()
        holder.wait()


def read_acks_until_killed(writer: subprocess.Popen[bytes], rng: random.Random) -> list[str]:
    """Collect "ack <key>" lines; SIGKILL the writer a random moment after its first ack."""
    assert writer.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(writer.stdout, selectors.EVENT_READ)
    buffer, deadline = b"", None
    give_up = time.monotonic() + 30
    while time.monotonic() < give_up:
        if deadline is not None and time.monotonic() >= deadline:
            break
        if selector.select(timeout=0.005):
            chunk = os.read(writer.stdout.fileno(), 65536)
            assert chunk, writer.stderr.read().decode() if writer.stderr else "writer exited"
            buffer += chunk
            if deadline is None and b"\n" in buffer:
                deadline = time.monotonic() + rng.uniform(0.0, 0.15)
    writer.send_signal(signal.SIGKILL)
    writer.wait(10)
    assert writer.returncode == -signal.SIGKILL
    buffer += writer.stdout.read()  # acks already in the pipe were acknowledged before the kill
    selector.close()
    lines = buffer.split(b"\n")[:-1]  # a line without its newline was never acknowledged
    assert lines, "the writer acknowledged nothing"
    return [line.decode().removeprefix("ack ") for line in lines]


@pytest.mark.parametrize("encrypted, rounds", [(False, 8), (True, 3)],
                         ids=["plain", "encrypted"])
def test_sigkill_during_writes_never_corrupts_the_file_or_loses_an_acknowledged_key(
        tmp_path: Path, encrypted: bool, rounds: int) -> None:
    path = tmp_path / "idem.json"
    rng = random.Random(20240611)
    acknowledged: list[str] = []
    next_index = 0
    for _ in range(rounds):
        writer = start("writer", str(path), str(next_index), encrypted=encrypted)
        acks = read_acks_until_killed(writer, rng)
        assert acks[0] == f"k-{next_index}"
        acknowledged += acks
        next_index = int(acks[-1].removeprefix("k-")) + 1

        warnings: list[str] = []
        store = open_store(path, encrypted, warnings)
        assert warnings == []  # the file loaded: nothing was quarantined
        assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name or ".corrupt-" in p.name]
        for key in acknowledged:
            assert replay(store, key).value["index"] == int(key.removeprefix("k-"))
    if not encrypted:
        stored = json.loads(path.read_text())["records"]["db_write"]
        assert set(acknowledged) <= set(stored)
