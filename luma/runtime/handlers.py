"""Calling one tool handler (RUNTIME.md §1 "Signature", §3 step 10 "Timeout").

A handler is ``handler(input, signal=None, needs=None)``, sync or ``async``, and receives only
the parameters it accepts, by name or by position. Its signature is inspected once, when the
:class:`HandlerInvoker` is built.

Timeouts: an ``async`` handler runs as a task that is cancelled when the time is up. A sync
handler with a timeout runs in a daemon thread, because Python cannot stop a thread: on expiry
the call ends at once with :class:`HandlerTimeout`, the thread is left to finish, and whatever
it returns or raises later is discarded. A handler that must stop hard watches its ``Signal``,
which fires with reason ``"timeout"`` before the call gives up on it. Without a timeout a sync
handler is called inline, on the event loop's thread.

An ``async`` handler that runs as its own task cannot end the event loop: a ``KeyboardInterrupt``
or ``SystemExit`` it raises is carried out of the task and raised to the caller like any other
exception. The worker threads still running a handler are known by tool name, so that a run can
say at exit what it did not wait for.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

from luma.runtime.signal import Signal, fire

SLOTS = ("input", "signal", "needs")

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class HandlerTimeout(Exception):
    """The handler did not finish within its timeout (its Signal has fired). ``detail``, when
    given, ends the call's message (what stopped it, when that was not the clock)."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        self.detail = detail


#: When the handler call running in this context must end (``time.monotonic()``), while it has
#: a timeout: an ``async`` handler that hands the call on (a ``"sandbox": "process"`` module's
#: proxy) tells the other side.
CALL_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "luma_call_deadline", default=None)


class HandlerInvoker:
    """One handler, with how to call it worked out from its signature."""

    __slots__ = ("handler", "name", "is_async", "wants_signal", "wants_needs", "call")

    def __init__(self, handler: Callable[..., Any], name: str) -> None:
        self.handler = handler
        self.name = name
        self.is_async = _is_async(handler)
        positional, keyword = _argument_plan(handler)
        passed = set(positional) | {slot for _, slot in keyword}
        self.wants_signal = 1 in passed
        self.wants_needs = 2 in passed
        self.call: Callable[[Any, Signal | None, Any], Any] = _caller(handler, positional,
                                                                      keyword)

    async def run(self, value: Any, needs: Any, timeout_s: float | None, *,
                  threaded: bool = False) -> Any:
        """Call the handler (awaiting it if it is async) within ``timeout_s`` seconds.

        ``threaded`` runs a sync handler in a worker thread even without a timeout, so that
        calls the model made in one turn really run side by side.

        Raises whatever the handler raises, or :class:`HandlerTimeout`. If the calling task is
        cancelled, the Signal fires with reason ``"cancelled"`` and the cancellation goes on.
        """
        signal = Signal() if self.wants_signal else None
        if timeout_s is not None:
            if self.is_async:
                return await self._async_with_timeout(value, signal, needs, timeout_s)
            return await self._thread_with_timeout(value, signal, needs, timeout_s)
        if not self.is_async and threaded:
            return await self._thread_with_timeout(value, signal, needs, None)
        if not self.is_async:
            result = self.call(value, signal, needs)
            return await result if inspect.isawaitable(result) else result
        try:
            return await self.call(value, signal, needs)
        except asyncio.CancelledError:
            _abort(signal, "cancelled")
            raise

    async def _async_with_timeout(self, value: Any, signal: Signal | None, needs: Any,
                                  timeout_s: float) -> Any:
        token = CALL_DEADLINE.set(time.monotonic() + timeout_s)
        try:  # the task copies the context, deadline included, when it is made
            task = _handler_task(self.call(value, signal, needs), self.name)
        finally:
            CALL_DEADLINE.reset(token)
        try:
            done, _ = await asyncio.wait((task,), timeout=timeout_s)
        except asyncio.CancelledError:
            _abort(signal, "cancelled")
            task.cancel()
            raise
        if not done:
            _abort(signal, "timeout")
            task.cancel()
            # The handler may swallow the cancellation and go on; it is not waited for.
            task.add_done_callback(_discard)
            raise HandlerTimeout()
        return _unwrap(task)

    async def _thread_with_timeout(self, value: Any, signal: Signal | None, needs: Any,
                                   timeout_s: float | None) -> Any:
        loop = asyncio.get_running_loop()
        landed: asyncio.Future[tuple[bool, Any]] = loop.create_future()
        context = contextvars.copy_context()
        call = self.call

        def work() -> None:
            me = threading.get_ident()
            with _threads_lock:
                _running_threads[me] = self.name
            try:
                outcome: tuple[bool, Any] = (True, context.run(call, value, signal, needs))
            except BaseException as exc:  # handed to the loop; nothing is raised in the thread
                outcome = (False, exc)
            finally:
                with _threads_lock:
                    _running_threads.pop(me, None)
            try:
                loop.call_soon_threadsafe(_settle, landed, outcome)
            except RuntimeError:
                pass  # the loop has closed: the late outcome is discarded

        threading.Thread(target=work, name=HANDLER_TASK_PREFIX + self.name, daemon=True).start()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        try:
            done, _ = await asyncio.wait((landed,), timeout=timeout_s)
        except asyncio.CancelledError:
            _abort(signal, "cancelled")
            landed.cancel()
            raise
        if not done:
            _abort(signal, "timeout")
            landed.cancel()  # a late outcome finds the future done and is dropped
            raise HandlerTimeout()
        ok, result = landed.result()
        if not ok:
            raise result
        if inspect.isawaitable(result):  # a sync callable that returned an awaitable
            left = None if deadline is None else max(deadline - loop.time(), 0.0)
            return await self._async_result(result, signal, left)
        return result

    async def _async_result(self, awaitable: Any, signal: Signal | None,
                            timeout_s: float | None) -> Any:
        task = _handler_task(awaitable, self.name)
        try:
            done, _ = await asyncio.wait((task,), timeout=timeout_s)
        except asyncio.CancelledError:
            _abort(signal, "cancelled")
            task.cancel()
            task.add_done_callback(_discard)
            raise
        if not done:
            _abort(signal, "timeout")
            task.cancel()
            task.add_done_callback(_discard)
            raise HandlerTimeout()
        return _unwrap(task)


# the sync handlers running in worker threads right now: thread id -> tool name
_running_threads: dict[int, str] = {}
_threads_lock = threading.Lock()


def running_handler_threads() -> list[str]:
    """The tools whose sync handlers are still running in a worker thread (at exit: abandoned)."""
    with _threads_lock:
        return list(_running_threads.values())


class HandlerRaised(Exception):
    """Carries a ``KeyboardInterrupt`` or ``SystemExit`` raised by a handler running as its own
    task: asyncio would let those escape the event loop and end the whole run."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(type(exc).__name__)
        self.exc = exc


HANDLER_TASK_PREFIX = "luma-tool-"


def _handler_task(awaitable: Any, name: str) -> asyncio.Task[Any]:
    async def contained() -> Any:
        try:
            return await awaitable
        except (KeyboardInterrupt, SystemExit) as exc:
            raise HandlerRaised(exc) from None

    return asyncio.get_running_loop().create_task(contained(), name=HANDLER_TASK_PREFIX + name)


def _unwrap(task: asyncio.Task[Any]) -> Any:
    try:
        return task.result()
    except HandlerRaised as carried:
        raise carried.exc from None


def _abort(signal: Signal | None, reason: str) -> None:
    if signal is not None:
        fire(signal, reason)


def _settle(future: asyncio.Future[tuple[bool, Any]], outcome: tuple[bool, Any]) -> None:
    if not future.done():
        future.set_result(outcome)


def _discard(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it


def _is_async(handler: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(handler):
        return True
    call = getattr(handler, "__call__", None)  # noqa: B004 - a callable object's method
    return call is not None and inspect.iscoroutinefunction(call)


def _argument_plan(handler: Callable[..., Any]) -> tuple[list[int], list[tuple[str, int]]]:
    """Which of ``(input, signal, needs)`` go where: the slot indexes passed by position, in
    order, and ``(parameter name, slot index)`` pairs passed by keyword.

    A parameter named ``input``, ``signal`` or ``needs`` receives that value. The other
    positional parameters receive, in order, the values that no parameter is named after, so
    ``def f(data, sig)`` gets the input and the signal. ``*args`` takes what is left by
    position, ``**kwargs`` what is left by name; anything else is not passed.
    """
    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return [0], []  # no signature to read (some builtins): the input alone
    named = {SLOTS.index(p.name) for p in params
             if p.name in SLOTS and p.kind is not inspect.Parameter.POSITIONAL_ONLY
             and p.kind is not inspect.Parameter.VAR_POSITIONAL
             and p.kind is not inspect.Parameter.VAR_KEYWORD}
    unnamed = [i for i in range(3) if i not in named]
    positional: list[int] = []
    keyword: list[tuple[str, int]] = []
    stopped = False
    for p in params:
        is_named = p.name in SLOTS and SLOTS.index(p.name) in named
        if p.kind in _POSITIONAL:
            if is_named:
                if stopped:
                    keyword.append((p.name, SLOTS.index(p.name)))
                else:
                    positional.append(SLOTS.index(p.name))
            elif not stopped and unnamed:
                positional.append(unnamed.pop(0))
            else:
                stopped = True  # from here on, positions cannot be filled in order
        elif p.kind is inspect.Parameter.KEYWORD_ONLY and is_named:
            keyword.append((p.name, SLOTS.index(p.name)))
    passed = set(positional) | {slot for _, slot in keyword}
    left = [i for i in range(3) if i not in passed]
    kinds = {p.kind for p in params}
    if left and not stopped and inspect.Parameter.VAR_POSITIONAL in kinds and not keyword:
        positional.extend(left)
        left = []
    if left and inspect.Parameter.VAR_KEYWORD in kinds:
        keyword.extend((SLOTS[i], i) for i in left)
    return positional, keyword


def _caller(handler: Callable[..., Any], positional: list[int],
            keyword: list[tuple[str, int]]) -> Callable[[Any, Signal | None, Any], Any]:
    """A function ``(input, signal, needs) -> handler(...)`` for this argument plan, specialised
    for the common shapes because it runs on every call."""
    if not keyword:
        if positional == [0]:
            return lambda value, signal, needs: handler(value)
        if positional == [0, 1]:
            return lambda value, signal, needs: handler(value, signal)
        if positional == [0, 1, 2]:
            return lambda value, signal, needs: handler(value, signal, needs)
        if not positional:
            return lambda value, signal, needs: handler()

    def call(value: Any, signal: Signal | None, needs: Any) -> Any:
        slots = (value, signal, needs)
        return handler(*[slots[s] for s in positional], **{name: slots[s] for name, s in keyword})

    return call
