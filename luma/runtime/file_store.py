"""The file idempotency store: one JSON file for the processes of one machine (RUNTIME.md §5).

See :class:`FileIdempotencyStore` for the file format, the locks and the encryption.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from luma.runtime.store_files import (
    BadJSON,
    Identity,
    Refused,
    check_store_path,
    ensure_folder,
    identity_at,
    is_regular,
    loads_strict,
    open_lock_file,
    read_store_file,
    shown_value,
)
from luma.runtime.stores import (
    IDEMPOTENCY_STORE_FAILED,
    ClaimTimeout,
    IdempotencyRecord,
    RecordIdempotencyStore,
    StoreError,
    StoreStartupError,
    Warn,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows has no flock
    fcntl = None  # type: ignore[assignment]

KEY_ENV_VAR = "LUMA_IDEMPOTENCY_KEY"
ENCRYPTION_AES_256_GCM = "aes-256-gcm"
FILE_FORMAT_VERSION = 1

# OWASP 2023 figure for PBKDF2-HMAC-SHA256: 0.1–0.5 s, paid once per process and file salt.
# The KDF parameters are part of format version 1: a file that states others was altered, and
# is refused before any key derivation (another figure would be a new format version).
PBKDF2_ITERATIONS = 600_000
KDF = "pbkdf2-sha256"
_SALT_BYTES = 16
_NONCE_BYTES = 12
_KEY_CHECK_BYTES = 16

_T = TypeVar("_T")

# How every store this version writes begins; a file that does not parse is a (corrupt) store
# only when it begins so, and otherwise is someone else's file and is left alone.
_SIGNATURE = re.compile(rb'\A[ \t\r\n]*\{[ \t\r\n]*"version"[ \t\r\n]*:[ \t\r\n]*'
                        rb'([1-9][0-9]{0,8})(?![0-9.eE])')
_PLAIN_FIELDS = frozenset({"version", "records"})
_ENCRYPTED_FIELDS = frozenset({"version", "encryption", "nonce", "ciphertext"})
_HEADER_FIELDS = frozenset({"algorithm", "kdf", "iterations", "salt", "key_check"})
_RECORD_FIELDS = frozenset({"fingerprint", "result", "stored_at_ms", "expires_at_ms"})
_MAX_MS = 2**63 - 1

# Waiting for a key that another process holds is a poll, so that the wait can be cancelled.
_POLL_FIRST_S = 0.001
_POLL_MAX_S = 0.025


class _Corrupt(Exception):
    """The file is a store of this format that this process cannot trust: it is quarantined."""



class FileIdempotencyStore(RecordIdempotencyStore):
    """One JSON file shared safely by the processes of one machine (RUNTIME.md §5).

    **File.** ``{"version": 1, "records": {tool: {key: {"fingerprint", "result",
    "stored_at_ms", "expires_at_ms"}}}}``. Every write goes to ``<path>.tmp-<pid>-<random>``,
    is fsynced, renamed over ``<path>`` with ``os.replace`` and the directory is fsynced, so a
    reader (or a process that starts after a crash) sees the old file or the new one, never a
    mix. Expired records are dropped when the store opens and whenever the file is rewritten.

    **What it touches.** Only regular files: a store path that is a symbolic link, a folder, a
    FIFO, a device or a socket is refused before anything is created, and so are lock paths of
    the wrong type. The file is parsed strictly (no duplicate keys, ``version`` exactly the
    integer 1, bounded nesting and numbers). A file that begins as a store of this format but
    does not parse or has the wrong shape is *corrupt*: it is moved to
    ``<path>.corrupt-<UTC timestamp>`` with a warning, and the store starts empty. Any other
    file is *not a store*: it is left untouched and the store refuses (a file of a newer format
    version too). Before a replace or a move the file is checked to be the one that was read.

    **Locks.** ``<path>.lock`` guards each read-modify-write of the file (held for
    milliseconds, never while a handler runs); ``<path>.locks/<sha256>.lock`` is the claim of
    one ``(tool, key)``, held from lookup to write, so a second process waits for the first one's
    result — at most the call's ``wait_timeout_ms``. Both are ``fcntl.flock`` locks: the kernel
    releases them when their holder dies (SIGKILL included), so a dead holder is recovered from
    at once, and a slow (or stopped) live holder is never broken, which would run a write twice.

    **Encryption** (``encryption="aes-256-gcm"``): the records are one AES-256-GCM ciphertext
    with a fresh random 96-bit nonce per write; the file keeps only the version, the KDF
    parameters, a key check and the nonce in clear. The key is derived from
    ``LUMA_IDEMPOTENCY_KEY`` with PBKDF2-HMAC-SHA256 (600,000 iterations, 16-byte random salt
    per file) and HKDF-Expand-SHA256 into the AES key and a key check. A missing variable, or a
    file written under another key, refuses to start (:class:`StoreStartupError`). A header
    whose parameters are not those of the format, or a ciphertext that fails authentication,
    was altered: the file is quarantined. A plain store found while encryption is on is
    encrypted in place (its records are kept, with a warning).
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
        # The file the last load read (None: there was none); a write replaces only that one.
        self._seen: Identity | None = None
        try:
            self._refuse_early()
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._start()
        except Refused as exc:
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

    def _refuse_early(self) -> None:
        """Refuse a path that is not a regular file, or a file that is not a store, before
        anything (lock files, folders) is created next to it. The store is replaced only by
        rename, so reading it without the lock sees a whole file; it is read again locked."""
        found = read_store_file(self._path, self._shown)
        if found is not None:
            with contextlib.suppress(_Corrupt):  # quarantined once the lock is held
                self._envelope(found[0])

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
            if entry.name.startswith(prefix) and is_regular(entry):
                with contextlib.suppress(FileNotFoundError):
                    entry.unlink()
        ensure_folder(self._claims_dir, f"{self._shown}.locks")
        for entry in self._claims_dir.iterdir():
            fd = _try_lock_current(entry)
            if fd is not None:
                _unlink_and_unlock(entry, fd)

    # -- the claim of one key, across processes -------------------------------------------

    @contextlib.asynccontextmanager
    async def _claim(self, tool: str, key: str, deadline: float | None) -> AsyncIterator[None]:
        async with super()._claim(tool, key, deadline):
            name = hashlib.sha256(f"{tool}\0{key}".encode()).hexdigest()[:40] + ".lock"
            path = self._claims_dir / name
            try:
                fd = await self._acquire_claim_file(path, deadline)
            except Refused as exc:
                raise StoreError(IDEMPOTENCY_STORE_FAILED, str(exc)) from None
            except OSError as exc:
                raise StoreError(
                    IDEMPOTENCY_STORE_FAILED,
                    f"Idempotency store '{self._shown}' could not be used: the lock of key "
                    f"'{key}' cannot be taken ({exc.strerror or exc}).") from None
            try:
                yield
            finally:
                _unlink_and_unlock(path, fd)

    async def _acquire_claim_file(self, path: Path, deadline: float | None) -> int:
        delay = _POLL_FIRST_S
        shown = f"{self._shown}.locks/{path.name}"
        while True:
            ensure_folder(self._claims_dir, f"{self._shown}.locks")
            fd = open_lock_file(path, shown)
            try:
                while not _try_flock(fd):
                    if deadline is not None and time.monotonic() >= deadline:
                        raise ClaimTimeout
                    pause = delay if deadline is None \
                        else min(delay, max(0.0, deadline - time.monotonic()))
                    await asyncio.sleep(pause)
                    delay = min(delay * 2, _POLL_MAX_S)
                if _is_current(fd, path):
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # its holder unlinked it on release: lock the new file instead

    # -- reads and writes, each one locked transaction in a store I/O thread ----------------

    async def _get(self, tool: str, key: str) -> IdempotencyRecord | None:
        return await _in_io_thread(self._get_now, tool, key)

    async def _put(self, tool: str, key: str, fingerprint: str, result_json: str,
                   stored_at_ms: int, expires_at_ms: int) -> None:
        record = {"fingerprint": fingerprint, "result": json.loads(result_json),
                  "stored_at_ms": stored_at_ms, "expires_at_ms": expires_at_ms}
        # The claim is released when this returns, even on cancellation: the write must be
        # finished by then, or the next claimant would not see it and would run the tool again.
        write = _in_io_thread(self._put_now, tool, key, record)
        cancelled = False
        while not write.done():
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                cancelled = True
        if cancelled:
            raise asyncio.CancelledError
        write.result()

    def _get_now(self, tool: str, key: str) -> IdempotencyRecord | None:
        with self._transaction("read"):
            records = self._load()
        raw = records.get(tool, {}).get(key)
        if raw is None or raw["expires_at_ms"] <= int(self._clock() * 1000):
            return None
        return IdempotencyRecord(raw["fingerprint"], raw["result"], raw["stored_at_ms"],
                                 raw["expires_at_ms"])

    def _put_now(self, tool: str, key: str, record: dict[str, Any]) -> None:
        with self._transaction("written"):
            records = self._load()
            _drop_expired(records, int(self._clock() * 1000))
            records.setdefault(tool, {})[key] = record
            self._save(records)

    @contextlib.contextmanager
    def _transaction(self, done: str) -> Iterator[None]:
        """The store lock, with run-time failures turned into TOOL_IDEMPOTENCY_STORE_FAILED."""
        try:
            with self._locked():
                yield
        except Refused as exc:
            raise StoreError(IDEMPOTENCY_STORE_FAILED, str(exc)) from None
        except OSError as exc:
            raise StoreError(
                IDEMPOTENCY_STORE_FAILED,
                f"Idempotency store '{self._shown}' could not be {done} "
                f"({exc.strerror or exc}).") from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        shown = f"{self._shown}.lock"
        fd = open_lock_file(self._lock_path, shown)
        try:
            while True:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if _is_current(fd, self._lock_path):
                    break
                os.close(fd)  # the lock file was deleted under us: lock the one now in place
                fd = -1
                fd = open_lock_file(self._lock_path, shown)
            yield
        finally:
            if fd >= 0:
                os.close(fd)

    # -- the file format --------------------------------------------------------------------

    def _load(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Read the records, quarantining a corrupt store and encrypting a plain one when
        encryption is on (store lock held)."""
        found = read_store_file(self._path, self._shown)
        if found is None:
            self._salt, self._seen = None, None
            return {}
        data, self._seen = found
        try:
            records, plain = self._decode(data)
        except _Corrupt as exc:
            self._quarantine(str(exc))
            self._salt = None
            return {}
        if plain and self._secret is not None:
            self._save(records)
            count = sum(len(by_key) for by_key in records.values())
            self._warn(f"Idempotency store '{self._shown}' was not encrypted; its {count} "
                       f"{'record was' if count == 1 else 'records were'} encrypted with the "
                       f"key from {KEY_ENV_VAR}.")
        return records

    def _decode(self, data: bytes) -> tuple[dict[str, dict[str, dict[str, Any]]], bool]:
        """The records of a store file and whether it was plain; raises _Corrupt for a store of
        this format that cannot be trusted and Refused for any other file."""
        envelope = self._envelope(data)
        if "encryption" in envelope:
            if self._secret is None:
                raise Refused(
                    f"Idempotency store '{self._shown}' is encrypted but "
                    "idempotency_store.encryption is not set.")
            records, plain = self._decrypt(envelope), False
        else:
            records, plain = envelope["records"], True
        _check_records(records)
        return records, plain

    def _envelope(self, data: bytes) -> dict[str, Any]:
        """The envelope of a store of this format; _Corrupt for a file that begins as one but
        is not, Refused for a store of a newer format or a file that is not a store."""
        signature = _SIGNATURE.match(data)
        claimed = int(signature.group(1)) if signature is not None else None
        problem: str | None = None
        try:
            envelope = loads_strict(data)
        except BadJSON as exc:
            envelope, problem = None, str(exc)
        else:
            if isinstance(envelope, dict) and type(envelope.get("version")) is int \
                    and envelope.keys() & {"records", "encryption"}:
                claimed = envelope["version"]
            problem = _envelope_problem(envelope)
        if claimed is not None and claimed > FILE_FORMAT_VERSION:
            raise Refused(
                f"Idempotency store '{self._shown}' has format version {claimed}; this "
                f"version of Luma reads version {FILE_FORMAT_VERSION}.")
        if problem is not None:
            if claimed == FILE_FORMAT_VERSION:
                raise _Corrupt(problem)
            raise Refused(
                f"Idempotency store '{self._shown}' is not a Luma idempotency store "
                f"({problem}); it was left untouched. Point idempotency_store.path at another "
                "file, or move this one away.")
        assert isinstance(envelope, dict)
        return envelope

    def _decrypt(self, envelope: dict[str, Any]) -> Any:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        header = envelope["encryption"]
        if not isinstance(header, dict) or set(header) != _HEADER_FIELDS:
            raise _Corrupt("malformed encryption header")
        for field, expected in (("algorithm", ENCRYPTION_AES_256_GCM), ("kdf", KDF),
                                ("iterations", PBKDF2_ITERATIONS)):
            if header[field] != expected or type(header[field]) is not type(expected):
                # Refused before any key derivation: a stated cost is never paid.
                raise _Corrupt(f"its encryption header was altered: {field} is "
                               f"{shown_value(header[field])}; this format uses "
                               f"{shown_value(expected)}")
        salt = _unb64(header["salt"], _SALT_BYTES)
        key_check = _unb64(header["key_check"], _KEY_CHECK_BYTES)
        nonce = _unb64(envelope["nonce"], _NONCE_BYTES)
        ciphertext = _unb64(envelope["ciphertext"], None)
        aes_key, expected_check = self._derive(salt, header["iterations"])
        if not secrets.compare_digest(key_check, expected_check):
            raise Refused(
                f"Idempotency store '{self._shown}' cannot be decrypted: {KEY_ENV_VAR} is not "
                "the key it was written with.")
        try:
            plaintext = AESGCM(aes_key).decrypt(nonce, ciphertext, _aad(header))
        except InvalidTag:
            raise _Corrupt("its ciphertext fails authentication") from None
        try:
            records = loads_strict(plaintext)
        except BadJSON as exc:
            raise _Corrupt(f"the decrypted records: {exc}") from None
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
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            self._check_unchanged()
            os.replace(temporary, self._path)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
        self._seen = identity_at(self._path)
        _fsync_directory(self._path.parent)

    def _check_unchanged(self) -> None:
        """Refuse to replace or move a file other than the one the last load read."""
        if identity_at(self._path) != self._seen:
            check_store_path(self._path, self._shown)
            raise Refused(
                f"Idempotency store '{self._shown}' was replaced by another program while "
                "Luma was using it; it was left untouched.")

    def _encrypt(self, records: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if self._salt is None:
            self._salt = os.urandom(_SALT_BYTES)
        aes_key, key_check = self._derive(self._salt, PBKDF2_ITERATIONS)
        header = {"algorithm": ENCRYPTION_AES_256_GCM, "kdf": KDF,
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
        self._check_unchanged()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        target = self._path.with_name(f"{self._path.name}.corrupt-{stamp}")
        suffix = 1
        while os.path.lexists(target):
            suffix += 1
            target = self._path.with_name(f"{self._path.name}.corrupt-{stamp}-{suffix}")
        os.replace(self._path, target)
        self._seen = None
        _fsync_directory(self._path.parent)
        shown_target = os.path.join(os.path.dirname(self._shown), target.name)
        self._warn(f"Idempotency store '{self._shown}' is corrupt ({reason}); it was moved to "
                   f"'{shown_target}' and a new store was started.")


def _envelope_problem(envelope: Any) -> str | None:
    """What keeps ``envelope`` from being a store envelope of this format, or None."""
    if not isinstance(envelope, dict) or "version" not in envelope:
        return "not a store envelope"
    version = envelope["version"]
    if version != FILE_FORMAT_VERSION or type(version) is not int:
        return f'its "version" is {shown_value(version)}, not {FILE_FORMAT_VERSION}'
    if envelope.keys() != _PLAIN_FIELDS and envelope.keys() != _ENCRYPTED_FIELDS:
        return "the envelope does not have the fields of a store"
    return None


def _check_records(records: Any) -> None:
    if not isinstance(records, dict):
        raise _Corrupt("the records are not an object")
    for tool, by_key in records.items():
        if not isinstance(by_key, dict):
            raise _Corrupt(f"the records of tool '{_name(tool)}' are not an object")
        for key, record in by_key.items():
            if not isinstance(record, dict) or record.keys() != _RECORD_FIELDS \
                    or not isinstance(record["fingerprint"], str) \
                    or not _is_ms(record["stored_at_ms"]) \
                    or not _is_ms(record["expires_at_ms"]):
                raise _Corrupt(f"the record of key '{_name(key)}' of tool '{_name(tool)}' is "
                               "malformed")


def _name(text: str) -> str:
    """A tool name or key from the file, fit for a one-line message (escaped, cut at 80)."""
    return json.dumps(text[:80], ensure_ascii=False)[1:-1]


def _is_ms(value: Any) -> bool:
    return type(value) is int and 0 <= value <= _MAX_MS


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


_io_pool: ThreadPoolExecutor | None = None
_io_pool_lock = threading.Lock()


def _in_io_thread(function: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
    """Run blocking file work on the stores' own threads: handler threads that outlive their
    timeout may fill the event loop's default executor, and must not hold up the store."""
    global _io_pool
    with _io_pool_lock:
        if _io_pool is None:
            _io_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="luma-idempotency")
    return asyncio.get_running_loop().run_in_executor(_io_pool, function, *args)


# -- lock files ------------------------------------------------------------------------------

def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _is_current(fd: int, path: Path) -> bool:
    """Whether the locked file is still the one at ``path`` (a releaser may have unlinked it)."""
    try:
        on_disk = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def _try_lock_current(path: Path) -> int | None:
    """Lock a leftover claim file nobody holds (a regular file only, never followed)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if stat.S_ISREG(os.fstat(fd).st_mode) and _try_flock(fd) and _is_current(fd, path):
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
    """Make a rename in ``directory`` durable (some file systems cannot sync a directory)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)
