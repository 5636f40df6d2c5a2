"""The cancellation signal handed to tool handlers (RUNTIME.md §1), Luma's ``AbortSignal``.

The runtime owns a ``Signal`` per handler call and fires it with :meth:`Signal.abort` on timeout
(reason ``"timeout"``) or cancellation. A handler only reads it: ``aborted``, ``reason``,
``wait()``, ``throw_if_aborted()`` and ``add_listener()``. Every method is safe to call from any
thread, because sync handlers run in worker threads while the runtime fires the signal from the
event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class SignalAborted(Exception):
    """Raised by :meth:`Signal.throw_if_aborted` once the signal has fired."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(f"The tool call was aborted: {reason or 'cancelled'}.")
        self.reason = reason


class Signal:
    """A one-shot cancellation signal: it fires at most once, and the first reason wins."""

    __slots__ = ("_event", "_lock", "_reason", "_listeners")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._listeners: list[Callable[[], object]] = []

    @property
    def aborted(self) -> bool:
        """Whether the signal has fired."""
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        """Why the signal fired (``"timeout"``, ``"cancelled"``…), or ``None`` while it has not."""
        return self._reason

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the signal fires or ``timeout`` seconds pass; return whether it fired."""
        return self._event.wait(timeout)

    def throw_if_aborted(self) -> None:
        """Raise :class:`SignalAborted` if the signal has fired; otherwise do nothing."""
        if self._event.is_set():
            raise SignalAborted(self._reason)

    def add_listener(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` once when the signal fires; at once if it has already fired.

        Calling a late listener immediately (unlike a DOM ``AbortSignal``) closes the race
        between checking ``aborted`` and registering.
        """
        with self._lock:
            if not self._event.is_set():
                self._listeners.append(callback)
                return
        _call(callback)

    def abort(self, reason: str = "cancelled") -> None:
        """Fire the signal (used by the runtime). Later calls do nothing."""
        with self._lock:
            if self._event.is_set():
                return
            self._reason = reason
            self._event.set()
            listeners, self._listeners = self._listeners, []
        for callback in listeners:
            _call(callback)

    def __repr__(self) -> str:
        state = f"aborted, reason={self._reason!r}" if self.aborted else "not aborted"
        return f"Signal({state})"


def _call(callback: Callable[[], object]) -> None:
    # A failing listener must not keep the others from running or the runtime from aborting:
    # whatever it raises (KeyboardInterrupt and SystemExit too) is reported in one line.
    try:
        callback()
    except BaseException as exc:
        import logging  # only on this rare path: logging costs start-up time on `luma check`

        try:
            text = str(exc)
        except Exception:
            text = ""
        logging.getLogger("luma").error("A Signal listener raised an exception: %s%s",
                                        type(exc).__name__, f": {text}" if text else "")
