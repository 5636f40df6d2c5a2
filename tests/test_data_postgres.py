"""The built-in postgres bridge against a real PostgreSQL server (DATA.md §2-§4).

The server is ``LUMA_TEST_POSTGRES_URL`` (default: the one ``compose.yaml`` starts). Each test
works in a schema of its own, dropped afterwards."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from cli_runner import luma
from pg_server import pg_admin

URL = os.environ.get("LUMA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[tuple[str, psycopg.Connection]]:
    """A URL whose connections work in a fresh schema, and an admin connection."""
    admin = pg_admin(URL)
    schema = f"luma_test_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE SCHEMA "{schema}"')
    joiner = "&" if "?" in URL else "?"
    url = f"{URL}{joiner}options={quote(f'-csearch_path={schema}')}"
    try:
        yield url, admin
    finally:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        admin.close()


def project(tmp: Path, url: str, program: str, setup: str, admin: psycopg.Connection,
            *, config: object | None = None) -> dict[str, str]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(setup)
    (tmp / "ledger.luma").write_text(program)
    (tmp / "luma.config.json").write_text(json.dumps(config or {
        "datasources": {"Ledger": {"driver": "postgres", "url": {"env": "LEDGER_URL"}}}}))
    return {"LEDGER_URL": url}


def errors(stderr: str) -> str:
    lines = stderr.splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if line.startswith("error")), len(lines))
    return "".join(lines[first:])


TYPES_SQL = """
CREATE TABLE things (
  id uuid PRIMARY KEY, price numeric(10, 2), count numeric, day date, at timestamptz,
  clock time, doc jsonb, raw json, blob bytea, label text, whole bigint, ratio double precision
);
INSERT INTO things VALUES
  ('9b2e1c4a-8f3d-4a6b-9c1e-2d3f4a5b6c7d', 12.50, 12, '2024-02-29', '2024-02-29T10:11:12+00',
   '08:30:00', '{"a": [1, 2]}', '[true, null]', '\\x00ff', 'x', 9007199254740991, 0.25);
"""

TYPES_LUMA = """\
schema Thing {
  id: string
  price: float
  count: int
  day: string @format("date")
  at: string
  clock: string
  doc: map[int[]]
  raw: any
  label: string
  whole: int
  ratio: float
}
schema Blob { blob: string }
datasource Ledger { description: "The ledger.", timeout: 5000 }

query things() -> Thing[] {
  datasource: Ledger
  sql: "SELECT id, price, count, day, at AT TIME ZONE 'UTC' AS at, clock, doc, raw, label, whole, ratio FROM things"
}
query blob() -> Blob {
  datasource: Ledger
  sql: "SELECT blob FROM things"
}
"""


def test_values_become_json(pg: tuple[str, psycopg.Connection], tmp_path: Path) -> None:
    url, admin = pg
    env = project(tmp_path, url, TYPES_LUMA + "tool things({})\n", TYPES_SQL, admin)
    result = luma("ledger.luma", cwd=tmp_path, env=env)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == [{
        "id": "9b2e1c4a-8f3d-4a6b-9c1e-2d3f4a5b6c7d", "price": 12.5, "count": 12,
        "day": "2024-02-29", "at": "2024-02-29T10:11:12", "clock": "08:30:00",
        "doc": {"a": [1, 2]}, "raw": [True, None], "label": "x", "whole": 9007199254740991,
        "ratio": 0.25}]
    (tmp_path / "ledger.luma").write_text(TYPES_LUMA + "tool blob({})\n")
    result = luma("ledger.luma", cwd=tmp_path, env=env)
    assert result.code == 1, result.stderr
    assert errors(result.stderr).startswith(
        "error[TOOL_OUTPUT_INVALID]: blob.output.blob: a bytes value has no JSON form; convert "
        "it in the SQL (e.g. to text).\n"), result.stderr


LEDGER_LUMA = """\
schema Payment { id: string, amount: float, note: string }
datasource Ledger { description: "The ledger." }

command record(id: string, amount: float, note: string) -> Payment {
  datasource: Ledger
  sql: "INSERT INTO payments (id, amount, note) VALUES (:id, :amount, :note) RETURNING id, amount, note"
  idempotent: true
  idempotency_key: id
}
command forget(below: float) {
  datasource: Ledger
  sql: "DELETE FROM payments WHERE amount < :below"
}
query payments(min: float) -> Payment[] {
  datasource: Ledger
  sql: "SELECT id, amount::float8 AS amount, note FROM payments WHERE amount >= :min ORDER BY id"
}
"""


def test_placeholders_are_bound_never_pasted(pg: tuple[str, psycopg.Connection],
                                             tmp_path: Path) -> None:
    url, admin = pg
    evil = "x'); DROP TABLE payments; --"
    program = LEDGER_LUMA + f"""\
a = tool record({{ id: "p1", amount: 10, note: {json.dumps(evil)} }})
b = tool record({{ id: "p2", amount: 1, note: "50% off :note ::text" }})
c = tool forget({{ below: 5 }})
{{ a: a, c: c, rows: tool payments({{ min: 0 }}) }}
"""
    env = project(tmp_path, url, program,
                  "CREATE TABLE payments (id text PRIMARY KEY, amount numeric, note text)", admin)
    result = luma("ledger.luma", cwd=tmp_path, env=env)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "a": {"id": "p1", "amount": 10, "note": evil},
        "c": {"rows_affected": 1},
        "rows": [{"id": "p1", "amount": 10.0, "note": evil}]}


SLOW_LUMA = """\
schema Slept { slept: string }
datasource Ledger { description: "The ledger." }

query nap() -> Slept {
  datasource: Ledger
  timeout: 200
  sql: "SELECT pg_sleep(10)::text AS slept"
}
query nap_untimed() -> Slept {
  datasource: Ledger
  sql: "SELECT pg_sleep(10)::text AS slept"
}
agent Sleeper {
  tool_timeout: 200
  tools: [nap_untimed]
  fn run() -> Slept {
    tool nap_untimed({})
  }
}
"""


def _sleeping(admin: psycopg.Connection) -> list[tuple[object, ...]]:
    return admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE "
        "'%pg_sleep(10)%' AND pid <> pg_backend_pid()").fetchall()


@pytest.mark.parametrize("how", ["the query's own timeout", "the agent's tool_timeout"])
def test_a_slow_statement_ends_at_its_timeout_on_the_server(
        pg: tuple[str, psycopg.Connection], tmp_path: Path, how: str) -> None:
    url, admin = pg
    statement = "tool nap({})\n" if how == "the query's own timeout" else ""
    env = project(tmp_path, url, SLOW_LUMA + statement, "SELECT 1", admin)
    args = ["ledger.luma"] + (["--agent", "Sleeper"] if not statement else [])
    started = time.monotonic()
    result = luma(*args, cwd=tmp_path, env=env)
    elapsed = time.monotonic() - started
    name = "nap" if statement else "nap_untimed"
    assert result.code == 1, result.stderr
    assert errors(result.stderr).startswith(
        f"error[TOOL_TIMEOUT]: Tool '{name}' timed out after 200 ms.\n"), result.stderr
    assert elapsed < 8, elapsed  # not pg_sleep's 10 s (Python start-up included)
    deadline = time.monotonic() + 2
    while _sleeping(admin) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sleeping(admin) == []


def test_the_statement_timeout_itself_is_about_200_ms(pg: tuple[str, psycopg.Connection],
                                                     tmp_path: Path) -> None:
    url, admin = pg
    from luma.data.postgres import PostgresBridge
    from luma.data.bridges import StatementTimedOut

    bridge = PostgresBridge.open("Ledger", url, 1)
    try:
        started = time.monotonic()
        with pytest.raises(StatementTimedOut):
            bridge.execute("SELECT pg_sleep(10)", {}, None, 200)
        assert 0.15 < time.monotonic() - started < 1.5
        assert bridge.execute("SELECT 1 AS one", {}, None, 200) == ([{"one": 1}], 1)
    finally:
        bridge.close()


def test_an_unreachable_database_is_a_start_error_without_its_password(tmp_path: Path) -> None:
    password = "pw-7d1e0c9b"
    url = f"postgresql://luma:{password}@127.0.0.1:9/ledger"
    (tmp_path / "ledger.luma").write_text(LEDGER_LUMA + 'tool payments({ min: 0 })\n')
    (tmp_path / "luma.config.json").write_text(json.dumps(
        {"datasources": {"Ledger": {"driver": "postgres", "url": {"env": "LEDGER_URL"}}}}))
    result = luma("ledger.luma", "--verbose", "--trace", "t.jsonl", cwd=tmp_path,
                  env={"LEDGER_URL": url})
    assert result.code == 2, result.stderr
    assert errors(result.stderr).startswith(
        "error: datasource 'Ledger' (postgres) cannot connect: connection failed: "), result.stderr
    assert "refused" in result.stderr
    everything = result.stdout + result.stderr + "".join(
        p.read_text() for p in tmp_path.iterdir() if p.is_file())
    assert password not in everything
    assert url not in everything


def test_a_url_variable_that_is_not_set(tmp_path: Path) -> None:
    (tmp_path / "ledger.luma").write_text(LEDGER_LUMA + 'tool payments({ min: 0 })\n')
    (tmp_path / "luma.config.json").write_text(json.dumps(
        {"datasources": {"Ledger": {"driver": "postgres", "url": {"env": "LUMA_NO_SUCH_URL"}}}}))
    result = luma("ledger.luma", cwd=tmp_path)
    assert result.code == 2, result.stderr
    assert errors(result.stderr) == ("error: datasource 'Ledger': the environment variable "
                                     "LUMA_NO_SUCH_URL (its url) is not set.\n")


def test_a_url_written_in_the_config_is_refused_and_not_shown(tmp_path: Path) -> None:
    url = "postgresql://luma:pw-0a9b8c@127.0.0.1/ledger"
    (tmp_path / "ledger.luma").write_text(LEDGER_LUMA + 'tool payments({ min: 0 })\n')
    (tmp_path / "luma.config.json").write_text(json.dumps(
        {"datasources": {"Ledger": {"driver": "postgres", "url": url}}}))
    result = luma("ledger.luma", cwd=tmp_path)
    assert result.code == 2, result.stderr
    assert "datasources.Ledger.url: must be {\"env\": \"NAME\"}" in result.stderr
    assert "pw-0a9b8c" not in result.stderr + result.stdout


def test_the_signal_cancels_the_running_statement(pg: tuple[str, psycopg.Connection]) -> None:
    import threading

    from luma.data.bridges import StatementCancelled
    from luma.data.postgres import PostgresBridge
    from luma.runtime.signal import Signal, fire

    url, admin = pg
    bridge = PostgresBridge.open("Ledger", url, 2)
    signal = Signal()
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            bridge.execute("SELECT pg_sleep(10)", {}, signal, None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=call)
    try:
        worker.start()
        deadline = time.monotonic() + 5
        while not _sleeping(admin) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _sleeping(admin), "the statement never started"
        started = time.monotonic()
        fire(signal, "cancelled")
        worker.join(5)
        assert time.monotonic() - started < 1
        assert [type(e) for e in outcome] == [StatementCancelled]
        assert _sleeping(admin) == []
        # the connection went back to the pool and still works
        assert bridge.execute("SELECT 2 AS two", {}, None, None) == ([{"two": 2}], 1)
    finally:
        bridge.close()


@pytest.mark.parametrize("when", ["while it runs", "as it begins"])
def test_closing_the_bridge_cancels_a_running_statement_before_closing_its_connection(
        pg: tuple[str, psycopg.Connection], when: str) -> None:
    # A run that gave up on a statement closes its bridge while the statement's thread still
    # holds the connection: the statement is cancelled on the server (again and again, for one
    # that had not begun when the close came), and its connection closes once it is done.
    import threading

    from luma.data.bridges import StatementCancelled
    from luma.data.postgres import PostgresBridge

    url, admin = pg
    bridge = PostgresBridge.open("Ledger", url, 2)
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            bridge.execute("SELECT pg_sleep(10)", {}, None, None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    deadline = time.monotonic() + 5
    if when == "while it runs":
        while not _sleeping(admin) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _sleeping(admin), "the statement never started"
    else:
        while not bridge._pool._busy_conns and time.monotonic() < deadline:
            time.sleep(0.001)
    bridge.close()
    worker.join(5)
    assert not worker.is_alive()
    assert [type(e) for e in outcome] == [StatementCancelled]
    assert bridge._pool.open_now == 0
    deadline = time.monotonic() + 2
    while _sleeping(admin) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sleeping(admin) == []
