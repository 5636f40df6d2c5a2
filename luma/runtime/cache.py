"""The result cache of ``cache: true`` tools, with single-flight (RUNTIME.md §3 step 8).

Results live for the process. A key is the tool name plus the canonical JSON of the validated
input. Concurrent calls with the same key share one execution: the first call (the leader) runs
it as a task, later calls (the sharers) wait for that task. Errors are never stored; sharers of
a failed execution receive the leader's error. The execution is cancelled only when every call
waiting for it has been cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from luma.runtime.errors import LumaError


# How a call used the cache: telemetry's ``cache`` field.
CACHE_HIT = "hit"
CACHE_MISS = "miss"  # this call ran the tool, or shared a run that another call started
CACHE_OFF = "off"    # the tool is not cached, or the call failed before the cache step


class ResultCache:
    """Tool results by ``(tool, key)`` for the life of the process."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str], Any] = {}
        self._flights: dict[tuple[str, str], _Flight] = {}

    def __len__(self) -> int:
        return len(self._values)

    def clear(self) -> None:
        self._values.clear()

    async def get_or_run(self, tool: str, key: str,
                         run: Callable[[], Awaitable[Any]]) -> tuple[Any, str, bool]:
        """The cached result of ``(tool, key)``, or the result of ``run()`` (stored when it
        succeeds). Returns ``(value, how, shared)``: ``shared`` is true for a call that waited
        for another call's execution (telemetry's ``single_flight``)."""
        slot = (tool, key)
        if slot in self._values:
            return copy_json(self._values[slot]), CACHE_HIT, False
        loop = asyncio.get_running_loop()
        flight = self._flights.get(slot)
        if flight is not None and flight.loop is loop:
            try:
                value = await flight.join()
            except LumaError as err:
                raise copy_error(err) from None
            return copy_json(value), CACHE_MISS, True
        flight = _Flight(loop, loop.create_task(_wrap(run)))
        self._flights[slot] = flight
        flight.task.add_done_callback(lambda task: self._landed(slot, flight, task))
        return await flight.join(), CACHE_MISS, False

    def _landed(self, slot: tuple[str, str], flight: _Flight, task: asyncio.Task[Any]) -> None:
        if self._flights.get(slot) is flight:
            del self._flights[slot]
        if task.cancelled():
            return
        if task.exception() is None:  # also marks a failure as retrieved
            self._values[slot] = copy_json(task.result())


async def _wrap(run: Callable[[], Awaitable[Any]]) -> Any:
    return await run()


class _Flight:
    """One execution and the calls waiting for it."""

    __slots__ = ("loop", "task", "waiters")

    def __init__(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> None:
        self.loop = loop
        self.task = task
        self.waiters = 0

    async def join(self) -> Any:
        self.waiters += 1
        try:
            return await asyncio.shield(self.task)
        finally:
            self.waiters -= 1
            if self.waiters == 0 and not self.task.done():
                self.task.cancel()  # nobody wants the result any more


def copy_json(value: Any) -> Any:
    """A copy of a JSON value's containers, so that a caller cannot change a stored result."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def copy_error(err: LumaError) -> LumaError:
    """A fresh error with the same fields: each call that shares a failure raises its own
    instance (the interpreter records where each one surfaced)."""
    return LumaError(err.code, err.message, retryable=err.retryable, tool=err.tool,
                     details=err.details, extra=err.extra)
