"""Idempotency stores: run an idempotent tool call once per key (RUNTIME.md §3 steps 9–12, §5).

The tool pipeline calls :meth:`IdempotencyStore.run_once` once per call of a tool declared
``idempotent: true``, with ``compute`` standing for steps 10–11 (the handler with its timeout and
retries, then output validation). The store looks the key up, runs ``compute`` at most once per
key while the record lives, and stores what it returned.

Two backends: :class:`MemoryIdempotencyStore` here (process-local, the default) and
``luma.runtime.file_store.FileIdempotencyStore`` (one JSON file shared by the processes of one
machine; not a transactional backend for workers on several machines). Which one a program
uses is ``luma.runtime.store_config.open_idempotency_store``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

IDEMPOTENCY_CONFLICT = "TOOL_IDEMPOTENCY_CONFLICT"
IDEMPOTENCY_STORE_FAILED = "TOOL_IDEMPOTENCY_STORE_FAILED"
IDEMPOTENCY_IN_PROGRESS = "TOOL_IDEMPOTENCY_IN_PROGRESS"
IDEMPOTENCY_STORE_UNAVAILABLE = "IDEMPOTENCY_STORE_UNAVAILABLE"

DEFAULT_FILE_PATH = ".luma-idempotency.json"

Warn = Callable[[str], None]
Revalidate = Callable[[Any], object]

_log = logging.getLogger("luma.runtime.stores")


class StoreError(Exception):
    """An idempotency failure as a Luma error: ``code``, ``message`` and ``retryable``.

    Codes: ``TOOL_IDEMPOTENCY_CONFLICT`` (the key was used with a different input),
    ``TOOL_IDEMPOTENCY_STORE_FAILED`` (the store could not be read or written during a call) and
    ``TOOL_IDEMPOTENCY_IN_PROGRESS`` (another call held the key for longer than this call may
    wait; retryable).
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
class IdempotencyRecord:
    """A live record as a backend returns it; ``result`` is a fresh copy of the stored JSON."""

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
                       revalidate: Revalidate | None = None,
                       wait_timeout_ms: int | None = None) -> IdempotencyOutcome:
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
          disk, renamed into place and the directory synced). When the record cannot be
          written after ``compute`` ran, the :class:`StoreError` says that the tool ran and
          was not recorded (``retryable=False``: running it again repeats its side effect).
        - While another call holds the key, this one waits for it — at most
          ``wait_timeout_ms`` when given (then ``TOOL_IDEMPOTENCY_IN_PROGRESS``, retryable),
          otherwise as long as the holder lives.
        """
        if ttl_ms <= 0:
            raise ValueError(f"ttl_ms must be greater than zero, got {ttl_ms}.")
        deadline = None if wait_timeout_ms is None \
            else time.monotonic() + wait_timeout_ms / 1000
        try:
            # the callers of this process wait here; a shared backend's own claim comes next
            async with self._claim(tool, key, deadline):
                return await self._run_held(tool, key, fingerprint, ttl_ms, compute, revalidate,
                                            deadline, wait_timeout_ms)
        except ClaimTimeout:
            raise in_progress_error(tool, key, wait_timeout_ms) from None

    @abstractmethod
    async def _run_held(self, tool: str, key: str, fingerprint: str, ttl_ms: int,
                        compute: Callable[[], Awaitable[Any]], revalidate: Revalidate | None,
                        deadline: float | None, wait_timeout_ms: int | None
                        ) -> IdempotencyOutcome:
        """:meth:`run_once` with this process's claim on ``(tool, key)`` held."""

    @contextlib.asynccontextmanager
    async def _claim(self, tool: str, key: str, deadline: float | None) -> AsyncIterator[None]:
        """Hold ``(tool, key)`` exclusively within this process; :class:`ClaimTimeout` when
        the claim is not free by ``deadline`` (``time.monotonic()``)."""
        await self._claims.acquire((tool, key), deadline)
        try:
            yield
        finally:
            self._claims.release((tool, key))


class RecordIdempotencyStore(IdempotencyStore):
    """A store whose :meth:`run_once` looks the record up and writes it while this process's
    claim on the key is held (the memory and file stores; a leased store claims on its server
    instead)."""

    async def _run_held(self, tool: str, key: str, fingerprint: str, ttl_ms: int,
                        compute: Callable[[], Awaitable[Any]], revalidate: Revalidate | None,
                        deadline: float | None, wait_timeout_ms: int | None
                        ) -> IdempotencyOutcome:
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
        # From here on the tool has run: a failure must say that its side effect happened.
        try:
            result_text = _result_json(value)
            now_ms = int(self._clock() * 1000)
            await self._put(tool, key, fingerprint, result_text, now_ms, now_ms + ttl_ms)
        except StoreError as exc:
            raise not_recorded_error(tool, key, exc) from None
        return IdempotencyOutcome(value, replayed=False)

    @abstractmethod
    async def _get(self, tool: str, key: str) -> IdempotencyRecord | None:
        """The live record of ``(tool, key)``, or None; called with the claim held."""

    @abstractmethod
    async def _put(self, tool: str, key: str, fingerprint: str, result_json: str,
                   stored_at_ms: int, expires_at_ms: int) -> None:
        """Store a record durably; called with the claim held."""


def not_recorded_error(tool: str, key: str, cause: StoreError) -> StoreError:
    """The tool ran but its record could not be written: not retryable, since running it again
    repeats its side effect."""
    return StoreError(
        IDEMPOTENCY_STORE_FAILED,
        f"Tool '{tool}' ran for idempotency key '{key}', but its result was not recorded: "
        f"{_as_clause(cause.message)}. A later call with this key will run the tool again.")


def in_progress_error(tool: str, key: str, wait_timeout_ms: int | None) -> StoreError:
    """``TOOL_IDEMPOTENCY_IN_PROGRESS``: another call held the key past the wait (retryable)."""
    return StoreError(
        IDEMPOTENCY_IN_PROGRESS,
        f"Idempotency key '{key}' of tool '{tool}' is held by another call that did not "
        f"finish within {wait_timeout_ms} ms; try again later.", retryable=True)


def _revalidation_problem(revalidate: Revalidate | None, value: Any) -> str | None:
    if revalidate is None:
        return None
    try:
        revalidate(value)
    except Exception as exc:  # the caller's validator reports a bad value by raising
        return str(exc) or type(exc).__name__
    return None


def _result_json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise StoreError(IDEMPOTENCY_STORE_FAILED, "it is not JSON (nested too deeply)") \
            from None
    except (TypeError, ValueError) as exc:
        raise StoreError(IDEMPOTENCY_STORE_FAILED, f"it is not JSON ({exc})") from None


def _as_clause(message: str) -> str:
    """A backend's message as a clause of a longer one: ``Idempotency store 'x' ...`` →
    ``idempotency store 'x' ...``, without its final period."""
    if message.startswith("Idempotency store"):
        message = "i" + message[1:]
    return message.removesuffix(".")


class ClaimTimeout(Exception):
    """A claim was not free by its deadline."""


class _ClaimTable:
    """Exclusive per-key claims shared by every thread and event loop of the process.

    A waiter parks on a future of its own loop; a release wakes every waiter (thread-safely)
    and they race for the claim again, so a cancelled waiter never swallows a wake-up.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held: dict[tuple[str, str],
                         list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = {}

    async def acquire(self, claim: tuple[str, str], deadline: float | None = None) -> None:
        """Take ``claim``; :class:`ClaimTimeout` if it is still held at ``deadline``."""
        loop = asyncio.get_running_loop()
        while True:
            with self._mutex:
                waiters = self._held.get(claim)
                if waiters is None:
                    self._held[claim] = []
                    return
                woken: asyncio.Future[None] = loop.create_future()
                waiters.append((loop, woken))
            if deadline is None:
                await woken
                continue
            try:
                await asyncio.wait_for(woken, max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise ClaimTimeout from None

    def release(self, claim: tuple[str, str]) -> None:
        with self._mutex:
            waiters = self._held.pop(claim)
        for loop, woken in waiters:
            with contextlib.suppress(RuntimeError):  # that waiter's loop has closed
                loop.call_soon_threadsafe(_wake, woken)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class MemoryIdempotencyStore(RecordIdempotencyStore):
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

    async def _get(self, tool: str, key: str) -> IdempotencyRecord | None:
        now_ms = int(self._clock() * 1000)
        with self._lock:
            stored = self._records.get((tool, key))
            if stored is None:
                return None
            if stored[3] <= now_ms:
                del self._records[(tool, key)]
                return None
        fingerprint, result_text, stored_at, expires_at = stored
        return IdempotencyRecord(fingerprint, json.loads(result_text), stored_at, expires_at)

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
