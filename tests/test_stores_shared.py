"""The shared idempotency stores against real servers and real processes (RUNTIME.md §5).

PostgreSQL is ``LUMA_TEST_POSTGRES_URL`` and Redis ``LUMA_TEST_REDIS_URL`` (defaults: the servers
``compose.yaml`` starts). Each test works in a table or a key prefix of its own, removed
afterwards. Worker processes are
``tests/stores/shared_worker.py`` started with this interpreter; see its docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

from luma.runtime.store_config import open_idempotency_store
from luma.runtime.stores import IdempotencyOutcome, IdempotencyStore, StoreError, \
    StoreStartupError, input_fingerprint
from pg_server import pg_admin

WORKER = Path(__file__).parent / "stores" / "shared_worker.py"
SECRET = "a-long-and-secure-key"
PG_URL = os.environ.get("LUMA_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LUMA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@dataclass
class Server:
    """One backend under test: where its records live and how to read them raw."""

    backend: str
    url: str
    where: str  # the table (postgres) or the key prefix (redis)
    app_name: str = field(default_factory=lambda: f"luma_test_{uuid.uuid4().hex[:10]}")

    def open(self, *, lease_ms: int | None = None, encrypted: bool = False,
             secret: str = SECRET, warnings: list[str] | None = None) -> IdempotencyStore:
        extra: dict[str, Any] = {"table" if self.backend == "postgres" else "prefix":
                                 self.where}
        return open_idempotency_store(
            self.backend, encryption="aes-256-gcm" if encrypted else None, base_dir=".",
            url_env="STORE_URL", lease_ms=lease_ms,
            environ={"STORE_URL": self.url, "LUMA_IDEMPOTENCY_KEY": secret},
            warn=None if warnings is None else warnings.append, **extra)

    @property
    def shown(self) -> str:
        """How the store names itself in messages."""
        if self.backend == "postgres":
            return f"postgres table '{self.where}'"
        return f"redis prefix '{self.where}'"

    def raw(self) -> str:
        """Everything the server holds for this test, as text."""
        if self.backend == "redis":
            import redis

            client = redis.Redis.from_url(REDIS_URL)
            return repr({name: client.get(name) for name in client.scan_iter(f"{self.where}*")})
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            rows = conn.execute(f'SELECT * FROM "{self.where}"').fetchall()
        return repr(rows)


@pytest.fixture(params=["postgres", "redis"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if request.param == "redis":
        yield from redis_server()
    else:
        yield from postgres_server()


def postgres_server() -> Iterator[Server]:
    admin = pg_admin(PG_URL)
    table = f"luma_test_idem_{uuid.uuid4().hex[:12]}"
    found = Server("postgres", "", table)
    joiner = "&" if "?" in PG_URL else "?"
    found.url = f"{PG_URL}{joiner}application_name={quote(found.app_name)}"
    try:
        yield found
    finally:
        admin.execute(f'DROP TABLE IF EXISTS "{table}"')
        admin.close()


def redis_server() -> Iterator[Server]:
    import redis

    admin = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=5)
    try:
        admin.ping()
    except redis.RedisError as exc:
        pytest.fail(f"no Redis server answers at {REDIS_URL} ({exc}): start one with "
                    "`docker compose up -d`, or point LUMA_TEST_REDIS_URL at one", pytrace=False)
    prefix = f"luma-test:{uuid.uuid4().hex[:12]}:"
    found = Server("redis", "", prefix)
    joiner = "&" if "?" in REDIS_URL else "?"
    found.url = f"{REDIS_URL}{joiner}client_name={found.app_name}"
    try:
        yield found
    finally:
        for name in admin.scan_iter(f"{prefix}*"):
            admin.delete(name)
        admin.close()


def start(server: Server, *args: str, lease_ms: int | None = None,
          encrypted: bool = False) -> subprocess.Popen[bytes]:
    env = dict(os.environ, LUMA_TEST_STORE_URL=server.url)
    env.pop("LUMA_IDEMPOTENCY_KEY", None)
    if lease_ms is not None:
        env["LUMA_TEST_LEASE_MS"] = str(lease_ms)
    if encrypted:
        env["LUMA_IDEMPOTENCY_KEY"] = SECRET
        env["LUMA_TEST_ENCRYPTION"] = "aes-256-gcm"
    return subprocess.Popen([sys.executable, str(WORKER), args[0], server.backend,
                             server.where, *args[1:]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def hammer(server: Server, tmp: Path, keys: list[str], processes: int,
           **options: Any) -> tuple[Counter[str], list[dict[str, Any]]]:
    runs_file, go = tmp / "runs.txt", tmp / f"go-{uuid.uuid4().hex}"
    workers = [start(server, "hammer", str(runs_file), str(go), *keys, **options)
               for _ in range(processes)]
    for worker in workers:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert line == b"ready\n", worker.communicate()[1].decode()
    go.touch()
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err.decode()
        assert err == b""
        results.append(json.loads(out))
    runs = Counter(line.split()[0] for line in runs_file.read_text().splitlines())
    return runs, results


def fingerprint(key: str, **more: Any) -> str:
    return input_fingerprint({"request_id": key, **more})


def run(store: IdempotencyStore, key: str, value: Any, *, ttl_ms: int = 60_000,
        wait_timeout_ms: int | None = None, fp: str | None = None) -> IdempotencyOutcome:
    async def compute() -> Any:
        return value

    return asyncio.run(store.run_once("db_write", key, fp or fingerprint(key), ttl_ms, compute,
                                      wait_timeout_ms=wait_timeout_ms))


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_eight_processes_fifty_keys_each_handler_runs_once(server: Server, tmp_path: Path,
                                                          encrypted: bool) -> None:
    keys = [f"r-{n}" for n in range(50)]
    runs, results = hammer(server, tmp_path, keys, 8, encrypted=encrypted)
    assert runs == Counter(keys)  # each key's handler ran exactly once
    first = results[0]
    assert all(result == first for result in results)  # everyone got the one stored result
    assert len({value["pid"] for value in first.values()}) > 1  # spread over processes


def test_a_killed_holder_is_taken_over_after_its_lease(server: Server, tmp_path: Path) -> None:
    runs_file = tmp_path / "runs.txt"
    held = [f"r-{n}" for n in range(5)]
    # leases long enough that a loaded machine still renews them in time: a lapse would be a
    # takeover of a live holder, which is what the lease exists to prevent
    holder = start(server, "hold", str(runs_file), *held, lease_ms=2000)
    try:
        assert holder.stdout is not None
        for _ in held:
            assert holder.stdout.readline().startswith(b"computing ")
        # while the holder lives (and renews its lease), another worker waits, then gives up
        store = server.open(lease_ms=2000)
        with pytest.raises(StoreError) as caught:
            run(store, "r-0", {"early": True}, wait_timeout_ms=1500)
        assert caught.value.code == "TOOL_IDEMPOTENCY_IN_PROGRESS"
        assert caught.value.retryable
        assert caught.value.message == ("Idempotency key 'r-0' of tool 'db_write' is held by "
                                        "another call that did not finish within 1500 ms; try "
                                        "again later.")
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    finally:
        holder.kill()
        holder.wait()
    keys = [f"r-{n}" for n in range(50)]
    began = time.monotonic()
    runs, results = hammer(server, tmp_path, keys, 8, lease_ms=5000)
    assert time.monotonic() - began < 60
    for key in keys:
        # the holder's run, then exactly one takeover; every other key exactly once
        assert runs[key] == (2 if key in held else 1), key
    assert all(result == results[0] for result in results)


def test_same_key_different_input_is_a_conflict(server: Server) -> None:
    store = server.open()
    assert run(store, "r-1", {"n": 1}) == IdempotencyOutcome({"n": 1}, replayed=False)
    assert run(store, "r-1", {"n": 2}) == IdempotencyOutcome({"n": 1}, replayed=True)
    with pytest.raises(StoreError) as caught:
        run(server.open(), "r-1", {"n": 3}, fp=fingerprint("r-1", amount=3))
    assert caught.value.code == "TOOL_IDEMPOTENCY_CONFLICT"
    assert caught.value.message == ("Idempotency key 'r-1' of tool 'db_write' was already used "
                                    "with a different input.")


def test_a_record_expires_after_its_ttl(server: Server) -> None:
    store = server.open()
    assert run(store, "r-1", {"n": 1}, ttl_ms=300).replayed is False
    assert run(store, "r-1", {"n": 2}, ttl_ms=300) == IdempotencyOutcome({"n": 1}, True)
    time.sleep(0.4)
    # expired: ignored (even with another input) and replaced
    assert run(store, "r-1", {"n": 3}, ttl_ms=300, fp=fingerprint("r-1", x=1)) == \
        IdempotencyOutcome({"n": 3}, replayed=False)


def test_a_failed_call_stores_nothing_and_releases_its_claim(server: Server) -> None:
    store = server.open()

    async def fails() -> Any:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        asyncio.run(store.run_once("db_write", "r-1", fingerprint("r-1"), 60_000, fails))
    assert "r-1" not in server.raw()
    began = time.monotonic()
    assert run(server.open(), "r-1", {"n": 1}, wait_timeout_ms=5000).replayed is False
    assert time.monotonic() - began < 4  # no lease to wait for (not the 5 s wait)


def test_a_waiter_gets_the_holders_result(server: Server) -> None:
    holder, waiter = server.open(lease_ms=300), server.open(lease_ms=300)

    async def scenario() -> tuple[IdempotencyOutcome, IdempotencyOutcome]:
        async def slow() -> Any:
            await asyncio.sleep(1.0)  # longer than the lease: it is renewed meanwhile
            return {"from": "holder"}

        async def never() -> Any:
            raise AssertionError("the waiter ran the handler")

        first = asyncio.ensure_future(
            holder.run_once("db_write", "r-1", fingerprint("r-1"), 60_000, slow))
        await asyncio.sleep(0.1)
        second = await waiter.run_once("db_write", "r-1", fingerprint("r-1"), 60_000, never,
                                       wait_timeout_ms=5000)
        return await first, second

    first, second = asyncio.run(scenario())
    assert first == IdempotencyOutcome({"from": "holder"}, replayed=False)
    assert second == IdempotencyOutcome({"from": "holder"}, replayed=True)


class Proxy:
    """A TCP relay on 127.0.0.1 to the server: stopping it is, for the store, the server going
    away (every open connection drops, new ones are refused); starting it again on the same
    port is the server coming back."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        assert self._listener is not None
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._listener.close()
        for end in self._open:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()
        self._open.clear()


def test_a_server_restart_fails_the_calls_in_flight_and_the_next_ones_recover(
        server: Server) -> None:
    parts = urlsplit(server.url)
    proxy = Proxy((parts.hostname or "127.0.0.1", parts.port or 0))
    proxy.start()
    user = f"{parts.username}@" if parts.username else ""
    server.url = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))
    store = server.open()
    assert run(store, "r-1", {"n": 1}).replayed is False

    async def in_flight() -> IdempotencyOutcome:
        async def compute() -> Any:
            proxy.stop()  # the server goes away while the handler runs
            return {"n": 2}

        return await store.run_once("db_write", "r-2", fingerprint("r-2"), 60_000, compute)

    with pytest.raises(StoreError) as caught:
        asyncio.run(in_flight())
    assert caught.value.code == "TOOL_IDEMPOTENCY_STORE_FAILED"
    assert caught.value.retryable is False  # the tool ran: running it again repeats it
    message = caught.value.message
    assert message.startswith(
        "Tool 'db_write' ran for idempotency key 'r-2', but its result was not recorded: "
        f"idempotency store {server.shown} cannot be used: ")
    assert message.endswith(". A later call with this key will run the tool again.")
    assert "\n" not in message
    # while it is away, a call fails before its handler runs, and says so (retryable)
    with pytest.raises(StoreError) as caught:
        run(store, "r-3", {"n": 3})
    assert caught.value.retryable is True
    assert caught.value.message.startswith(
        f"Tool 'db_write' did not run for idempotency key 'r-3': idempotency store "
        f"{server.shown} cannot be used: ")
    proxy.start()  # back on the same port: the next calls reconnect
    try:
        assert run(store, "r-1", {"n": 9}) == IdempotencyOutcome({"n": 1}, replayed=True)
        assert run(store, "r-3", {"n": 3}) == IdempotencyOutcome({"n": 3}, replayed=False)
    finally:
        proxy.stop()


@pytest.mark.parametrize(("backend", "url", "shown"), [
    ("postgres", "postgresql://u:hunter2@127.0.0.1:9/x", "postgres table 'luma_idempotency'"),
    ("redis", "redis://u:hunter2@127.0.0.1:9/0", "redis prefix 'luma:idem:'"),
])
def test_a_server_that_does_not_answer_is_a_start_error(backend: str, url: str,
                                                        shown: str) -> None:
    with pytest.raises(StoreStartupError) as caught:
        open_idempotency_store(backend, base_dir=".", url_env="STORE_URL",
                               environ={"STORE_URL": url})
    assert caught.value.code == "IDEMPOTENCY_STORE_UNAVAILABLE"
    assert caught.value.message.startswith(f"Idempotency store {shown} cannot be used: ")
    assert "hunter2" not in caught.value.message
    assert "\n" not in caught.value.message


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"backend": "postgres"}, 'idempotency_store.backend "postgres" needs "url": {"env": '
     '"NAME"}, the environment variable that holds the server\'s URL.'),
    ({"backend": "postgres", "url_env": "NOPE"},
     "idempotency_store.url: the environment variable NOPE is not set."),
    ({"backend": "postgres", "url_env": "STORE_URL", "table": "x; drop"},
     "idempotency_store.table 'x; drop' is not a table name (letters, digits and '_', "
     "optionally 'schema.table')."),
    ({"backend": "file", "table": "t"},
     'idempotency_store.table applies only to the "postgres" backend.'),
    ({"backend": "memory", "url_env": "STORE_URL"},
     'idempotency_store.url applies only to the "postgres" and "redis" backends.'),
    ({"backend": "redis", "url_env": "STORE_URL", "table": "t"},
     'idempotency_store.table does not apply to the "redis" backend.'),
    ({"backend": "redis", "url_env": "STORE_URL", "prefix": "has space"},
     'idempotency_store.prefix "has space" must be 1 to 200 printable characters without '
     "spaces."),
    ({"backend": "redis", "url_env": "STORE_URL", "lease_ms": 5},
     "idempotency_store.lease_ms must be at least 100, got 5."),
])
def test_config_mistakes_are_start_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(StoreStartupError) as caught:
        open_idempotency_store(base_dir=".", environ={"STORE_URL": PG_URL}, **kwargs)
    assert caught.value.message == message


def test_encryption_leaves_no_input_or_result_in_clear_text(server: Server) -> None:
    store = server.open(encrypted=True)
    key, secret_result = "order-7f3a", {"card": "4242-secret-result"}
    assert run(store, key, secret_result).replayed is False
    raw = server.raw()
    assert key not in raw and "4242" not in raw and "request_id" not in raw
    assert fingerprint(key) not in raw
    # another worker with the key replays it; a worker with another key cannot start
    assert run(server.open(encrypted=True), key, {}) == IdempotencyOutcome(secret_result, True)
    with pytest.raises(StoreStartupError) as caught:
        server.open(encrypted=True, secret="another-key")
    assert caught.value.message == (
        f"Idempotency store {server.shown} cannot be decrypted: "
        "LUMA_IDEMPOTENCY_KEY is not the key it was written with.")


SAVE = """\
    schema Saved { id: string }
    tool save(request_id: string) -> Saved {
      description: "Save once per request id."
      side_effects: "write"
      idempotent: true
      idempotency_key: request_id
    }
    tool save({ request_id: "r-1" })
    """


def test_a_program_configured_with_a_shared_store_runs_its_write_once(server: Server,
                                                                      tmp_path: Path) -> None:
    from cli_runner import luma
    from run_programs import assert_no_traceback, write_program

    runs = tmp_path / "runs.txt"
    prog, tools = write_program(tmp_path, SAVE, f"""\
        def save(input):
            with open({str(runs)!r}, "a") as f:
                f.write("ran\\n")
            return {{"id": "saved-" + input["request_id"]}}
        """)
    place = {"table" if server.backend == "postgres" else "prefix": server.where}
    (tmp_path / "luma.config.json").write_text(json.dumps({"idempotency_store": {
        "backend": server.backend, "url": {"env": "STORE_URL"}, **place}}))
    for _ in range(2):
        done = luma(prog, "--tool-module", tools, cwd=tmp_path, env={"STORE_URL": server.url})
        assert (done.code, done.stderr) == (0, ""), done.stderr
        assert json.loads(done.stdout) == {"id": "saved-r-1"}
    assert runs.read_text() == "ran\n"
    # the variable unset: the program does not start, and the message names the variable
    done = luma(prog, "--tool-module", tools, cwd=tmp_path)
    assert done.code == 2
    assert_no_traceback(done.stderr)
    assert "idempotency_store.url: the environment variable STORE_URL is not set." in done.stderr
