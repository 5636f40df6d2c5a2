"""The built-in ``sqlite`` bridge (DATA.md §4): the standard library's ``sqlite3``, a pool of
connections to one database file beside the program (or one shared in-memory database).

Each call runs one statement in a transaction of its own (``BEGIN`` … ``COMMIT``, ``ROLLBACK``
on any failure). The call's timeout is enforced inside SQLite by a progress handler, and the
call's Signal interrupts the running statement. Columns declared ``JSON``/``JSONB`` come back as
the JSON they hold, ``NUMERIC``/``DECIMAL`` as exact decimals; other values are SQLite's own
(integers, floats, text, null; a blob is refused by the row conversion).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from time import monotonic
from typing import Any

from luma.data.statements import (
    ConnectionPool,
    DataStartError,
    StatementCancelled,
    StatementTimedOut,
    cancel_on,
)

def _decimal(raw: bytes) -> Any:
    try:
        return Decimal(raw.decode())
    except (InvalidOperation, UnicodeDecodeError):
        return raw.decode(errors="replace")  # text in a NUMERIC column stays text


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")  # not JSON: the text, for validation to judge


_CONVERTERS: dict[str, Callable[[bytes], Any]] = {"JSON": _json, "JSONB": _json,
                                                  "NUMERIC": _decimal, "DECIMAL": _decimal}
# Progress handler granularity: SQLite calls it every this many virtual machine steps.
_STEPS = 1000


def _register_converters() -> None:
    # sqlite3's converters are process-wide; one a program registered itself is left alone.
    for name, convert in _CONVERTERS.items():
        sqlite3.converters.setdefault(name.upper(), convert)


class SqliteBridge:
    driver = "sqlite"

    def __init__(self, name: str, target: str, uri: bool, size: int) -> None:
        self.name = name
        self._target = target
        self._uri = uri
        self._pool: ConnectionPool[sqlite3.Connection] = ConnectionPool(
            size, self._connect, sqlite3.Connection.close, sqlite3.Connection.interrupt)

    @classmethod
    def open(cls, name: str, path: str, init: str | None, base_dir: Path,
             size: int) -> SqliteBridge:
        """Open the database (creating the file when it does not exist; then ``init``, a SQL
        script beside the program, fills it); one connection is opened now, so a file that
        cannot be opened stops the program before anything runs."""
        _register_converters()
        if path == ":memory:":
            # One connection: an in-memory database lives in its connection, and connections
            # sharing one (a shared cache) lock each other's tables instead of waiting.
            bridge = cls(name, ":memory:", False, 1)
            created = True
        else:
            file = Path(path) if Path(path).is_absolute() else base_dir / path
            created = not file.exists()
            bridge = cls(name, str(file), False, size)
        try:
            first = bridge._connect()
        except sqlite3.Error as exc:
            raise DataStartError([f"datasource '{name}' (sqlite) cannot open {path}: {exc}"]) \
                from None
        bridge._pool.add(first)  # closed with the bridge, also when the init script fails
        if created and init is not None:
            script = Path(init) if Path(init).is_absolute() else base_dir / init
            problem = None
            try:
                first.executescript(script.read_text(encoding="utf-8"))
            except OSError as exc:
                problem = (f"datasource '{name}' (sqlite) cannot read its init script {init}: "
                           f"{exc.strerror or exc}")
            except sqlite3.Error as exc:
                problem = f"datasource '{name}' (sqlite): its init script {init} failed: {exc}"
            if problem is not None:
                bridge.close()
                if path != ":memory:":
                    # the half-filled file is Luma's own: the next run creates it afresh
                    file.unlink(missing_ok=True)
                raise DataStartError([problem])
        return bridge

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self._target, uri=self._uri, isolation_level=None,
                               check_same_thread=False, detect_types=sqlite3.PARSE_DECLTYPES,
                               timeout=5.0)

    def execute(self, sql: str, params: Mapping[str, Any], signal: Any,
                timeout_ms: int | None) -> tuple[list[dict[str, Any]], int]:
        with self._pool.lease() as held:
            return self._run(held[0], sql, params, signal, timeout_ms)

    def _run(self, conn: sqlite3.Connection, sql: str, params: Mapping[str, Any], signal: Any,
             timeout_ms: int | None) -> tuple[list[dict[str, Any]], int]:
        deadline = None if timeout_ms is None else monotonic() + timeout_ms / 1000
        late = [False]

        def progress() -> int:
            if deadline is not None and monotonic() > deadline:
                late[0] = True
                return 1
            return 1 if (signal is not None and signal.aborted) or self._pool.closed else 0

        conn.set_progress_handler(progress, _STEPS)
        done = cancel_on(signal, conn.interrupt)
        try:
            conn.execute("BEGIN")
            try:
                cursor = conn.execute(sql, {k: _bound(v) for k, v in params.items()})
                columns = [d[0] for d in cursor.description or ()]
                rows = [dict(zip(columns, r)) for r in cursor.fetchall()] if columns else []
                affected = cursor.rowcount
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                if late[0]:
                    raise StatementTimedOut() from None
                raise StatementCancelled() from None
            raise
        finally:
            done()
            conn.set_progress_handler(None, _STEPS)
        return rows, affected

    def transient(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError) and (
            "locked" in str(exc) or "busy" in str(exc))

    def close(self) -> None:
        """Interrupt the statements still running, then close every connection."""
        self._pool.close()


def _bound(value: Any) -> Any:
    """A Luma value as a SQLite parameter: an object or a list as its JSON text."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return value


__all__ = ["SqliteBridge"]
