"""The built-in ``postgres`` bridge (DATA.md §4), on ``psycopg`` 3 — the one module that imports
it (``pip install 'luma[postgres]'``).

A pool of connections sized to the program's ``tool_concurrency``; each call runs one statement
in a transaction of its own, with ``statement_timeout`` set for that transaction to the call's
timeout, and the running statement is cancelled on the server when the call's Signal fires.
The URL is a secret: it is never part of a message (the driver's reason is, with the URL and
its password taken out).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

from luma.data.statements import DataStartError, StatementCancelled, StatementTimedOut, cancel_on
from luma.data.sql import placeholders
from luma.runtime.secrets import url_secrets

EXTRA_HINT = "pip install 'luma[postgres]'"


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise DataStartError([f"the postgres driver needs psycopg, which is not installed: "
                              f"{EXTRA_HINT}"]) from None
    return psycopg


class PostgresBridge:
    driver = "postgres"

    def __init__(self, name: str, url: str, size: int, redact: Callable[[str], str]) -> None:
        self.name = name
        self._url = url
        self._redact = redact
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._all: list[Any] = []
        self._busy: set[Any] = set()  # running a statement: cancelled first when closing
        self._lock = threading.Lock()
        self._psycopg = _psycopg()

    @classmethod
    def open(cls, name: str, url: str, size: int,
             redact: Callable[[str], str] = lambda text: text) -> PostgresBridge:
        """Connect once now: a database that cannot be reached stops the program before
        anything runs, with the driver's reason and without the URL."""
        try:
            bridge = cls(name, url, size, redact)
        except DataStartError as exc:
            raise DataStartError([f"datasource '{name}': {exc.lines[0]}"]) from None
        try:
            bridge._idle.put(bridge._connect())
        except bridge._psycopg.Error as exc:
            raise DataStartError([f"datasource '{name}' (postgres) cannot connect: "
                                  f"{bridge.reason(exc)}"]) from None
        return bridge

    def reason(self, exc: BaseException) -> str:
        text = " ".join(str(exc).split()) or type(exc).__name__
        for secret in sorted(url_secrets(self._url), key=len, reverse=True):
            text = text.replace(secret, "***")
        return self._redact(text)

    def _connect(self) -> Any:
        from psycopg.rows import dict_row

        conn = self._psycopg.connect(self._url, autocommit=False, row_factory=dict_row,
                                     connect_timeout=10)
        with self._lock:
            self._all.append(conn)
        return conn

    def _discard(self, conn: Any) -> None:
        with self._lock:
            if conn in self._all:
                self._all.remove(conn)
        try:
            conn.close()
        except Exception:  # a broken connection may fail to close; it is gone either way
            pass

    def execute(self, sql: str, params: Mapping[str, Any], signal: Any,
                timeout_ms: int | None) -> tuple[list[dict[str, Any]], int]:
        errors = self._psycopg.errors
        with self._slots:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = self._connect()
            if conn.closed or conn.broken:
                self._discard(conn)
                conn = self._connect()
            keep = True
            done = cancel_on(signal, conn.cancel_safe)
            with self._lock:
                self._busy.add(conn)
            try:
                text, values = placeholders(sql, "pyformat", {k: self._bound(v)
                                                              for k, v in params.items()})
                with conn.transaction(), conn.cursor() as cursor:
                    if timeout_ms is not None:
                        cursor.execute("SELECT set_config('statement_timeout', %s, true)",
                                       [str(timeout_ms)])
                    cursor.execute(text, values)
                    rows = list(cursor.fetchall()) if cursor.description is not None else []
                    affected = cursor.rowcount
                return rows, affected
            except errors.QueryCanceled as exc:
                if signal is not None and signal.aborted:
                    raise StatementCancelled() from None
                if "statement timeout" in str(exc):
                    raise StatementTimedOut() from None
                raise
            except self._psycopg.OperationalError:
                keep = False
                raise
            finally:
                done()
                with self._lock:
                    self._busy.discard(conn)
                if keep and not conn.broken:
                    self._idle.put(conn)
                else:
                    self._discard(conn)

    def _bound(self, value: Any) -> Any:
        """A Luma value as a parameter: an object, or a list holding one, as ``jsonb``; a list
        of plain values as an array."""
        from psycopg.types.json import Jsonb

        if isinstance(value, dict) or (isinstance(value, list)
                                       and any(isinstance(v, (dict, list)) for v in value)):
            return Jsonb(value)
        return value

    def transient(self, exc: BaseException) -> bool:
        # a dropped connection, a serialization failure or a deadlock: the statement did not
        # take effect, and its transaction was rolled back
        errors = self._psycopg.errors
        return isinstance(exc, (self._psycopg.OperationalError, errors.SerializationFailure,
                                errors.DeadlockDetected))

    def close(self) -> None:
        """Cancel the statements still running (a call the run gave up on), then close every
        connection: nothing is left running on the server."""
        with self._lock:
            conns, self._all = self._all, []
            busy, self._busy = list(self._busy), set()
        for conn in busy:
            try:
                conn.cancel_safe(timeout=2)
            except Exception:  # the server is gone: nothing runs there either
                pass
        for conn in conns:
            try:
                conn.close()
            except Exception:
                pass


__all__ = ["PostgresBridge", "url_secrets", "EXTRA_HINT"]
