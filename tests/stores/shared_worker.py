"""A worker process for the shared idempotency store tests (tests/test_stores_shared.py).

    shared_worker.py hammer BACKEND TABLE_OR_PREFIX RUNS_FILE GO_FILE KEY...
        Opens the store (server URL in LUMA_TEST_STORE_URL, lease in LUMA_TEST_LEASE_MS),
        prints "ready", waits for GO_FILE, then calls every key at once. Each handler appends
        "<key> <pid>" to RUNS_FILE. Prints {key: result} as JSON.
    shared_worker.py hold BACKEND TABLE_OR_PREFIX RUNS_FILE KEY...
        Claims every key with a handler that records its run, prints "computing <key>" and then
        never returns (the test SIGKILLs it).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from luma.runtime.store_config import open_idempotency_store
from luma.runtime.stores import IdempotencyStore, input_fingerprint


def open_store(backend: str, where: str) -> IdempotencyStore:
    lease = os.environ.get("LUMA_TEST_LEASE_MS")
    extra: dict[str, Any] = {"table": where} if backend == "postgres" else {"prefix": where}
    return open_idempotency_store(
        backend, encryption=os.environ.get("LUMA_TEST_ENCRYPTION") or None, base_dir=".",
        url_env="LUMA_TEST_STORE_URL", lease_ms=int(lease) if lease else None, **extra)


def record_run(runs_file: str, key: str) -> None:
    fd = os.open(runs_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


async def hammer(store: IdempotencyStore, runs_file: str, keys: list[str]) -> dict[str, Any]:
    async def call(key: str) -> Any:
        async def compute() -> Any:
            record_run(runs_file, key)
            await asyncio.sleep(random.uniform(0.0, 0.02))
            return {"key": key, "pid": os.getpid()}

        outcome = await store.run_once("db_write", key, input_fingerprint({"request_id": key}),
                                       600_000, compute)
        return outcome.value

    values = await asyncio.gather(*(call(key) for key in keys))
    return dict(zip(keys, values, strict=True))


async def hold(store: IdempotencyStore, runs_file: str, keys: list[str]) -> None:
    async def call(key: str) -> Any:
        async def compute() -> Any:
            record_run(runs_file, key)
            print(f"computing {key}", flush=True)
            await asyncio.sleep(3600)

        await store.run_once("db_write", key, input_fingerprint({"request_id": key}),
                             600_000, compute)

    await asyncio.gather(*(call(key) for key in keys))


def main() -> None:
    mode, backend, where, runs_file, *rest = sys.argv[1:]
    store = open_store(backend, where)
    if mode == "hammer":
        go, keys = Path(rest[0]), rest[1:]
        random.shuffle(keys)
        print("ready", flush=True)
        while not go.exists():
            time.sleep(0.005)
        results = asyncio.run(hammer(store, runs_file, keys))
        print(json.dumps(results, sort_keys=True))
    else:
        asyncio.run(hold(store, runs_file, rest))


if __name__ == "__main__":
    main()
