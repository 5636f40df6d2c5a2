"""The cancellation signal handed to tool handlers (RUNTIME.md §1), Luma's ``AbortSignal``.

The runtime owns a ``Signal`` per handler call and fires it with :meth:`Signal.abort` on timeout
(reason ``"timeout"``) or cancellation. A handler only reads it: ``aborted``, ``reason``,
``wait()``, ``throw_if_aborted()`` and ``add_listener()``. Every method is safe to call from any
thread, because sync handlers run in worker threads while the runtime fires the signal from the
event loop.

The classes are sealed (``luma.runtime.sealed``) and built on the interpreter's own C-level
primitives (``_thread.RLock``, ``_queue.SimpleQueue``), so a handler that walks from its signal's
methods or attributes reaches nothing of Luma and no Python module.
"""

from __future__ import annotations

from _queue import Empty, SimpleQueue
from _thread import RLock
from collections.abc import Callable

from luma.runtime.sealed import sealed


@sealed()
class SignalAborted(Exception):
    """Raised by :meth:`Signal.throw_if_aborted` once the signal has fired."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(f"The tool call was aborted: {reason or 'cancelled'}.")
        self.reason = reason


@sealed({"SignalAborted": SignalAborted, "RLock": RLock, "SimpleQueue": SimpleQueue,
         "Empty": Empty})
class Signal:
    """A one-shot cancellation signal: it fires at most once, and the first reason wins."""

    __slots__ = ("_fired", "_lock", "_reason", "_listeners", "_bell")

    def __init__(self) -> None:
        self._fired = False
        self._lock = RLock()
        self._reason: str | None = None
        self._listeners: list[Callable[[], object]] = []
        self._bell: SimpleQueue[None] = SimpleQueue()  # one token once fired; waiters pass it on

    @property
    def aborted(self) -> bool:
        """Whether the signal has fired."""
        return self._fired

    @property
    def reason(self) -> str | None:
        """Why the signal fired (``"timeout"``, ``"cancelled"``…), or ``None`` while it has not."""
        return self._reason

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the signal fires or ``timeout`` seconds pass; return whether it fired."""
        if self._fired:
            return True
        try:
            self._bell.get(True, timeout if timeout is None or timeout > 0 else 0.0)
        except Empty:
            return self._fired
        self._bell.put(None)
        return True

    def throw_if_aborted(self) -> None:
        """Raise :class:`SignalAborted` if the signal has fired; otherwise do nothing."""
        if self._fired:
            raise SignalAborted(self._reason)

    def add_listener(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` once when the signal fires; at once if it has already fired.

        Calling a late listener immediately (unlike a DOM ``AbortSignal``) closes the race
        between checking ``aborted`` and registering.
        """
        with self._lock:
            if not self._fired:
                self._listeners.append(callback)
                return
        callback()

    def abort(self, reason: str = "cancelled") -> list[BaseException]:
        """Fire the signal (used by the runtime). Later calls do nothing.

        Every listener runs, even after one fails; the exceptions the listeners raised are
        returned, for the runtime to report."""
        with self._lock:
            if self._fired:
                return []
            self._reason = reason
            self._fired = True
            listeners, self._listeners = self._listeners, []
        self._bell.put(None)
        failures: list[BaseException] = []
        for callback in listeners:
            try:
                callback()
            except BaseException as exc:  # a failing listener must not keep the others from running
                failures.append(exc)
        return failures

    def __repr__(self) -> str:
        state = f"aborted, reason={self._reason!r}" if self._fired else "not aborted"
        return f"Signal({state})"


def fire(signal: Signal, reason: str) -> None:
    """Abort ``signal`` for the runtime. A listener that raised (anything, KeyboardInterrupt and
    SystemExit too) is reported in one line: the listener is the handler's code, not Luma's."""
    failures = signal.abort(reason)
    if failures:
        import logging  # only on this rare path: logging costs start-up time on `luma check`

        for exc in failures:
            try:
                text = str(exc)
            except Exception:
                text = ""
            logging.getLogger("luma").error("A Signal listener raised an exception: %s%s",
                                            type(exc).__name__, f": {text}" if text else "")
