"""Idempotency stores: run an idempotent tool call once per key (RUNTIME.md §3 steps 9–12, §5).

The tool pipeline calls :meth:`IdempotencyStore.run_once` once per call of a tool declared
``idempotent: true``, with ``compute`` standing for steps 10–11 (the handler with its timeout and
retries, then output validation). The store looks the key up, runs ``compute`` at most once per
key while the record lives, and stores what it returned.

Two backends: :class:`MemoryIdempotencyStore` (process-local, the default) and
:class:`FileIdempotencyStore` (one JSON file shared by processes on one machine; see its
docstring for the file format, locking and encryption). The file store is not a transactional
backend for workers on several machines.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import json
import logging
import os
import secrets
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows has no flock
    fcntl = None  # type: ignore[assignment]

IDEMPOTENCY_CONFLICT = "TOOL_IDEMPOTENCY_CONFLICT"
IDEMPOTENCY_STORE_FAILED = "TOOL_IDEMPOTENCY_STORE_FAILED"
IDEMPOTENCY_STORE_UNAVAILABLE = "IDEMPOTENCY_STORE_UNAVAILABLE"

KEY_ENV_VAR = "LUMA_IDEMPOTENCY_KEY"
ENCRYPTION_AES_256_GCM = "aes-256-gcm"
DEFAULT_FILE_PATH = ".luma-idempotency.json"
FILE_FORMAT_VERSION = 1

# OWASP's 2023 figure for PBKDF2-HMAC-SHA256; about 0.1 s, paid once per process and file salt.
PBKDF2_ITERATIONS = 600_000
_MIN_ITERATIONS = 100_000
_MAX_ITERATIONS = 10_000_000
_SALT_BYTES = 16
_NONCE_BYTES = 12
_KEY_CHECK_BYTES = 16

# Waiting for a key that another process holds is a poll, so that the wait can be cancelled.
_POLL_FIRST_S = 0.001
_POLL_MAX_S = 0.025

Warn = Callable[[str], None]
Revalidate = Callable[[Any], object]

_log = logging.getLogger("luma.runtime.stores")


class StoreError(Exception):
    """An idempotency failure as a Luma error: ``code``, ``message`` and ``retryable``.

    Codes: ``TOOL_IDEMPOTENCY_CONFLICT`` (the key was used with a different input) and
    ``TOOL_IDEMPOTENCY_STORE_FAILED`` (the store could not be read or written during a call).
    """

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable


class StoreStartupError(StoreError):
    """The store cannot be opened, so the program must not start (the CLI exits with 2)."""

    def __init__(self, message: str) -> None:
        super().__init__(IDEMPOTENCY_STORE_UNAVAILABLE, message)


@dataclass(frozen=True, slots=True)
class IdempotencyOutcome:
    """What :meth:`IdempotencyStore.run_once` returns: the value, and whether it was a replay
    of a stored result (telemetry's ``idempotent_replay``) rather than a fresh ``compute``."""

    value: Any
    replayed: bool


@dataclass(frozen=True, slots=True)
class _Record:
    fingerprint: str
    result: Any
    stored_at_ms: int
    expires_at_ms: int


def input_fingerprint(value: Any) -> str:
    """The fingerprint of a validated tool input: SHA-256 of its canonical JSON (sorted keys,
    no whitespace). Two inputs have the same fingerprint exactly when their JSON is equal."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class IdempotencyStore(ABC):
    """Runs each idempotent call once per ``(tool, key)`` while its record lives.

    Concurrent calls with the same ``(tool, key)`` are serialized by a claim that is held from
    the lookup until the record is written: the first caller computes, the others wait and then
    find its record. The claim covers every task and thread of the process, and for the file
    store every process on the machine. Different keys never wait for each other.
    """

    persistent: ClassVar[bool] = False

    def __init__(self, *, warn: Warn | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._warn: Warn = warn if warn is not None else _log.warning
        self._clock = clock
        self._claims = _ClaimTable()

    async def run_once(self, tool: str, key: str, fingerprint: str, ttl_ms: int,
                       compute: Callable[[], Awaitable[Any]], *,
                       revalidate: Revalidate | None = None) -> IdempotencyOutcome:
        """Return the stored result for ``(tool, key)``, or run ``compute`` and store its result.

        - A live record with the same ``fingerprint`` is replayed (``replayed=True``) after
          ``revalidate(result)`` accepts it; if ``revalidate`` raises, the record is treated as
          absent (with a warning naming the exception's message) and ``compute`` runs again.
        - A live record with another fingerprint raises :class:`StoreError`
          ``TOOL_IDEMPOTENCY_CONFLICT`` (checked before ``revalidate``: the key was used).
        - ``compute``'s exceptions (and cancellation) propagate and store nothing; a caller that
          was waiting for this key then takes its turn and may compute.
        - The stored result expires ``ttl_ms`` after it is written (wall-clock time). It must be
          JSON; each replay returns a fresh copy.
        - When the call returns, the record is durable for the backend (for the file store: on
          disk, renamed into place and the directory synced).
        """
        if ttl_ms <= 0:
            raise ValueError(f"ttl_ms must be greater than zero, got {ttl_ms}.")
        async with self._claim(tool, key):
            record = await self._get(tool, key)
            if record is not None:
                if record.fingerprint != fingerprint:
                    raise StoreError(
                        IDEMPOTENCY_CONFLICT,
                        f"Idempotency key '{key}' of tool '{tool}' was already used with a "
                        "different input.")
                problem = _revalidation_problem(revalidate, record.result)
                if problem is None:
                    return IdempotencyOutcome(record.result, replayed=True)
                self._warn(f"The stored result for idempotency key '{key}' of tool '{tool}' "
                           f"is no longer valid ({problem}); the tool runs again.")
            value = await compute()
            result_text = _result_json(tool, key, value)
            now_ms = int(self._clock() * 1000)
            await self._put(tool, key, fingerprint, result_text, now_ms, now_ms + ttl_ms)
            return IdempotencyOutcome(value, replayed=False)

    @contextlib.asynccontextmanager
    async def _claim(self, tool: str, key: str) -> AsyncIterator[None]:
        """Hold ``(tool, key)`` exclusively within this process."""
        await self._claims.acquire((tool, key))
        try:
            yield
        finally:
            self._claims.release((tool, key))

    @abstractmethod
    async def _get(self, tool: str, key: str) -> _Record | None:
        """The live record of ``(tool, key)``, or None; called with the claim held."""

    @abstractmethod
    async def _put(self, tool: str, key: str, fingerprint: str, result_json: str,
                   stored_at_ms: int, expires_at_ms: int) -> None:
        """Store a record durably; called with the claim held."""


def _revalidation_problem(revalidate: Revalidate | None, value: Any) -> str | None:
    if revalidate is None:
        return None
    try:
        revalidate(value)
    except Exception as exc:  # the caller's validator reports a bad value by raising
        return str(exc) or type(exc).__name__
    return None


def _result_json(tool: str, key: str, value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(
            IDEMPOTENCY_STORE_FAILED,
            f"The result of tool '{tool}' for idempotency key '{key}' cannot be stored: "
            f"it is not JSON ({exc}).") from exc


class _ClaimTable:
    """Exclusive per-key claims shared by every thread and event loop of the process.

    A waiter parks on a future of its own loop; a release wakes every waiter (thread-safely)
    and they race for the claim again, so a cancelled waiter never swallows a wake-up.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held: dict[tuple[str, str],
                         list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = {}

    async def acquire(self, claim: tuple[str, str]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            with self._mutex:
                waiters = self._held.get(claim)
                if waiters is None:
                    self._held[claim] = []
                    return
                woken: asyncio.Future[None] = loop.create_future()
                waiters.append((loop, woken))
            await woken

    def release(self, claim: tuple[str, str]) -> None:
        with self._mutex:
            waiters = self._held.pop(claim)
        for loop, woken in waiters:
            with contextlib.suppress(RuntimeError):  # that waiter's loop has closed
                loop.call_soon_threadsafe(_wake, woken)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class MemoryIdempotencyStore(IdempotencyStore):
    """Process-local records (the default backend). Safe for tasks of any event loop and for
    threads of the process; records vanish with the process."""

    persistent = False

    def __init__(self, *, warn: Warn | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(warn=warn, clock=clock)
        self._lock = threading.Lock()
        # Results are kept as JSON text so that every replay hands out a fresh copy.
        self._records: dict[tuple[str, str], tuple[str, str, int, int]] = {}
        self._writes_since_prune = 0

    async def _get(self, tool: str, key: str) -> _Record | None:
        now_ms = int(self._clock() * 1000)
        with self._lock:
            stored = self._records.get((tool, key))
            if stored is None:
                return None
            if stored[3] <= now_ms:
                del self._records[(tool, key)]
                return None
        fingerprint, result_text, stored_at, expires_at = stored
        return _Record(fingerprint, json.loads(result_text), stored_at, expires_at)

    async def _put(self, tool: str, key: str, fingerprint: str, result_json: str,
                   stored_at_ms: int, expires_at_ms: int) -> None:
        with self._lock:
            self._records[(tool, key)] = (fingerprint, result_json, stored_at_ms, expires_at_ms)
            self._writes_since_prune += 1
            if self._writes_since_prune >= 256:
                # Expired records of keys never asked for again would otherwise stay forever.
                self._writes_since_prune = 0
                for claim in [c for c, r in self._records.items() if r[3] <= stored_at_ms]:
                    del self._records[claim]


class _Corrupt(Exception):
    """The file is not a store this process can trust: it is quarantined."""


class _Incompatible(Exception):
    """The file may be good but this process cannot use it: it is left alone, and we refuse."""


class FileIdempotencyStore(IdempotencyStore):
    """One JSON file shared safely by the processes of one machine (RUNTIME.md §5).

    **File.** ``{"version": 1, "records": {tool: {key: {"fingerprint", "result",
    "stored_at_ms", "expires_at_ms"}}}}``. Every write goes to ``<path>.tmp-<pid>-<random>``,
    is fsynced, renamed over ``<path>`` with ``os.replace`` and the directory is fsynced, so a
    reader (or a process that starts after a crash) sees the old file or the new one, never a
    mix. Expired records are dropped when the store opens and whenever the file is rewritten.
    A file that does not parse or has the wrong shape is moved to
    ``<path>.corrupt-<UTC timestamp>`` with a warning, and the store starts empty.

    **Locks.** ``<path>.lock`` guards each read-modify-write of the file (held for
    milliseconds, never while a handler runs); ``<path>.locks/<sha256>.lock`` is the claim of
    one ``(tool, key)``, held from lookup to write, so a second process waits for the first one's
    result. Both are ``fcntl.flock`` locks: the kernel releases them when their holder dies
    (SIGKILL included), so a dead holder is recovered from at once, and a slow live holder is
    never broken by a timeout (which would run a write twice). No pid or token is needed.

    **Encryption** (``encryption="aes-256-gcm"``): the records are one AES-256-GCM ciphertext
    with a fresh random 96-bit nonce per write; the file keeps only the version, the KDF
    parameters, a key check and the nonce in clear. The key is derived from
    ``LUMA_IDEMPOTENCY_KEY`` with PBKDF2-HMAC-SHA256 (600,000 iterations, 16-byte random salt
    per file) and HKDF-Expand-SHA256 into the AES key and a key check. A missing variable, or a
    file written under another key, refuses to start (:class:`StoreStartupError`); a file whose
    key check matches but whose ciphertext fails authentication was tampered with, and is
    quarantined like any corrupt file. An unencrypted file found while encryption is on is
    quarantined too: its records are unauthenticated.
    """

    persistent = True

    def __init__(self, path: str | os.PathLike[str], *, encryption: str | None = None,
                 environ: Mapping[str, str] | None = None, warn: Warn | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        """Open the store at ``path`` (created on first write), or raise StoreStartupError."""
        super().__init__(warn=warn, clock=clock)
        self._shown = os.fspath(path)
        if fcntl is None:  # pragma: no cover
            raise StoreStartupError(
                "The file idempotency store needs POSIX file locks (fcntl), which this system "
                "does not have.")
        if encryption not in (None, ENCRYPTION_AES_256_GCM):
            raise StoreStartupError(
                f'idempotency_store.encryption must be "{ENCRYPTION_AES_256_GCM}", '
                f'not "{encryption}".')
        self._secret: bytes | None = None
        if encryption is not None:
            secret = (os.environ if environ is None else environ).get(KEY_ENV_VAR, "")
            if not secret:
                raise StoreStartupError(
                    f'idempotency_store.encryption is "{ENCRYPTION_AES_256_GCM}" but '
                    f"{KEY_ENV_VAR} is not set.")
            self._secret = secret.encode("utf-8")
        self._path = Path(os.path.abspath(path))
        self._lock_path = self._path.with_name(self._path.name + ".lock")
        self._claims_dir = self._path.with_name(self._path.name + ".locks")
        self._salt: bytes | None = None
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._start()
        except _Incompatible as exc:
            raise StoreStartupError(str(exc)) from None
        except StoreError as exc:
            raise StoreStartupError(exc.message) from None
        except OSError as exc:
            raise StoreStartupError(
                f"Idempotency store '{self._shown}' cannot be opened: "
                f"{exc.strerror or exc}.") from None

    @property
    def path(self) -> Path:
        """The store file's absolute path."""
        return self._path

    def _start(self) -> None:
        with self._locked():
            self._remove_orphans()
            records = self._load()
            if _drop_expired(records, int(self._clock() * 1000)):
                self._save(records)

    def _remove_orphans(self) -> None:
        """Remove temporary files of writers that died, and claim files nobody holds."""
        # Writers keep their temporary file only while they hold the store lock, which we hold.
        prefix = self._path.name + ".tmp-"
        for entry in self._path.parent.iterdir():
            if entry.name.startswith(prefix):
                with contextlib.suppress(FileNotFoundError):
                    entry.unlink()
        if self._claims_dir.is_dir():
            for entry in self._claims_dir.iterdir():
                fd = _try_lock_current(entry)
                if fd is not None:
                    _unlink_and_unlock(entry, fd)

    # -- the claim of one key, across processes -------------------------------------------

    @contextlib.asynccontextmanager
    async def _claim(self, tool: str, key: str) -> AsyncIterator[None]:
        async with super()._claim(tool, key):
            name = hashlib.sha256(f"{tool}\0{key}".encode()).hexdigest()[:40] + ".lock"
            path = self._claims_dir / name
            fd = await self._acquire_claim_file(path)
            try:
                yield
            finally:
                _unlink_and_unlock(path, fd)

    async def _acquire_claim_file(self, path: Path) -> int:
        delay = _POLL_FIRST_S
        while True:
            fd = _open_lock_file(path)
            try:
                while not _try_flock(fd):
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _POLL_MAX_S)
                if _is_current(fd, path):
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # its holder unlinked it on release: lock the new file instead

    # -- reads and writes, each one locked transaction in a worker thread -------------------

    async def _get(self, tool: str, key: str) -> _Record | None:
        return await asyncio.to_thread(self._get_now, tool, key)

    async def _put(self, tool: str, key: str, fingerprint: str, result_json: str,
                   stored_at_ms: int, expires_at_ms: int) -> None:
        record = {"fingerprint": fingerprint, "result": json.loads(result_json),
                  "stored_at_ms": stored_at_ms, "expires_at_ms": expires_at_ms}
        # The claim is released when this returns, even on cancellation: the write must be
        # finished by then, or the next claimant would not see it and would run the tool again.
        write = asyncio.ensure_future(asyncio.to_thread(self._put_now, tool, key, record))
        cancelled = False
        while not write.done():
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                cancelled = True
        if cancelled:
            raise asyncio.CancelledError
        write.result()

    def _get_now(self, tool: str, key: str) -> _Record | None:
        with self._transaction():
            records = self._load()
        raw = records.get(tool, {}).get(key)
        if raw is None or raw["expires_at_ms"] <= int(self._clock() * 1000):
            return None
        return _Record(raw["fingerprint"], raw["result"], raw["stored_at_ms"],
                       raw["expires_at_ms"])

    def _put_now(self, tool: str, key: str, record: dict[str, Any]) -> None:
        with self._transaction():
            records = self._load()
            _drop_expired(records, int(self._clock() * 1000))
            records.setdefault(tool, {})[key] = record
            self._save(records)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """The store lock, with run-time failures turned into TOOL_IDEMPOTENCY_STORE_FAILED."""
        try:
            with self._locked():
                yield
        except _Incompatible as exc:
            raise StoreError(IDEMPOTENCY_STORE_FAILED, str(exc)) from None
        except OSError as exc:
            raise StoreError(
                IDEMPOTENCY_STORE_FAILED,
                f"Idempotency store '{self._shown}' could not be used: "
                f"{exc.strerror or exc}.") from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = _open_lock_file(self._lock_path)
        try:
            while True:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if _is_current(fd, self._lock_path):
                    break
                os.close(fd)  # the lock file was deleted under us: lock the one now in place
                fd = -1
                fd = _open_lock_file(self._lock_path)
            yield
        finally:
            if fd >= 0:
                os.close(fd)

    # -- the file format --------------------------------------------------------------------

    def _load(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Read the records, quarantining a corrupt file (store lock held)."""
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            self._salt = None
            return {}
        try:
            return self._decode(data)
        except _Corrupt as exc:
            self._quarantine(str(exc))
            self._salt = None
            return {}

    def _decode(self, data: bytes) -> dict[str, dict[str, dict[str, Any]]]:
        try:
            envelope = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _Corrupt(f"not valid JSON: {exc}") from None
        if not isinstance(envelope, dict) or "version" not in envelope:
            raise _Corrupt("not a store envelope")
        version = envelope["version"]
        if version != FILE_FORMAT_VERSION:
            if type(version) is int and version > FILE_FORMAT_VERSION:
                raise _Incompatible(
                    f"Idempotency store '{self._shown}' has format version {version}; this "
                    f"version of Luma reads version {FILE_FORMAT_VERSION}.")
            raise _Corrupt(f"unknown format version {version!r}")
        if "encryption" in envelope:
            if self._secret is None:
                raise _Incompatible(
                    f"Idempotency store '{self._shown}' is encrypted but "
                    "idempotency_store.encryption is not set.")
            records = self._decrypt(envelope)
        else:
            if self._secret is not None:
                raise _Corrupt(
                    f'not encrypted although idempotency_store.encryption is '
                    f'"{ENCRYPTION_AES_256_GCM}"')
            if set(envelope) != {"version", "records"}:
                raise _Corrupt("unexpected fields in the envelope")
            records = envelope["records"]
        _check_records(records)
        return records  # type: ignore[no-any-return]

    def _decrypt(self, envelope: dict[str, Any]) -> Any:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        header = envelope["encryption"]
        if set(envelope) != {"version", "encryption", "nonce", "ciphertext"} \
                or not isinstance(header, dict) \
                or set(header) != {"algorithm", "kdf", "iterations", "salt", "key_check"} \
                or header["algorithm"] != ENCRYPTION_AES_256_GCM \
                or header["kdf"] != "pbkdf2-sha256" \
                or type(header["iterations"]) is not int \
                or not _MIN_ITERATIONS <= header["iterations"] <= _MAX_ITERATIONS:
            raise _Corrupt("malformed encryption header")
        salt = _unb64(header["salt"], _SALT_BYTES)
        key_check = _unb64(header["key_check"], _KEY_CHECK_BYTES)
        nonce = _unb64(envelope["nonce"], _NONCE_BYTES)
        ciphertext = _unb64(envelope["ciphertext"], None)
        aes_key, expected_check = self._derive(salt, header["iterations"])
        if not secrets.compare_digest(key_check, expected_check):
            raise _Incompatible(
                f"Idempotency store '{self._shown}' cannot be decrypted: {KEY_ENV_VAR} is not "
                "the key it was written with.")
        try:
            plaintext = AESGCM(aes_key).decrypt(nonce, ciphertext, _aad(header))
        except InvalidTag:
            raise _Corrupt("its ciphertext fails authentication") from None
        try:
            records = json.loads(plaintext.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _Corrupt(f"the decrypted records are not valid JSON: {exc}") from None
        self._salt = salt  # later writes keep this file's salt: no new key derivation
        return records

    def _save(self, records: dict[str, dict[str, dict[str, Any]]]) -> None:
        envelope: dict[str, Any] = {"version": FILE_FORMAT_VERSION}
        if self._secret is None:
            envelope["records"] = records
        else:
            envelope.update(self._encrypt(records))
        data = json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        temporary = self._path.with_name(
            f"{self._path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, self._path)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
        _fsync_directory(self._path.parent)

    def _encrypt(self, records: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if self._salt is None:
            self._salt = os.urandom(_SALT_BYTES)
        aes_key, key_check = self._derive(self._salt, PBKDF2_ITERATIONS)
        header = {"algorithm": ENCRYPTION_AES_256_GCM, "kdf": "pbkdf2-sha256",
                  "iterations": PBKDF2_ITERATIONS, "salt": _b64(self._salt),
                  "key_check": _b64(key_check)}
        nonce = os.urandom(_NONCE_BYTES)
        plaintext = json.dumps(records, ensure_ascii=False, separators=(",", ":"))
        ciphertext = AESGCM(aes_key).encrypt(nonce, plaintext.encode("utf-8"), _aad(header))
        return {"encryption": header, "nonce": _b64(nonce), "ciphertext": _b64(ciphertext)}

    def _derive(self, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
        assert self._secret is not None
        return _derive_keys(self._secret, salt, iterations)

    def _quarantine(self, reason: str) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        target = self._path.with_name(f"{self._path.name}.corrupt-{stamp}")
        suffix = 1
        while target.exists():
            suffix += 1
            target = self._path.with_name(f"{self._path.name}.corrupt-{stamp}-{suffix}")
        os.replace(self._path, target)
        _fsync_directory(self._path.parent)
        shown_target = os.path.join(os.path.dirname(self._shown), target.name)
        self._warn(f"Idempotency store '{self._shown}' is corrupt ({reason}); it was moved to "
                   f"'{shown_target}' and a new store was started.")


def _check_records(records: Any) -> None:
    if not isinstance(records, dict):
        raise _Corrupt("the records are not an object")
    for tool, by_key in records.items():
        if not isinstance(by_key, dict):
            raise _Corrupt(f"the records of tool '{tool}' are not an object")
        for key, record in by_key.items():
            if not isinstance(record, dict) \
                    or set(record) != {"fingerprint", "result", "stored_at_ms", "expires_at_ms"} \
                    or not isinstance(record["fingerprint"], str) \
                    or type(record["stored_at_ms"]) is not int \
                    or type(record["expires_at_ms"]) is not int:
                raise _Corrupt(f"the record of key '{key}' of tool '{tool}' is malformed")


def _drop_expired(records: dict[str, dict[str, dict[str, Any]]], now_ms: int) -> bool:
    dropped = False
    for tool in list(records):
        by_key = records[tool]
        for key in [k for k, r in by_key.items() if r["expires_at_ms"] <= now_ms]:
            del by_key[key]
            dropped = True
        if not by_key:
            del records[tool]
            dropped = True
    return dropped


_derived: dict[tuple[bytes, bytes, int], tuple[bytes, bytes]] = {}
_derived_lock = threading.Lock()


def _derive_keys(secret: bytes, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    """(AES key, key check) for a secret and a file's salt, derived once per process."""
    with _derived_lock:
        cached = _derived.get((secret, salt, iterations))
    if cached is None:
        from cryptography.hazmat.primitives.hashes import SHA256
        from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

        master = hashlib.pbkdf2_hmac("sha256", secret, salt, iterations, dklen=32)
        aes_key = HKDFExpand(SHA256(), 32, b"luma idempotency store aes-256-gcm key") \
            .derive(master)
        check = HKDFExpand(SHA256(), _KEY_CHECK_BYTES, b"luma idempotency store key check") \
            .derive(master)
        cached = (aes_key, check)
        with _derived_lock:
            _derived[(secret, salt, iterations)] = cached
    return cached


def _aad(header: Mapping[str, Any]) -> bytes:
    # Binding the header means a changed salt, KDF or version fails authentication.
    canonical = json.dumps(dict(header), sort_keys=True, separators=(",", ":"))
    return f"luma-idempotency-store/{FILE_FORMAT_VERSION}/{canonical}".encode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any, length: int | None) -> bytes:
    if not isinstance(text, str):
        raise _Corrupt("malformed encryption fields")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _Corrupt("malformed encryption fields") from None
    if length is not None and len(data) != length:
        raise _Corrupt("malformed encryption fields")
    return data


# -- lock files ------------------------------------------------------------------------------

def _open_lock_file(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _is_current(fd: int, path: Path) -> bool:
    """Whether the locked file is still the one at ``path`` (a releaser may have unlinked it)."""
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def _try_lock_current(path: Path) -> int | None:
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    if _try_flock(fd) and _is_current(fd, path):
        return fd
    os.close(fd)
    return None


def _unlink_and_unlock(path: Path, fd: int) -> None:
    # Unlink while still holding the lock, so the next claimant locks a fresh file.
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    finally:
        os.close(fd)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_idempotency_store(backend: str = "memory", path: str | None = None,
                           encryption: str | None = None, *, base_dir: str | os.PathLike[str],
                           environ: Mapping[str, str] | None = None,
                           warn: Warn | None = None) -> IdempotencyStore:
    """The store an ``idempotency_store`` config block describes (RUNTIME.md §2, §5).

    ``path`` is relative to ``base_dir`` (the program's folder) and defaults to
    ``.luma-idempotency.json``. Raises :class:`StoreStartupError` when the store cannot be used.
    """
    if backend == "memory":
        if path is not None or encryption is not None:
            field = "path" if path is not None else "encryption"
            raise StoreStartupError(
                f'idempotency_store.{field} applies only to the "file" backend.')
        return MemoryIdempotencyStore(warn=warn)
    if backend == "file":
        full = Path(base_dir) / (path if path is not None else DEFAULT_FILE_PATH)
        return FileIdempotencyStore(full, encryption=encryption, environ=environ, warn=warn)
    raise StoreStartupError(
        f'idempotency_store.backend must be "memory" or "file", not "{backend}".')
