"""The idempotency store a program's config describes (RUNTIME.md §2, §5): the one place that
knows every backend, above the interface (``stores``) and the backends themselves."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from luma.runtime.file_store import FileIdempotencyStore
from luma.runtime.stores import (
    DEFAULT_FILE_PATH,
    IdempotencyStore,
    MemoryIdempotencyStore,
    StoreStartupError,
    Warn,
)

_SHARED_FIELDS = {"url": 'the "postgres" and "redis" backends',
                  "lease_ms": 'the "postgres" and "redis" backends',
                  "table": 'the "postgres" backend', "prefix": 'the "redis" backend'}


def open_idempotency_store(backend: str = "memory", path: str | None = None,
                           encryption: str | None = None, *, base_dir: str | os.PathLike[str],
                           environ: Mapping[str, str] | None = None,
                           warn: Warn | None = None, url_env: str | None = None,
                           table: str | None = None, prefix: str | None = None,
                           lease_ms: int | None = None) -> IdempotencyStore:
    """The store an ``idempotency_store`` config block describes (RUNTIME.md §2, §5).

    ``path`` is relative to ``base_dir`` (the program's folder) and defaults to
    ``.luma-idempotency.json``; a relative path may not lead out of that folder (symbolic links
    followed), an absolute one may point anywhere. Raises :class:`StoreStartupError` when the
    store cannot be used. ``url_env`` names the environment variable that holds a postgres
    server's URL (a secret: only its name is ever shown).
    """
    shared_only = [name for name, value in (("url", url_env), ("table", table),
                                             ("prefix", prefix), ("lease_ms", lease_ms))
                   if value is not None]
    if backend in ("memory", "file") and shared_only:
        raise StoreStartupError(f"idempotency_store.{shared_only[0]} applies only to "
                                f"{_SHARED_FIELDS[shared_only[0]]}.")
    if backend in ("postgres", "redis"):
        wrong = "prefix" if backend == "postgres" and prefix is not None else \
            "table" if backend == "redis" and table is not None else \
            "path" if path is not None else None
        if wrong is not None:
            raise StoreStartupError(
                f'idempotency_store.{wrong} does not apply to the "{backend}" backend.')
        if url_env is None:
            raise StoreStartupError(
                f'idempotency_store.backend "{backend}" needs "url": {{"env": "NAME"}}, the '
                "environment variable that holds the server's URL.")
        url = (os.environ if environ is None else environ).get(url_env, "")
        if not url:
            raise StoreStartupError(
                f"idempotency_store.url: the environment variable {url_env} is not set.")
        if backend == "redis":
            from luma.runtime.redis_store import RedisIdempotencyStore

            return RedisIdempotencyStore(url, prefix=prefix, encryption=encryption,
                                         lease_ms=lease_ms, environ=environ, warn=warn)
        from luma.runtime.postgres_store import PostgresIdempotencyStore

        return PostgresIdempotencyStore(url, table=table, encryption=encryption,
                                        lease_ms=lease_ms, environ=environ, warn=warn)
    if backend == "memory":
        if path is not None or encryption is not None:
            field = "path" if path is not None else "encryption"
            raise StoreStartupError(
                f'idempotency_store.{field} applies only to the "file" backend.')
        return MemoryIdempotencyStore(warn=warn)
    if backend == "file":
        written = path if path is not None else DEFAULT_FILE_PATH
        full = Path(base_dir) / written
        if not os.path.isabs(written):
            project = Path(base_dir).resolve()
            resolved = full.resolve()
            if not resolved.is_relative_to(project):
                raise StoreStartupError(
                    f"idempotency_store.path '{written}' resolves to {resolved}, outside the "
                    "program's folder; give an absolute path to keep the store elsewhere.")
        return FileIdempotencyStore(full, encryption=encryption, environ=environ, warn=warn)
    raise StoreStartupError(
        f'idempotency_store.backend must be "memory", "file", "postgres" or "redis", '
        f'not "{backend}".')
