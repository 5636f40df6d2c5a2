"""The file idempotency store across real processes: one run per key, dead holders, SIGKILL.

Each process is ``tests/stores/worker.py`` started with this interpreter; see its docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from luma.runtime.stores import (
    IdempotencyOutcome,
    MemoryIdempotencyStore,
    StoreError,
    input_fingerprint,
)

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


# -- a stopped holder: the wait is bounded by the call's timeout --------------------------------

def test_a_holder_stopped_with_sigstop_makes_others_give_up_after_their_timeout(
        tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    holder = start("hold", str(path), "r-1")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"computing\n"
        holder.send_signal(signal.SIGSTOP)
        store = FileIdempotencyStore(path)

        async def compute() -> Any:
            raise AssertionError("the key is held: this call must not run the handler")

        began = time.monotonic()
        with pytest.raises(StoreError) as caught:
            asyncio.run(store.run_once("db_write", "r-1", fingerprint("r-1"), 60_000, compute,
                                       wait_timeout_ms=300))
        waited = time.monotonic() - began
        assert 0.3 <= waited < 3
        assert (caught.value.code, caught.value.retryable) == ("TOOL_IDEMPOTENCY_IN_PROGRESS",
                                                               True)
        assert caught.value.message == (
            "Idempotency key 'r-1' of tool 'db_write' is held by another call that did not "
            "finish within 300 ms; try again later.")
        # Other keys do not wait at all.
        assert asyncio.run(store.run_once(
            "db_write", "r-2", fingerprint("r-2"), 60_000, returns_row,
            wait_timeout_ms=300)) == IdempotencyOutcome({"row": 1}, replayed=False)
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait()


async def returns_row() -> Any:
    return {"row": 1}


def test_a_holder_in_the_same_process_bounds_the_wait_too(tmp_path: Path) -> None:
    for store in (FileIdempotencyStore(tmp_path / "idem.json"), MemoryIdempotencyStore()):
        release = asyncio.Event()

        async def slow() -> Any:
            await release.wait()
            return {"row": 1}

        async def scenario() -> tuple[IdempotencyOutcome, StoreError, IdempotencyOutcome]:
            first = asyncio.create_task(store.run_once("db_write", "r-1", fingerprint("r-1"),
                                                       60_000, slow))
            await asyncio.sleep(0.05)
            with pytest.raises(StoreError) as caught:
                await store.run_once("db_write", "r-1", fingerprint("r-1"), 60_000, slow,
                                     wait_timeout_ms=100)
            release.set()
            done = await first
            # Once the holder is done, the same call replays its result.
            again = await store.run_once("db_write", "r-1", fingerprint("r-1"), 60_000, slow,
                                         wait_timeout_ms=100)
            return done, caught.value, again

        done, error, again = asyncio.run(scenario())
        assert error.code == "TOOL_IDEMPOTENCY_IN_PROGRESS" and error.retryable
        assert done.replayed is False and again == IdempotencyOutcome({"row": 1}, replayed=True)


def test_the_pipeline_bounds_the_wait_by_the_tools_timeout(tmp_path: Path) -> None:
    from runtime.harness import call_error, program, runtime

    prog = program("""
schema DbResult { id: string }
tool db_write(request_id: string) -> DbResult {
  side_effects: "write"
  idempotent: true
  idempotency_key: request_id
  timeout: 400
}
""")
    path = tmp_path / "ids.json"
    holder = start("hold", str(path), "r-1")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"computing\n"
        holder.send_signal(signal.SIGSTOP)
        config = {"idempotency_store": {"backend": "file", "path": "ids.json"}}
        rt = runtime(prog, {"db_write": lambda input: {"id": "ran"}}, config=config,
                     base_dir=str(tmp_path))
        began = time.monotonic()
        # The worker's tool is "db_write" and its fingerprint is of {"request_id": "r-1"}.
        err = call_error(rt, "db_write", {"request_id": "r-1"})
        assert time.monotonic() - began < 3
        assert (err.code, err.retryable, err.tool) == ("TOOL_IDEMPOTENCY_IN_PROGRESS", True,
                                                       "db_write")
        assert err.message == (
            "Idempotency key 'r-1' of tool 'db_write' is held by another call that did not "
            "finish within 400 ms; try again later.")
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait()


# -- a full disk: the tool ran, its record could not be written ---------------------------------

RAN_NOT_RECORDED = (
    "Tool 'db_write' ran for idempotency key 'r-1', but its result was not recorded: "
    "idempotency store '{path}' could not be written ({reason}). A later call with this key "
    "will run the tool again.")


def test_a_write_past_the_file_size_limit_says_the_tool_ran(tmp_path: Path) -> None:
    # RLIMIT_FSIZE in a child process: the kernel refuses the write with EFBIG.
    path, runs = tmp_path / "idem.json", tmp_path / "runs.txt"
    child = start("fsize", str(path), str(runs), "4096")
    out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err.decode()
    assert runs.read_text() == "ran\n"  # the side effect happened
    assert json.loads(out) == {
        "code": "TOOL_IDEMPOTENCY_STORE_FAILED", "retryable": False,
        "message": RAN_NOT_RECORDED.format(path=path, reason="File too large")}
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    assert not path.exists() or "r-1" not in path.read_text()


if os.geteuid() == 0:  # mounting a small tmpfs needs root; the test above covers everyone
    def test_a_full_disk_says_the_tool_ran_and_its_record_was_not_written(
            tmp_path: Path) -> None:
        disk = tmp_path / "disk"
        disk.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                       check=True)
        try:
            path = disk / "idem.json"
            store = FileIdempotencyStore(path)
            runs: list[str] = []

            async def fill_the_disk() -> Any:
                runs.append("ran")
                # The handler fills the disk.
                with open(disk / "filler", "wb", buffering=0) as filler:
                    with contextlib.suppress(OSError):
                        while True:
                            filler.write(b"\0" * 4096)
                return {"row": "x" * 8192}

            with pytest.raises(StoreError) as caught:
                asyncio.run(store.run_once("db_write", "r-1", fingerprint("r-1"), 60_000,
                                           fill_the_disk))
            assert runs == ["ran"]
            assert (caught.value.code, caught.value.retryable) == (
                "TOOL_IDEMPOTENCY_STORE_FAILED", False)
            assert caught.value.message == RAN_NOT_RECORDED.format(
                path=path, reason="No space left on device")
            assert not [p for p in disk.iterdir() if ".tmp-" in p.name]
            # Space again: the next call runs the tool, as the message said.
            (disk / "filler").unlink()
            assert asyncio.run(store.run_once("db_write", "r-1", fingerprint("r-1"), 60_000,
                                              returns_row)).replayed is False
        finally:
            subprocess.run(["umount", str(disk)], check=True)
