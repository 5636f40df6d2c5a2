"""Shared idempotency stores with leases (RUNTIME.md §5): the protocol the PostgreSQL and Redis
backends share, above their few atomic primitives.

A record is ``in_progress`` (with an owner and a lease the owner renews while its handler runs)
or ``completed`` (with the result). Claiming is one atomic step of the backend; a lease that was
not renewed in time (its owner died) is taken over by the next claim; completing and releasing
are compare-and-set on the owner, so a worker that lost its lease can never overwrite the
record of the worker that took it over.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import socket
import time
import uuid
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from luma.runtime.stores import (
    IDEMPOTENCY_CONFLICT,
    IDEMPOTENCY_STORE_FAILED,
    IdempotencyOutcome,
    IdempotencyRecord,
    IdempotencyStore,
    Revalidate,
    StoreError,
    StoreStartupError,
    Warn,
    _as_clause,
    in_progress_error,
    not_recorded_error,
    _result_json,
    _revalidation_problem,
)

DEFAULT_LEASE_MS = 10_000
STATE_IN_PROGRESS = "in_progress"
STATE_COMPLETED = "completed"
_POLL_FIRST_S = 0.005
_POLL_MAX_S = 0.1


@dataclass(frozen=True, slots=True)
class Found:
    """The live record a claim ran into (the backend's own fields, encrypted or not)."""

    state: str
    owner: str
    fingerprint: str
    result: str | None


class Sealer:
    """What encryption does to a record's fields: the key and fingerprint become HMACs (they are
    looked up, never read back), the result an AES-256-GCM ciphertext bound to its record."""

    def __init__(self, aes_key: bytes) -> None:
        self._aes_key = aes_key
        self._mac_key = hmac.new(aes_key, b"luma idempotency store index key",
                                 hashlib.sha256).digest()

    def index(self, text: str) -> str:
        return "hmac:" + hmac.new(self._mac_key, text.encode("utf-8"),
                                  hashlib.sha256).hexdigest()

    def seal(self, result_json: str, aad: str) -> str:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = secrets.token_bytes(12)
        sealed = AESGCM(self._aes_key).encrypt(nonce, result_json.encode("utf-8"),
                                               aad.encode("utf-8"))
        return base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, text: str, aad: str) -> str:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        try:
            raw = base64.b64decode(text, validate=True)
            return AESGCM(self._aes_key).decrypt(raw[:12], raw[12:],
                                                 aad.encode("utf-8")).decode("utf-8")
        except (InvalidTag, ValueError) as exc:
            raise StoreError(IDEMPOTENCY_STORE_FAILED,
                             "a stored result fails authentication (it was altered, or "
                             "written under another key)") from exc


def store_secret(encryption: str | None, environ: Mapping[str, str] | None) -> bytes | None:
    """The encryption secret from ``LUMA_IDEMPOTENCY_KEY``, or None without encryption."""
    from luma.runtime.file_store import ENCRYPTION_AES_256_GCM, KEY_ENV_VAR

    if encryption is None:
        return None
    if encryption != ENCRYPTION_AES_256_GCM:
        raise StoreStartupError(
            f'idempotency_store.encryption must be "{ENCRYPTION_AES_256_GCM}", '
            f'not "{encryption}".')
    secret = (os.environ if environ is None else environ).get(KEY_ENV_VAR, "")
    if not secret:
        raise StoreStartupError(
            f'idempotency_store.encryption is "{ENCRYPTION_AES_256_GCM}" but '
            f"{KEY_ENV_VAR} is not set.")
    return secret.encode("utf-8")


def derive_sealer(secret: bytes, salt: bytes) -> tuple[Sealer, bytes]:
    """The sealer for a store's salt and the key check that proves the same key later."""
    from luma.runtime.file_store import PBKDF2_ITERATIONS, _derive_keys

    aes_key, check = _derive_keys(secret, salt, PBKDF2_ITERATIONS)
    return Sealer(aes_key), check


class LeasedIdempotencyStore(IdempotencyStore):
    """Base of the shared backends: the claim / wait / take-over / complete protocol.

    Subclasses provide the atomic primitives, each one round trip to the server, each raising
    :class:`StoreError` (``TOOL_IDEMPOTENCY_STORE_FAILED``) when the server cannot be reached.
    """

    persistent = True
    backend_name = "shared"

    def __init__(self, *, lease_ms: int | None = None, warn: Warn | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(warn=warn, clock=clock)
        self.lease_ms = DEFAULT_LEASE_MS if lease_ms is None else lease_ms
        if self.lease_ms < 100:
            raise StoreStartupError(
                f"idempotency_store.lease_ms must be at least 100, got {self.lease_ms}.")
        self._sealer: Sealer | None = None
        self._owner_prefix = f"{socket.gethostname()}:{os.getpid()}:"

    # -- primitives -------------------------------------------------------------------------

    @abstractmethod
    async def _try_claim(self, tool: str, key: str, fingerprint: str, owner: str,
                         now_ms: int, lease_until_ms: int) -> Found | None:
        """Atomically: when no live record exists (none, expired, or ``in_progress`` with a
        lease that ended before ``now_ms``), write an ``in_progress`` record owned by
        ``owner`` and return None; otherwise return the live record."""

    @abstractmethod
    async def _renew(self, tool: str, key: str, owner: str, lease_until_ms: int) -> bool:
        """Extend the lease when ``owner`` still holds it; False when it does not."""

    @abstractmethod
    async def _complete(self, tool: str, key: str, owner: str, result: str,
                        expires_at_ms: int) -> bool:
        """Turn ``owner``'s record into a completed one; False when ``owner`` lost it."""

    @abstractmethod
    async def _release(self, tool: str, key: str, owner: str) -> None:
        """Delete the record when ``owner`` still holds it (a failed call stores nothing)."""

    # -- the protocol -----------------------------------------------------------------------

    def _ids(self, tool: str, key: str, fingerprint: str) -> tuple[str, str]:
        if self._sealer is None:
            return key, fingerprint
        return self._sealer.index(f"{tool}\0{key}"), self._sealer.index(fingerprint)

    def _seal(self, tool: str, stored_key: str, result_json: str) -> str:
        if self._sealer is None:
            return result_json
        return self._sealer.seal(result_json, f"{tool}\0{stored_key}")

    def _open(self, tool: str, stored_key: str, text: str) -> str:
        if self._sealer is None:
            return text
        return self._sealer.open(text, f"{tool}\0{stored_key}")

    async def _run_held(self, tool: str, key: str, fingerprint: str, ttl_ms: int,
                          compute: Callable[[], Awaitable[Any]], revalidate: Revalidate | None,
                          deadline: float | None, wait_timeout_ms: int | None
                          ) -> IdempotencyOutcome:
        stored_key, stored_fp = self._ids(tool, key, fingerprint)
        owner = self._owner_prefix + uuid.uuid4().hex
        poll = _POLL_FIRST_S
        while True:
            now_ms = int(self._clock() * 1000)
            try:
                found = await self._try_claim(tool, stored_key, stored_fp, owner, now_ms,
                                              now_ms + self.lease_ms)
            except StoreError as exc:
                raise StoreError(IDEMPOTENCY_STORE_FAILED,
                                 f"Tool '{tool}' did not run for idempotency key '{key}': "
                                 f"{_as_clause(exc.message)}.", retryable=True) from None
            if found is None:
                break
            if found.fingerprint != stored_fp:
                raise StoreError(
                    IDEMPOTENCY_CONFLICT,
                    f"Idempotency key '{key}' of tool '{tool}' was already used with a "
                    "different input.")
            if found.state == STATE_COMPLETED and found.result is not None:
                import json

                try:
                    value = json.loads(self._open(tool, stored_key, found.result))
                except StoreError as exc:
                    problem: str | None = exc.message
                else:
                    problem = _revalidation_problem(revalidate, value)
                    if problem is None:
                        return IdempotencyOutcome(value, replayed=True)
                self._warn(f"The stored result for idempotency key '{key}' of tool '{tool}' "
                           f"is no longer valid ({problem}); the tool runs again.")
                with contextlib.suppress(StoreError):
                    await self._release(tool, stored_key, found.owner)
                continue
            # another worker holds a live lease: wait for its result, or for its lease to end
            if deadline is not None and time.monotonic() + poll > deadline:
                raise in_progress_error(tool, key, wait_timeout_ms)
            await asyncio.sleep(poll)
            poll = min(poll * 2, _POLL_MAX_S)
        renewer = asyncio.ensure_future(self._keep_lease(tool, stored_key, owner))
        try:
            value = await compute()
        except BaseException:
            renewer.cancel()
            with contextlib.suppress(StoreError, asyncio.CancelledError):
                await asyncio.shield(self._release(tool, stored_key, owner))
            raise
        renewer.cancel()
        # From here on the tool has run: a failure must say that its side effect happened.
        try:
            result_text = self._seal(tool, stored_key, _result_json(value))
            now_ms = int(self._clock() * 1000)
            if not await self._complete(tool, stored_key, owner, result_text, now_ms + ttl_ms):
                raise StoreError(IDEMPOTENCY_STORE_FAILED,
                                 f"its lease ended before the result was written "
                                 f"(idempotency_store.lease_ms is {self.lease_ms})")
        except StoreError as exc:
            raise not_recorded_error(tool, key, exc) from None
        return IdempotencyOutcome(value, replayed=False)

    async def _keep_lease(self, tool: str, stored_key: str, owner: str) -> None:
        """Renew the lease every third of its length while the handler runs. A renewal the
        server did not answer is tried again at the next tick."""
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            with contextlib.suppress(StoreError):
                if not await self._renew(tool, stored_key, owner,
                                         int(self._clock() * 1000) + self.lease_ms):
                    return  # taken over: the completion will say so
