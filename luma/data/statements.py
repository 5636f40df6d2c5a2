"""What the bridges share, below all of them: the errors they raise and cancelling a statement
when its call's Signal fires."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from time import monotonic
from typing import Any, Generic, TypeVar

C = TypeVar("C")


class DataStartError(Exception):
    """The datasources cannot start; one line per problem (exit 2)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


class StatementTimedOut(Exception):
    """A built-in bridge's statement ran past its timeout on the database side."""


class StatementCancelled(Exception):
    """A built-in bridge's statement was cancelled because the call's Signal fired."""


def cancel_on(signal: Any, cancel: Callable[[], None]) -> Callable[[], None]:
    """Call ``cancel()`` (in a thread of its own, so the firing side never waits on the
    database) when ``signal`` fires while the statement runs; the returned function marks the
    statement done, after which a late signal does nothing."""
    lock = threading.Lock()
    running = [True]

    def quietly() -> None:
        try:
            cancel()
        except Exception:  # the statement ended (or its connection closed) meanwhile
            pass

    def fire() -> None:
        with lock:
            if running[0]:
                threading.Thread(target=quietly, name="luma-data-cancel", daemon=True).start()

    def done() -> None:
        with lock:
            running[0] = False

    if signal is not None:
        signal.add_listener(fire)
    return done


class ConnectionPool(Generic[C]):
    """The connections of one built-in bridge: at most ``size`` in use at once, the idle ones
    reused last-in first-out.

    Closing never closes a connection another thread is running a statement on (a driver may
    crash the process when its connection is freed under a running statement): it stops those
    statements with ``stop``, closes the idle connections, and waits up to ``wait_s`` for the
    busy ones to come back; each one that comes back after the close is closed by the thread
    that ran it."""

    def __init__(self, size: int, connect: Callable[[], C], close: Callable[[C], None],
                 stop: Callable[[C], None]) -> None:
        self._connect = connect
        self._close_one = close
        self._stop = stop
        self._idle: queue.LifoQueue[C] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._busy_conns: dict[int, C] = {}
        self._lock = threading.Condition()
        self._closed = False
        self.opened = 0  # connections opened so far (the first included)
        self.open_now = 0  # of which not closed yet

    def _open(self) -> C:
        conn = self._connect()
        self._opened_one()
        return conn

    def _opened_one(self) -> None:
        with self._lock:
            self.opened += 1
            self.open_now += 1

    @property
    def closed(self) -> bool:
        """Whether the pool is closing: a statement that checks as it runs stops (``stop`` may
        reach a statement before it began, and do nothing)."""
        return self._closed

    def add(self, conn: C) -> None:
        """An open connection (the first, opened at start-up) for the idle set."""
        self._opened_one()
        self._idle.put(conn)

    def _checked_close(self, conn: C) -> None:
        with self._lock:
            self.open_now -= 1
        try:
            self._close_one(conn)
        except Exception:  # a broken connection may fail to close; it is gone either way
            pass

    @contextmanager
    def lease(self, usable: Callable[[C], bool] = lambda conn: True) -> Iterator[list[C]]:
        """A connection for one statement (a fresh one when the idle one is not ``usable``), as
        a one-item list: the holder empties it when the connection broke and must not be
        reused."""
        with self._slots:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = self._open()
            if not usable(conn):
                self._checked_close(conn)
                conn = self._open()
            held = [conn]
            with self._lock:
                self._busy_conns[id(conn)] = conn
            try:
                yield held
            finally:
                with self._lock:
                    self._busy_conns.pop(id(conn), None)
                    closed = self._closed
                    self._lock.notify_all()
                if held and not closed:
                    self._idle.put(held[0])
                else:
                    self._checked_close(conn)

    def close(self, wait_s: float = 2.0) -> None:
        with self._lock:
            self._closed = True
        while True:
            try:
                self._checked_close(self._idle.get_nowait())
            except queue.Empty:
                break
        # ``stop`` is repeated: it reaches only a statement that has begun
        deadline = monotonic() + wait_s
        while True:
            with self._lock:
                busy = list(self._busy_conns.values())
            if not busy or monotonic() >= deadline:
                return
            for conn in busy:
                try:
                    self._stop(conn)
                except Exception:  # the database is gone: nothing runs there either
                    pass
            with self._lock:
                self._lock.wait_for(lambda: not self._busy_conns,
                                    timeout=min(0.2, max(0.0, deadline - monotonic())))
