"""The Redis idempotency store (RUNTIME.md §5), on ``redis-py`` — the one module that imports it.

One string key per ``(tool, key)``: ``<prefix><tool>:<key>`` holding the record's JSON, with a
Redis expiry (the lease while ``in_progress``, the TTL once ``completed``), so expired records
vanish on their own and a dead owner's lease simply runs out. Claiming is ``SET NX PX``;
renewing, completing and releasing are Lua compare-and-set scripts on the owner.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import secrets
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
from luma.runtime.stores import IDEMPOTENCY_STORE_FAILED, StoreError, StoreStartupError, Warn

DEFAULT_PREFIX = "luma:idem:"
EXTRA_HINT = "pip install 'luma[redis]'"
_PREFIX = re.compile(r"\A[\x21-\x7e]{1,200}\Z")

_T = TypeVar("_T")

# KEYS[1] the record; ARGV[1] the owner. Each returns 1 when the owner still held the record.
_RENEW = """
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local r = cjson.decode(v)
if r.owner ~= ARGV[1] or r.state ~= 'in_progress' then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
# ARGV[2] the result, ARGV[3] its TTL. Running it twice (a reply lost on the way) is the same
# as running it once.
_COMPLETE = """
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local r = cjson.decode(v)
if r.owner ~= ARGV[1] then return 0 end
r.state = 'completed'
r.result = ARGV[2]
redis.call('SET', KEYS[1], cjson.encode(r), 'PX', ARGV[3])
return 1
"""
_RELEASE = """
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local r = cjson.decode(v)
if r.owner ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
"""


class RedisIdempotencyStore(LeasedIdempotencyStore):
    """Records as expiring Redis keys shared by every worker that can reach the server."""

    backend_name = "redis"

    def __init__(self, url: str, *, prefix: str | None = None, encryption: str | None = None,
                 lease_ms: int | None = None, environ: Mapping[str, str] | None = None,
                 warn: Warn | None = None, clock: Callable[[], float] = time.time) -> None:
        super().__init__(lease_ms=lease_ms, warn=warn, clock=clock)
        self.prefix = DEFAULT_PREFIX if prefix is None else prefix
        if not _PREFIX.match(self.prefix):
            raise StoreStartupError(
                f"idempotency_store.prefix {json.dumps(self.prefix)} must be 1 to 200 "
                "printable characters without spaces.")
        try:
            import redis
            from redis.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError:
            raise StoreStartupError(
                f"The redis idempotency store needs redis-py, which is not installed: "
                f"{EXTRA_HINT}") from None
        self._redis: Any = redis
        self._secrets = url_secrets(url)
        try:
            # no silent retries: a call in flight when the connection drops fails clearly
            self._client: Any = redis.Redis.from_url(
                url, socket_timeout=10, socket_connect_timeout=5, retry=Retry(NoBackoff(), 0),
                decode_responses=True)
        except ValueError as exc:
            raise StoreStartupError(
                f"idempotency_store.url is not a Redis URL ({self._shown(exc)}).") from None
        self._renew_script = self._client.register_script(_RENEW)
        self._complete_script = self._client.register_script(_COMPLETE)
        self._release_script = self._client.register_script(_RELEASE)
        secret = store_secret(encryption, environ)
        try:
            self._call(self._client.ping)
            if secret is not None:
                self._sealer = self._call(lambda: self._key_check(secret))
        except StoreError as exc:
            raise StoreStartupError(exc.message) from None

    @property
    def _where(self) -> str:
        return f"Idempotency store redis prefix '{self.prefix}'"

    def _shown(self, exc: BaseException) -> str:
        text = " ".join(str(exc).split()) or type(exc).__name__
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text.removesuffix(".")

    def _call(self, work: Callable[[], _T]) -> _T:
        try:
            return work()
        except self._redis.RedisError as exc:
            raise StoreError(IDEMPOTENCY_STORE_FAILED,
                             f"{self._where} cannot be used: {self._shown(exc)}.") from None

    async def _run(self, work: Callable[[], _T]) -> _T:
        return await asyncio.to_thread(self._call, work)

    def _name(self, tool: str, key: str) -> str:
        return f"{self.prefix}{tool}:{key}"

    def _key_check(self, secret: bytes) -> Any:
        from luma.runtime.file_store import KEY_ENV_VAR

        salt = secrets.token_bytes(16)
        sealer, check = derive_sealer(secret, salt)
        meta = self.prefix + ":encryption"  # no record: tool names are never empty
        self._client.set(meta, json.dumps({"salt": base64.b64encode(salt).decode(),
                                           "key_check": base64.b64encode(check).decode()}),
                         nx=True)
        stored = json.loads(self._client.get(meta))
        stored_salt = base64.b64decode(stored["salt"])
        if stored_salt != salt:
            sealer, check = derive_sealer(secret, stored_salt)
        if not secrets.compare_digest(base64.b64decode(stored["key_check"]), check):
            raise StoreStartupError(
                f"{self._where} cannot be decrypted: {KEY_ENV_VAR} is not the key it was "
                "written with.")
        return sealer

    async def _try_claim(self, tool: str, key: str, fingerprint: str, owner: str,
                         now_ms: int, lease_until_ms: int) -> Found | None:
        name = self._name(tool, key)
        record = json.dumps({"state": STATE_IN_PROGRESS, "owner": owner,
                             "fingerprint": fingerprint, "result": None})

        def claim() -> Found | None:
            while True:
                if self._client.set(name, record, nx=True, px=max(1, lease_until_ms - now_ms)):
                    return None
                text = self._client.get(name)
                if text is not None:
                    try:
                        found = json.loads(text)
                        return Found(found["state"], found["owner"], found["fingerprint"],
                                     found["result"])
                    except (ValueError, KeyError, TypeError):
                        raise StoreError(IDEMPOTENCY_STORE_FAILED,
                                         f"{self._where}: the key {name} is not a record "
                                         "this store wrote") from None
                # it expired or was released between the two commands: claim again

        return await self._run(claim)

    async def _renew(self, tool: str, key: str, owner: str, lease_until_ms: int) -> bool:
        ms = max(1, lease_until_ms - int(self._clock() * 1000))
        done = await self._run(lambda: self._renew_script(
            keys=[self._name(tool, key)], args=[owner, ms]))
        return bool(done == 1)

    async def _complete(self, tool: str, key: str, owner: str, result: str,
                        expires_at_ms: int) -> bool:
        ms = max(1, expires_at_ms - int(self._clock() * 1000))
        done = await self._run(lambda: self._complete_script(
            keys=[self._name(tool, key)], args=[owner, result, ms]))
        return bool(done == 1)

    async def _release(self, tool: str, key: str, owner: str) -> None:
        await self._run(lambda: self._release_script(keys=[self._name(tool, key)],
                                                     args=[owner]))

    def close(self) -> None:
        self._client.close()
