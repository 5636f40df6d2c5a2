"""The idempotency store semantics, on the memory backend (RUNTIME.md §3, §5)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from luma.runtime.file_store import FileIdempotencyStore
from luma.runtime.store_config import open_idempotency_store
from luma.runtime.stores import (
    IdempotencyOutcome,
    MemoryIdempotencyStore,
    StoreError,
    StoreStartupError,
    input_fingerprint,
)

TTL = 300_000


class Counter:
    """A compute function that counts its runs and returns which run it was."""

    def __init__(self, delay: float = 0.0, fail_first: int = 0) -> None:
        self.runs = 0
        self.delay = delay
        self.fail_first = fail_first
        self._lock = threading.Lock()

    async def __call__(self) -> dict[str, Any]:
        with self._lock:
            self.runs += 1
            run = self.runs
        await asyncio.sleep(self.delay)
        if run <= self.fail_first:
            raise RuntimeError(f"run {run} failed")
        return {"run": run, "rows": [1, 2]}


def fp(value: str) -> str:
    return input_fingerprint({"request_id": "r-1", "value": value})


def test_fingerprint_is_canonical_json() -> None:
    assert input_fingerprint({"a": 1, "b": [1, "x"]}) == input_fingerprint({"b": [1, "x"], "a": 1})
    assert input_fingerprint({"a": 1}) != input_fingerprint({"a": 2})
    assert input_fingerprint({"a": 1}).startswith("sha256:")


def test_same_key_same_input_runs_once_and_replays() -> None:
    async def scenario() -> tuple[IdempotencyOutcome, IdempotencyOutcome]:
        store = MemoryIdempotencyStore()
        compute = Counter()
        first = await store.run_once("db_write", "r-1", fp("a"), TTL, compute)
        second = await store.run_once("db_write", "r-1", fp("a"), TTL, compute)
        assert compute.runs == 1
        return first, second

    first, second = asyncio.run(scenario())
    assert first == IdempotencyOutcome({"run": 1, "rows": [1, 2]}, replayed=False)
    assert second == IdempotencyOutcome({"run": 1, "rows": [1, 2]}, replayed=True)


def test_replays_are_copies_that_callers_cannot_corrupt() -> None:
    async def scenario() -> Any:
        store = MemoryIdempotencyStore()
        first = await store.run_once("db_write", "r-1", fp("a"), TTL, Counter())
        first.value["rows"].append(99)
        second = await store.run_once("db_write", "r-1", fp("a"), TTL, Counter())
        second.value["run"] = 42
        third = await store.run_once("db_write", "r-1", fp("a"), TTL, Counter())
        return third.value

    assert asyncio.run(scenario()) == {"run": 1, "rows": [1, 2]}


def test_same_key_different_input_is_a_conflict() -> None:
    async def scenario() -> StoreError:
        store = MemoryIdempotencyStore()
        await store.run_once("db_write", "r-1", fp("a"), TTL, Counter())
        with pytest.raises(StoreError) as caught:
            await store.run_once("db_write", "r-1", fp("b"), TTL, Counter())
        return caught.value

    error = asyncio.run(scenario())
    assert error.code == "TOOL_IDEMPOTENCY_CONFLICT"
    assert error.message == ("Idempotency key 'r-1' of tool 'db_write' was already used with a "
                             "different input.")
    assert str(error) == error.message
    assert error.retryable is False


def test_keys_are_per_tool() -> None:
    async def scenario() -> None:
        store = MemoryIdempotencyStore()
        compute = Counter()
        await store.run_once("db_write", "r-1", fp("a"), TTL, compute)
        other = await store.run_once("audit_write", "r-1", fp("b"), TTL, compute)
        assert other.replayed is False
        assert compute.runs == 2

    asyncio.run(scenario())


def test_records_expire_after_the_ttl() -> None:
    now = [1000.0]

    async def scenario() -> None:
        store = MemoryIdempotencyStore(clock=lambda: now[0])
        compute = Counter()
        await store.run_once("db_write", "r-1", fp("a"), 5_000, compute)
        now[0] += 4.999
        assert (await store.run_once("db_write", "r-1", fp("a"), 5_000, compute)).replayed
        now[0] += 0.001
        again = await store.run_once("db_write", "r-1", fp("b"), 5_000, compute)
        assert again == IdempotencyOutcome({"run": 2, "rows": [1, 2]}, replayed=False)

    asyncio.run(scenario())


def test_a_failed_compute_stores_nothing() -> None:
    async def scenario() -> None:
        store = MemoryIdempotencyStore()
        compute = Counter(fail_first=1)
        with pytest.raises(RuntimeError, match="run 1 failed"):
            await store.run_once("db_write", "r-1", fp("a"), TTL, compute)
        # Nothing was stored, so even another input under the key is no conflict.
        second = await store.run_once("db_write", "r-1", fp("b"), TTL, compute)
        assert second == IdempotencyOutcome({"run": 2, "rows": [1, 2]}, replayed=False)

    asyncio.run(scenario())


def test_a_result_that_is_not_json_is_refused_and_not_stored() -> None:
    async def scenario() -> StoreError:
        store = MemoryIdempotencyStore()

        async def compute() -> Any:
            return {"when": object()}

        with pytest.raises(StoreError) as caught:
            await store.run_once("db_write", "r-1", fp("a"), TTL, compute)
        assert not (await store.run_once("db_write", "r-1", fp("b"), TTL, Counter())).replayed
        return caught.value

    error = asyncio.run(scenario())
    assert error.code == "TOOL_IDEMPOTENCY_STORE_FAILED"
    assert error.retryable is False
    assert error.message == (
        "Tool 'db_write' ran for idempotency key 'r-1', but its result was not recorded: it is "
        "not JSON (Object of type object is not JSON serializable). A later call with this key "
        "will run the tool again.")


def test_concurrent_tasks_with_one_key_run_the_handler_once() -> None:
    async def scenario() -> None:
        store = MemoryIdempotencyStore()
        compute = Counter(delay=0.02)
        outcomes = await asyncio.gather(*(
            store.run_once("db_write", "r-1", fp("a"), TTL, compute) for _ in range(20)))
        assert compute.runs == 1
        assert [o.replayed for o in outcomes].count(False) == 1
        assert all(o.value == {"run": 1, "rows": [1, 2]} for o in outcomes)

    asyncio.run(scenario())


def test_different_keys_do_not_wait_for_each_other() -> None:
    async def scenario() -> None:
        store = MemoryIdempotencyStore()
        started: list[str] = []
        release = asyncio.Event()

        async def blocked() -> str:
            started.append("r-1")
            await release.wait()
            return "one"

        async def free() -> str:
            started.append("r-2")
            return "two"

        slow = asyncio.create_task(store.run_once("db_write", "r-1", fp("a"), TTL, blocked))
        await asyncio.sleep(0.01)
        quick = await asyncio.wait_for(store.run_once("db_write", "r-2", fp("a"), TTL, free), 1)
        assert quick.value == "two" and started == ["r-1", "r-2"]
        release.set()
        assert (await slow).value == "one"

    asyncio.run(scenario())


def test_a_failing_leader_lets_a_waiter_compute() -> None:
    async def scenario() -> None:
        store = MemoryIdempotencyStore()
        compute = Counter(delay=0.02, fail_first=1)
        outcomes = await asyncio.gather(
            *(store.run_once("db_write", "r-1", fp("a"), TTL, compute) for _ in range(5)),
            return_exceptions=True)
        assert compute.runs == 2
        assert isinstance(outcomes[0], RuntimeError)
        assert outcomes[1] == IdempotencyOutcome({"run": 2, "rows": [1, 2]}, replayed=False)
        assert all(o == IdempotencyOutcome({"run": 2, "rows": [1, 2]}, replayed=True)
                   for o in outcomes[2:])

    asyncio.run(scenario())


def test_a_cancelled_leader_lets_a_waiter_compute() -> None:
    async def scenario() -> None:
        store = MemoryIdempotencyStore()
        compute = Counter(delay=0.05)
        leader = asyncio.create_task(store.run_once("db_write", "r-1", fp("a"), TTL, compute))
        await asyncio.sleep(0.01)
        waiter = asyncio.create_task(store.run_once("db_write", "r-1", fp("a"), TTL, compute))
        await asyncio.sleep(0.01)
        leader.cancel()
        outcome = await asyncio.wait_for(waiter, 1)
        assert outcome == IdempotencyOutcome({"run": 2, "rows": [1, 2]}, replayed=False)
        assert leader.cancelled()

    asyncio.run(scenario())


def test_a_waiter_with_another_input_gets_the_conflict_after_the_leader() -> None:
    async def scenario() -> None:
        store = MemoryIdempotencyStore()
        leader = asyncio.create_task(
            store.run_once("db_write", "r-1", fp("a"), TTL, Counter(delay=0.03)))
        await asyncio.sleep(0.005)
        with pytest.raises(StoreError, match="was already used with a different input"):
            await store.run_once("db_write", "r-1", fp("b"), TTL, Counter())
        assert leader.done() and not (await leader).replayed

    asyncio.run(scenario())


def test_threads_with_their_own_event_loops_run_the_handler_once() -> None:
    store = MemoryIdempotencyStore()
    compute = Counter(delay=0.02)
    outcomes: list[IdempotencyOutcome] = []
    start = threading.Barrier(8)

    def thread_main() -> None:
        async def call() -> IdempotencyOutcome:
            return await store.run_once("db_write", "r-1", fp("a"), TTL, compute)

        start.wait()
        outcomes.append(asyncio.run(call()))

    threads = [threading.Thread(target=thread_main) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert compute.runs == 1
    assert len(outcomes) == 8
    assert sorted(o.replayed for o in outcomes) == [False] + [True] * 7
    assert all(o.value == {"run": 1, "rows": [1, 2]} for o in outcomes)


def test_an_invalid_stored_result_is_treated_as_absent_with_a_warning() -> None:
    warnings: list[str] = []

    def revalidate(value: Any) -> None:
        if value["run"] == 1:
            raise ValueError("db_write.output.run: 1 is less than the minimum of 2")

    async def scenario() -> None:
        store = MemoryIdempotencyStore(warn=warnings.append)
        compute = Counter()
        await store.run_once("db_write", "r-1", fp("a"), TTL, compute)
        again = await store.run_once("db_write", "r-1", fp("a"), TTL, compute,
                                     revalidate=revalidate)
        assert again == IdempotencyOutcome({"run": 2, "rows": [1, 2]}, replayed=False)
        third = await store.run_once("db_write", "r-1", fp("a"), TTL, compute,
                                     revalidate=revalidate)
        assert third.replayed and compute.runs == 2

    asyncio.run(scenario())
    assert warnings == [
        "The stored result for idempotency key 'r-1' of tool 'db_write' is no longer valid "
        "(db_write.output.run: 1 is less than the minimum of 2); the tool runs again."]


def test_a_non_positive_ttl_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="ttl_ms must be greater than zero"):
        asyncio.run(MemoryIdempotencyStore().run_once("t", "k", fp("a"), 0, Counter()))


def test_open_idempotency_store_from_config(tmp_path: Any) -> None:
    assert isinstance(open_idempotency_store(base_dir=tmp_path), MemoryIdempotencyStore)
    store = open_idempotency_store("file", base_dir=tmp_path)
    assert isinstance(store, FileIdempotencyStore) and store.persistent
    assert store.path == tmp_path / ".luma-idempotency.json"
    with pytest.raises(StoreStartupError) as caught:
        open_idempotency_store("mongodb", base_dir=tmp_path)
    assert caught.value.message == (
        'idempotency_store.backend must be "memory", "file", "postgres" or "redis", '
        'not "mongodb".')
    with pytest.raises(StoreStartupError) as caught:
        open_idempotency_store("memory", encryption="aes-256-gcm", base_dir=tmp_path)
    assert caught.value.message == (
        'idempotency_store.encryption applies only to the "file" backend.')
