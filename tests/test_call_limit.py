"""CallLimit: a module's max_concurrency, shared by every task, event loop and thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

from luma.runtime.call_limit import CallLimit


def test_a_cancelled_waiter_does_not_keep_the_slot_from_the_next_one() -> None:
    limit = CallLimit(1)

    async def main() -> list[str]:
        order: list[str] = []
        await limit.acquire()
        first = asyncio.create_task(limit.acquire())
        second = asyncio.create_task(limit.acquire())
        await asyncio.sleep(0)
        limit.release()          # wakes `first`...
        first.cancel()           # ...which is cancelled before it takes the slot
        with pytest.raises(asyncio.CancelledError):
            await first
        await asyncio.wait_for(second, 1)  # the wake-up went on to `second`
        order.append(f"held {limit.held}")
        limit.release()
        return order

    assert asyncio.run(main()) == ["held 1"]
    assert limit.held == 0


def test_waiters_in_other_threads_are_woken() -> None:
    limit = CallLimit(1)
    took = threading.Event()
    asyncio.run(limit.acquire())

    def other() -> None:
        asyncio.run(limit.acquire())
        took.set()

    thread = threading.Thread(target=other)
    thread.start()
    assert not took.wait(0.1)
    limit.release()
    assert took.wait(2)
    thread.join()
    assert limit.held == 1


def test_releasing_more_than_acquired_is_a_bug() -> None:
    with pytest.raises(RuntimeError, match="released more often than acquired"):
        CallLimit(2).release()
    with pytest.raises(ValueError, match="at least 1"):
        CallLimit(0)
