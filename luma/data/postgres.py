"""The built-in ``postgres`` bridge (DATA.md §4), on ``psycopg`` 3 — the one module that imports
it (``pip install 'luma[postgres]'``).

A pool of connections sized to the program's ``tool_concurrency``; each call runs one statement
in a transaction of its own, with ``statement_timeout`` set for that transaction to the call's
timeout, and the running statement is cancelled on the server when the call's Signal fires.
The URL is a secret: it is never part of a message (the driver's reason is, with the URL and
its password taken out).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from luma.data.statements import (
    ConnectionPool,
    DataStartError,
    StatementCancelled,
    StatementTimedOut,
    cancel_on,
)
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
        self._psycopg = _psycopg()
        self._pool: ConnectionPool[Any] = ConnectionPool(
            size, self._connect, lambda conn: conn.close(),
            lambda conn: conn.cancel_safe(timeout=2))

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
            bridge._pool.add(bridge._connect())
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

        return self._psycopg.connect(self._url, autocommit=False, row_factory=dict_row,
                                     connect_timeout=10)

    def execute(self, sql: str, params: Mapping[str, Any], signal: Any,
                timeout_ms: int | None) -> tuple[list[dict[str, Any]], int]:
        errors = self._psycopg.errors
        with self._pool.lease(lambda conn: not (conn.closed or conn.broken)) as held:
            conn = held[0]
            done = cancel_on(signal, conn.cancel_safe)
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
                if (signal is not None and signal.aborted) or self._pool.closed:
                    raise StatementCancelled() from None
                if "statement timeout" in str(exc):
                    raise StatementTimedOut() from None
                raise
            except self._psycopg.OperationalError:
                held.clear()  # the connection is not reused
                raise
            finally:
                done()
                if conn.broken:
                    held.clear()

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
        self._pool.close()


__all__ = ["PostgresBridge", "url_secrets", "EXTRA_HINT"]
