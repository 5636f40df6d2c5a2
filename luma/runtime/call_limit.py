"""``tool_module_policy.max_concurrency``: how many calls may be inside one tool module at once.

A module is loaded once per program and shared by every run of it, in any task, event loop or
thread; so is its limit. An ``asyncio.Semaphore`` belongs to one event loop, so the limit is
its own small primitive: a count under a lock, and waiters parked on a future of their own loop,
woken thread-safely.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from typing import Protocol


class ConcurrencyLimit(Protocol):
    """What the tool pipeline holds around a handler call: a :class:`CallLimit` (or an
    ``asyncio.Semaphore``, in a single event loop)."""

    async def acquire(self) -> object: ...

    def release(self) -> None: ...


class CallLimit:
    """At most ``size`` holders at once, across every task, event loop and thread."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a call limit needs a size of at least 1, got {size}")
        self.size = size
        self._held = 0
        self._mutex = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    @property
    def held(self) -> int:
        """How many calls hold the limit now."""
        return self._held

    async def acquire(self) -> None:
        """Wait for a free slot and take it."""
        loop = asyncio.get_running_loop()
        while True:
            with self._mutex:
                if self._held < self.size:
                    self._held += 1
                    return
                woken: asyncio.Future[None] = loop.create_future()
                waiter = (loop, woken)
                self._waiters.append(waiter)
            try:
                await woken
            except asyncio.CancelledError:
                with self._mutex:
                    try:
                        self._waiters.remove(waiter)
                        passed_on = True
                    except ValueError:  # it was woken: its wake-up goes to the next waiter
                        passed_on = False
                if not passed_on:
                    self._wake_next()
                raise

    def release(self) -> None:
        """Give a slot back (once per :meth:`acquire`)."""
        with self._mutex:
            if self._held <= 0:
                raise RuntimeError("CallLimit released more often than acquired")
            self._held -= 1
        self._wake_next()

    def _wake_next(self) -> None:
        while True:
            with self._mutex:
                if not self._waiters or self._held >= self.size:
                    return
                loop, woken = self._waiters.popleft()
            try:
                loop.call_soon_threadsafe(_wake, woken)
                return
            except RuntimeError:  # that waiter's loop has closed: wake the next one
                continue


def _wake(future: asyncio.Future[None]) -> None:
    with contextlib.suppress(asyncio.InvalidStateError):
        if not future.done():
            future.set_result(None)
