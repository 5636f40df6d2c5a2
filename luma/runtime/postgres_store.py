"""The PostgreSQL idempotency store (RUNTIME.md §5), on ``psycopg`` 3 — the one runtime module
that imports it for idempotency.

One row per ``(tool, key)``; claiming is one ``INSERT … ON CONFLICT … DO UPDATE … WHERE``
statement (the conflicting row is locked by the server for the statement only — never a session
advisory lock, which would leak across pooled connections). See :data:`DDL`.
"""

from __future__ import annotations

import asyncio
import base64
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from luma.runtime.secrets import url_secrets
from luma.runtime.leased_store import (
    STATE_IN_PROGRESS,
    Found,
    LeasedIdempotencyStore,
    derive_sealer,
    store_secret,
)
from luma.runtime.stores import (
    IDEMPOTENCY_STORE_FAILED,
    StoreError,
    StoreStartupError,
    Warn,
)

DEFAULT_TABLE = "luma_idempotency"
EXTRA_HINT = "pip install 'luma[postgres]'"
_TABLE_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?\Z")
_FOREVER_MS = 2**63 - 1
_PRUNE_EVERY = 256

#: The table the store creates when it is missing (``{table}`` is the configured name).
DDL = """CREATE TABLE IF NOT EXISTS {table} (
    tool          text   NOT NULL,
    key           text   NOT NULL,
    fingerprint   text   NOT NULL,
    state         text   NOT NULL,  -- 'in_progress', 'completed' (or 'meta': the key check)
    owner         text   NOT NULL,
    expires_at_ms bigint NOT NULL,  -- in_progress: the lease's end; completed: the TTL's
    result        text,             -- the result's JSON (encrypted: a base64 ciphertext)
    PRIMARY KEY (tool, key)
)"""

_T = TypeVar("_T")


class PostgresIdempotencyStore(LeasedIdempotencyStore):
    """Records in one PostgreSQL table shared by every worker that can reach the server."""

    backend_name = "postgres"

    def __init__(self, url: str, *, table: str | None = None, encryption: str | None = None,
                 lease_ms: int | None = None, environ: Mapping[str, str] | None = None,
                 warn: Warn | None = None, clock: Callable[[], float] = time.time) -> None:
        super().__init__(lease_ms=lease_ms, warn=warn, clock=clock)
        self.table = DEFAULT_TABLE if table is None else table
        if not _TABLE_NAME.match(self.table):
            raise StoreStartupError(
                f"idempotency_store.table '{self.table}' is not a table name (letters, digits "
                "and '_', optionally 'schema.table').")
        try:
            import psycopg
            from psycopg import sql
        except ImportError:
            raise StoreStartupError(
                f"The postgres idempotency store needs psycopg, which is not installed: "
                f"{EXTRA_HINT}") from None
        self._psycopg: Any = psycopg
        self._ident = sql.Identifier(*self.table.split("."))
        self._sql = sql
        self._url = url
        self._secrets = url_secrets(url)
        self._lock = threading.Lock()
        self._conn: Any = None
        self._claims_since_prune = 0
        secret = store_secret(encryption, environ)
        try:
            self._call(self._create)
            if secret is not None:
                self._sealer = self._call(lambda: self._key_check(secret))
        except StoreError as exc:
            raise StoreStartupError(exc.message) from None

    # -- the connection ---------------------------------------------------------------------

    @property
    def _where(self) -> str:
        return f"Idempotency store postgres table '{self.table}'"

    def _call(self, work: Callable[[], _T]) -> _T:
        """Run ``work`` on the connection (opened on first use, and again after it broke)."""
        psycopg = self._psycopg
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self._url, autocommit=True, connect_timeout=5)
                return work()
            except psycopg.Error as exc:
                broken, self._conn = self._conn, None
                if broken is not None:
                    try:
                        broken.close()
                    except Exception:  # closing a broken connection may fail too
                        pass
                raise StoreError(IDEMPOTENCY_STORE_FAILED,
                                 f"{self._where} cannot be used: {self._shown(exc)}.") from None

    async def _run(self, work: Callable[[], _T]) -> _T:
        return await asyncio.to_thread(self._call, work)

    def _shown(self, exc: BaseException) -> str:
        text = " ".join(str(exc).split()) or type(exc).__name__
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text.removesuffix(".")

    def _execute(self, query: Any, params: tuple[Any, ...] = ()) -> Any:
        return self._conn.execute(query, params)

    def _q(self, text: str) -> Any:
        return self._sql.SQL(text).format(table=self._ident)

    def _create(self) -> None:
        try:
            self._execute(self._q(DDL))
        except self._psycopg.errors.UniqueViolation:
            pass  # another worker created the table at the same moment

    def _key_check(self, secret: bytes) -> Any:
        salt = secrets.token_bytes(16)
        sealer, check = derive_sealer(secret, salt)
        self._execute(self._q(
            "INSERT INTO {table} (tool, key, fingerprint, state, owner, expires_at_ms, result) "
            "VALUES ('', 'encryption', %s, 'meta', '', %s, %s) ON CONFLICT DO NOTHING"),
            (base64.b64encode(check).decode(), _FOREVER_MS, base64.b64encode(salt).decode()))
        row = self._execute(self._q(
            "SELECT fingerprint, result FROM {table} WHERE tool = '' AND key = 'encryption'"
        )).fetchone()
        stored_check, stored_salt = base64.b64decode(row[0]), base64.b64decode(row[1])
        if stored_salt != salt:
            sealer, check = derive_sealer(secret, stored_salt)
        if not secrets.compare_digest(stored_check, check):
            from luma.runtime.file_store import KEY_ENV_VAR

            raise StoreStartupError(
                f"{self._where} cannot be decrypted: {KEY_ENV_VAR} is not the key it was "
                "written with.")
        return sealer

    # -- the primitives ---------------------------------------------------------------------

    async def _try_claim(self, tool: str, key: str, fingerprint: str, owner: str,
                         now_ms: int, lease_until_ms: int) -> Found | None:
        def claim() -> Found | None:
            while True:
                claimed = self._execute(self._q(
                    "INSERT INTO {table} AS t (tool, key, fingerprint, state, owner, "
                    "expires_at_ms, result) VALUES (%s, %s, %s, %s, %s, %s, NULL) "
                    "ON CONFLICT (tool, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, "
                    "state = EXCLUDED.state, owner = EXCLUDED.owner, "
                    "expires_at_ms = EXCLUDED.expires_at_ms, result = NULL "
                    "WHERE t.expires_at_ms <= %s RETURNING owner"),
                    (tool, key, fingerprint, STATE_IN_PROGRESS, owner, lease_until_ms,
                     now_ms)).fetchone()
                if claimed is not None:
                    return None
                row = self._execute(self._q(
                    "SELECT state, owner, fingerprint, result FROM {table} "
                    "WHERE tool = %s AND key = %s AND expires_at_ms > %s"),
                    (tool, key, now_ms)).fetchone()
                if row is not None:
                    return Found(row[0], row[1], row[2], row[3])
                # the row expired or was released between the two statements: claim again

        found = await self._run(claim)
        if found is None:
            self._claims_since_prune += 1
            if self._claims_since_prune >= _PRUNE_EVERY:
                self._claims_since_prune = 0
                await self._run(lambda: self._execute(self._q(
                    "DELETE FROM {table} WHERE expires_at_ms <= %s AND tool <> ''"),
                    (now_ms,)))
        return found

    async def _renew(self, tool: str, key: str, owner: str, lease_until_ms: int) -> bool:
        return await self._run(lambda: self._execute(self._q(
            "UPDATE {table} SET expires_at_ms = %s WHERE tool = %s AND key = %s "
            "AND owner = %s AND state = %s"),
            (lease_until_ms, tool, key, owner, STATE_IN_PROGRESS)).rowcount == 1)

    async def _complete(self, tool: str, key: str, owner: str, result: str,
                        expires_at_ms: int) -> bool:
        return await self._run(lambda: self._execute(self._q(
            "UPDATE {table} SET state = 'completed', result = %s, expires_at_ms = %s "
            "WHERE tool = %s AND key = %s AND owner = %s AND state = %s"),
            (result, expires_at_ms, tool, key, owner, STATE_IN_PROGRESS)).rowcount == 1)

    async def _release(self, tool: str, key: str, owner: str) -> None:
        await self._run(lambda: self._execute(self._q(
            "DELETE FROM {table} WHERE tool = %s AND key = %s AND owner = %s"),
            (tool, key, owner)))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
