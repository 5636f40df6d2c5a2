"""A separate process using a file idempotency store, driven by tests/test_stores_processes.py.

    worker.py hammer PATH RUNS_FILE SEED KEY...   print "ready", wait for RUNS_FILE.go, then run
                                                  every key (shuffled, 4 tasks at a time); each
                                                  compute appends "<key> <pid>" to RUNS_FILE
    worker.py writer PATH START                   store k-START, k-START+1, ... until killed,
                                                  printing "ack <key>" after each run_once returns
    worker.py hold PATH KEY                       claim KEY, print "computing", then sleep
    worker.py fsize PATH RUNS_FILE LIMIT          with RLIMIT_FSIZE at LIMIT bytes, run key r-1
                                                  whose result is larger than LIMIT; the compute
                                                  appends "ran" to RUNS_FILE; print the error

Encryption is on when LUMA_IDEMPOTENCY_KEY is set in the environment. Warnings go to stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from typing import Any

from luma.runtime.file_store import FileIdempotencyStore
from luma.runtime.stores import input_fingerprint

TOOL = "db_write"


def open_store(path: str) -> FileIdempotencyStore:
    encryption = "aes-256-gcm" if os.environ.get("LUMA_IDEMPOTENCY_KEY") else None
    return FileIdempotencyStore(path, encryption=encryption,
                                warn=lambda message: print(message, file=sys.stderr, flush=True))


async def hammer(path: str, runs_file: str, seed: int, keys: list[str]) -> None:
    store = open_store(path)
    random.Random(seed).shuffle(keys)
    # Start together, so that the processes really compete for the keys.
    print("ready", flush=True)
    while not os.path.exists(runs_file + ".go"):
        await asyncio.sleep(0.005)
    results: dict[str, Any] = {}
    gate = asyncio.Semaphore(4)

    async def one(key: str) -> None:
        async def compute() -> dict[str, Any]:
            fd = os.open(runs_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, f"{key} {os.getpid()}\n".encode())
            finally:
                os.close(fd)
            await asyncio.sleep(0.002)
            return {"key": key, "pid": os.getpid()}

        async with gate:
            outcome = await store.run_once(TOOL, key, input_fingerprint({"request_id": key}),
                                           60_000, compute)
        results[key] = outcome.value

    await asyncio.gather(*(one(key) for key in keys))
    print(json.dumps(results), flush=True)


async def writer(path: str, start: int) -> None:
    store = open_store(path)
    for index in range(start, start + 1_000_000):
        key = f"k-{index}"

        async def compute(index: int = index) -> dict[str, Any]:
            return {"index": index, "payload": "x" * 64}

        await store.run_once(TOOL, key, input_fingerprint({"request_id": key}), 600_000,
                             compute)
        print(f"ack {key}", flush=True)


async def hold(path: str, key: str) -> None:
    store = open_store(path)

    async def compute() -> dict[str, Any]:
        print("computing", flush=True)
        await asyncio.sleep(60)
        return {"held": True}

    await store.run_once(TOOL, key, input_fingerprint({"request_id": key}), 60_000, compute)


async def fsize(path: str, runs_file: str, limit: int) -> None:
    import resource
    import signal

    from luma.runtime.stores import StoreError

    store = open_store(path)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    async def compute() -> dict[str, Any]:
        with open(runs_file, "a", encoding="utf-8") as runs:
            runs.write("ran\n")
        return {"payload": "x" * (2 * limit)}

    try:
        await store.run_once(TOOL, "r-1", input_fingerprint({"request_id": "r-1"}), 60_000,
                             compute)
    except StoreError as exc:
        print(json.dumps({"code": exc.code, "message": exc.message,
                          "retryable": exc.retryable}), flush=True)


def main(argv: list[str]) -> None:
    mode, path, *rest = argv
    if mode == "hammer":
        asyncio.run(hammer(path, rest[0], int(rest[1]), rest[2:]))
    elif mode == "writer":
        asyncio.run(writer(path, int(rest[0])))
    elif mode == "hold":
        asyncio.run(hold(path, rest[0]))
    elif mode == "fsize":
        asyncio.run(fsize(path, rest[0], int(rest[1])))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
