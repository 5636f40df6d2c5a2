"""Queries and commands on the built-in sqlite bridge and on a module's own bridges, run as a
user runs them (the ``luma`` command in a folder of its own): DATA.md §1-§4."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from cli_runner import luma

SHOP_SQL = """\
CREATE TABLE customers (id TEXT PRIMARY KEY, name TEXT NOT NULL, total NUMERIC NOT NULL,
                        since DATE NOT NULL, tags JSON, photo BLOB);
INSERT INTO customers VALUES ('c1', 'Ada', 120.50, '2024-01-02', '["vip"]', NULL),
                             ('c2', 'Bob', 80, '2023-05-06', '[]', X'00ff');
CREATE TABLE payments (id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, amount REAL NOT NULL);
"""

DECLS = """\
schema Customer {
  id: string
  name: string
  total: float
  since: string @format("date")
  tags: string[]
}
schema Name { id: string, name: string }

datasource Shop { description: "The shop.", timeout: 2000 }

query top(min_total: float @range(0, null), limit?: int @default(10)) -> Customer[] {
  description: "The biggest customers first."
  datasource: Shop
  sql: \"\"\"
    SELECT id, name, total, since, tags FROM customers
    WHERE total >= :min_total ORDER BY total DESC LIMIT :limit
  \"\"\"
  cache: true
}

query customer(id: string) -> Name {
  description: "One customer."
  datasource: Shop
  sql: "SELECT id, name FROM customers WHERE id = :id OR :id = '*'"
}

command pay(request_id: string, customer_id: string, amount: float) {
  description: "Record a payment. Changes data."
  datasource: Shop
  sql: "INSERT INTO payments (id, customer_id, amount) VALUES (:request_id, :customer_id, :amount)"
  idempotent: true
  idempotency_key: request_id
}
"""

CONFIG = {"datasources": {"Shop": {"driver": "sqlite", "path": "shop.db", "init": "shop.sql"}}}


def project(tmp: Path, statements: str, *, decls: str = DECLS, config: object = CONFIG,
            sql: str = SHOP_SQL, files: dict[str, str] | None = None) -> Path:
    (tmp / "shop.sql").write_text(sql)
    (tmp / "shop.luma").write_text(decls + "\n" + statements)
    if config is not None:
        (tmp / "luma.config.json").write_text(json.dumps(config))
    for name, text in (files or {}).items():
        (tmp / name).write_text(text)
    return tmp


def errors(stderr: str) -> str:
    """stderr from its first error on (the checker's warnings come before)."""
    lines = stderr.splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if line.startswith("error")), len(lines))
    return "".join(lines[first:])


def run(tmp: Path, *args: str) -> tuple[int, object, str]:
    result = luma("shop.luma", *args, cwd=tmp)
    out = json.loads(result.stdout) if result.code == 0 else None
    return result.code, out, errors(result.stderr)


def test_rows_come_back_typed_and_a_command_counts_rows(tmp_path: Path) -> None:
    project(tmp_path, """\
rows = tool top({ min_total: 50 })
paid = tool pay({ request_id: "r1", customer_id: "c1", amount: 3.5 })
one = tool customer({ id: "c2" })
{ rows: rows, paid: paid, one: one }
""")
    code, out, err = run(tmp_path)
    assert code == 0, err
    assert out == {
        "rows": [{"id": "c1", "name": "Ada", "total": 120.5, "since": "2024-01-02",
                  "tags": ["vip"]},
                 {"id": "c2", "name": "Bob", "total": 80, "since": "2023-05-06", "tags": []}],
        "paid": {"rows_affected": 1},
        "one": {"id": "c2", "name": "Bob"},
    }
    db = sqlite3.connect(tmp_path / "shop.db")
    assert db.execute("SELECT * FROM payments").fetchall() == [("r1", "c1", 3.5)]


def test_an_injection_string_is_stored_as_text(tmp_path: Path) -> None:
    evil = "r1'); DROP TABLE customers; --"
    project(tmp_path, f"""\
tool pay({{ request_id: {json.dumps(evil)}, customer_id: "c1", amount: 1 }})
tool top({{ min_total: 0 }})
""")
    code, out, err = run(tmp_path)
    assert code == 0, err
    assert len(out) == 2  # type: ignore[arg-type]  # the customers table is still there
    db = sqlite3.connect(tmp_path / "shop.db")
    assert db.execute("SELECT id FROM payments").fetchall() == [(evil,)]


def test_exactly_one_row(tmp_path: Path) -> None:
    project(tmp_path, 'tool customer({ id: "nobody" })\n')
    code, _, err = run(tmp_path)
    assert code == 1, err
    assert err.startswith("error[TOOL_OUTPUT_INVALID]: Query 'customer' returned no row; "
                          "exactly one was expected.\n"), err
    project(tmp_path, 'tool customer({ id: "*" })\n')
    code, _, err = run(tmp_path)
    assert code == 1, err
    assert err.startswith("error[TOOL_OUTPUT_INVALID]: Query 'customer' returned 2 rows; "
                          "exactly one was expected.\n"), err


def test_every_row_is_validated_and_the_message_names_row_and_column(tmp_path: Path) -> None:
    sql = SHOP_SQL + "INSERT INTO customers VALUES ('c3', 'Cy', 'lots', '2022-01-01', '[]', NULL);"
    project(tmp_path, "tool top({ min_total: 0 })\n", sql=sql)
    code, _, err = run(tmp_path)
    assert code == 1, err
    # text sorts after numbers in SQLite: 'lots' is the first row
    assert err.startswith("error[TOOL_OUTPUT_INVALID]: top.output[0].total: expected float, got "
                          "string\n"), err


def test_a_column_the_schema_does_not_declare_is_an_error(tmp_path: Path) -> None:
    decls = DECLS.replace('sql: "SELECT id, name FROM customers WHERE id = :id OR :id = \'*\'"',
                          'sql: "SELECT id, name, total FROM customers WHERE id = :id"')
    project(tmp_path, 'tool customer({ id: "c1" })\n', decls=decls)
    code, _, err = run(tmp_path)
    assert code == 1, err
    assert err.startswith("error[TOOL_OUTPUT_INVALID]: customer.output: unknown field 'total'\n"), \
        err


def test_a_value_with_no_json_form_names_its_column(tmp_path: Path) -> None:
    decls = DECLS.replace("schema Name { id: string, name: string }",
                          "schema Name { id: string, name: string, photo?: string }").replace(
        'sql: "SELECT id, name FROM customers WHERE id = :id OR :id = \'*\'"',
        'sql: "SELECT id, name, photo FROM customers WHERE id = :id"')
    project(tmp_path, 'tool customer({ id: "c2" })\n', decls=decls)
    code, _, err = run(tmp_path)
    assert code == 1, err
    assert err.startswith("error[TOOL_OUTPUT_INVALID]: customer.output.photo: a bytes value has "
                          "no JSON form; convert it in the SQL (e.g. to text).\n"), err


def test_input_is_validated_before_the_database_is_asked(tmp_path: Path) -> None:
    project(tmp_path, "totals = [-1]\ntool top({ min_total: totals[0] })\n")
    code, _, err = run(tmp_path)
    assert code == 1, err
    assert err.startswith("error[TOOL_INPUT_INVALID]: top.input.min_total:"), err


def test_a_command_is_a_write_for_deny_write(tmp_path: Path) -> None:
    project(tmp_path, """\
agent Reader {
  tool_policy: "deny_write"
  tools: [top, pay]
  fn run() -> any {
    rows = tool top({ min_total: 100 })
    tool pay({ request_id: "r1", customer_id: "c1", amount: 1 })
  }
}
""")
    code, _, err = run(tmp_path)
    assert code == 1, err
    assert err.startswith("error[TOOL_PERMISSION_DENIED]: Tool 'pay' is a write tool and agent "
                          "'Reader' has tool_policy deny_write.\n"), err
    db = sqlite3.connect(tmp_path / "shop.db")
    assert db.execute("SELECT count(*) FROM payments").fetchone() == (0,)


def test_queries_are_cached_and_commands_are_idempotent(tmp_path: Path) -> None:
    project(tmp_path, """\
a = tool top({ min_total: 100 })
b = tool top({ min_total: 100 })
p1 = tool pay({ request_id: "req-7f3a", customer_id: "c1", amount: 1.25 })
p2 = tool pay({ request_id: "req-7f3a", customer_id: "c1", amount: 1.25 })
{ a: a, b: b, p1: p1, p2: p2 }
""")
    code, out, err = run(tmp_path, "--trace", "trace.jsonl")
    assert code == 0, err
    assert out["p1"] == out["p2"] == {"rows_affected": 1}  # type: ignore[index]
    events = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    calls = [e for e in events if e["event"] == "tool.call"]
    assert [(c["tool"], c["cache"], c["idempotent_replay"]) for c in calls] == [
        ("top", "miss", False), ("top", "hit", False), ("pay", "off", False),
        ("pay", "off", True)]
    assert [(c["tool"], c["datasource"], c["rows"]) for c in calls] == [
        ("top", "Shop", 1), ("top", "Shop", 1), ("pay", "Shop", 1), ("pay", "Shop", 1)]
    # the trace never holds parameter values
    text = (tmp_path / "trace.jsonl").read_text()
    assert "req-7f3a" not in text and "1.25" not in text
    db = sqlite3.connect(tmp_path / "shop.db")
    assert db.execute("SELECT count(*) FROM payments").fetchone() == (1,)


def test_a_failing_statement_rolls_back_and_says_why(tmp_path: Path) -> None:
    project(tmp_path, """\
tool pay({ request_id: "r1", customer_id: "c1", amount: 1 })
tool pay({ request_id: "r2", amount: 1 })
""", decls=DECLS.replace("customer_id: string, amount", "customer_id?: string, amount"))
    code, _, err = run(tmp_path)
    assert code == 1, err
    assert err.startswith("error[TOOL_FAILED]: Tool 'pay' failed: NOT NULL "
                          "constraint failed: payments.customer_id\n"), err
    db = sqlite3.connect(tmp_path / "shop.db")
    assert db.execute("SELECT id FROM payments").fetchall() == [("r1",)]


def test_a_slow_query_times_out_and_is_interrupted(tmp_path: Path) -> None:
    decls = DECLS + """
schema Count { n: int }
query slow(n: int) -> Count {
  description: "Counts for a long time."
  datasource: Shop
  timeout: 200
  sql: \"\"\"
    WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < :n)
    SELECT count(*) AS n FROM r
  \"\"\"
}
"""
    project(tmp_path, "tool slow({ n: 1000000000 })\n", decls=decls)
    import time

    started = time.monotonic()
    code, _, err = run(tmp_path)
    assert code == 1, err
    assert err.startswith("error[TOOL_TIMEOUT]: Tool 'slow' timed out after 200 ms.\n"), err
    assert time.monotonic() - started < 5


def test_a_datasource_without_a_bridge_stops_the_program(tmp_path: Path) -> None:
    project(tmp_path, 'tool customer({ id: "c1" })\n', config=None)
    code, _, err = run(tmp_path)
    assert code == 2, err
    assert err == "error: datasource 'Shop' has no registered bridge.\n"
    assert not (tmp_path / "shop.db").exists()


def test_a_config_entry_for_an_undeclared_datasource_stops_the_program(tmp_path: Path) -> None:
    config = {"datasources": {**CONFIG["datasources"],
                              "Shp": {"driver": "sqlite", "path": ":memory:"}}}
    project(tmp_path, 'tool customer({ id: "c1" })\n', config=config)
    code, _, err = run(tmp_path)
    assert code == 2, err
    assert err == ("error: datasources.Shp in luma.config.json names no datasource of the "
                   "program; did you mean 'Shop'?\n")


def test_a_broken_init_script_stops_the_program(tmp_path: Path) -> None:
    project(tmp_path, 'tool customer({ id: "c1" })\n', sql="CREATE TABLE (;")
    code, _, err = run(tmp_path)
    assert code == 2, err
    assert err.startswith("error: datasource 'Shop' (sqlite): its init script shop.sql failed: "
                          'near "(": syntax error'), err
    assert not (tmp_path / "shop.db").exists()  # created by Luma, so removed: the next run retries
    (tmp_path / "shop.db").write_text("")  # a database that exists is never filled again
    code, _, err = run(tmp_path)
    assert code == 1, err
    assert "no such table: customers" in err
    assert (tmp_path / "shop.db").exists()


def test_a_module_handler_for_a_query_is_refused(tmp_path: Path) -> None:
    project(tmp_path, 'tool customer({ id: "c1" })\n',
            files={"tools.py": "def customer(input):\n    return {'id': 'x', 'name': 'y'}\n"})
    result = luma("shop.luma", "--tool-module", "tools.py", cwd=tmp_path)
    assert result.code == 2, result.stderr
    assert errors(result.stderr) == ("error: 'customer' is a query: its handler is the bridge of "
                                     "its datasource; it takes no other handler.\n")


BRIDGES = """\
import asyncio
import sqlite3
from luma.data import placeholders

seen = []

def sync_bridge(sql, params):
    text, values = placeholders(sql, "qmark", params)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (id TEXT, name TEXT)")
    db.execute("INSERT INTO t VALUES ('a', 'from sync')")
    cur = db.execute(text.replace("customers", "t"), values)
    return [dict(zip([d[0] for d in cur.description], row)) for row in cur.fetchall()]

async def async_bridge(sql, params, signal):
    await asyncio.sleep(0)
    if sql.lstrip().startswith("INSERT"):
        return 1 if not signal.aborted else 0
    return [{"id": params["id"], "name": "from async"}]

def sync_with_signal(sql, params, signal):
    return [{"id": params["id"], "name": "aborted" if signal.aborted else "from sync+signal"}]

async def async_without_signal(sql, params):
    return [{"id": params["id"], "name": "from async"}]

datasources = {"Shop": sync_bridge, "Ledger": async_bridge, "Archive": sync_with_signal,
               "Cache": async_without_signal}
"""

BRIDGE_DECLS = """\
schema Name { id: string, name: string }
datasource Shop { description: "Local." }
datasource Ledger { description: "Remote." }
datasource Archive { description: "Old rows." }
datasource Cache { description: "Fast rows." }

query archived(id: string) -> Name {
  datasource: Archive
  sql: "SELECT id, name FROM archive WHERE id = :id"
}
query cached(id: string) -> Name {
  datasource: Cache
  sql: "SELECT id, name FROM cache WHERE id = :id"
}
query customer(id: string) -> Name {
  datasource: Shop
  sql: "SELECT id, name FROM customers WHERE id = :id"
}
query account(id: string) -> Name {
  datasource: Ledger
  sql: "SELECT id, name FROM accounts WHERE id = :id"
}
command note(id: string) {
  datasource: Ledger
  sql: "INSERT INTO notes (id) VALUES (:id)"
}
"""


def test_a_modules_sync_and_async_bridges(tmp_path: Path) -> None:
    project(tmp_path, """\
{ a: tool customer({ id: "a" }), b: tool account({ id: "x" }), c: tool note({ id: "n" }),
  d: tool archived({ id: "d" }), e: tool cached({ id: "e" }) }
""", decls=BRIDGE_DECLS, config=None, files={"tools.py": BRIDGES})
    result = luma("shop.luma", "--tool-module", "tools.py", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == {"a": {"id": "a", "name": "from sync"},
                                         "b": {"id": "x", "name": "from async"},
                                         "c": {"rows_affected": 1},
                                         "d": {"id": "d", "name": "from sync+signal"},
                                         "e": {"id": "e", "name": "from async"}}


def test_a_bridge_that_returns_garbage(tmp_path: Path) -> None:
    bad = ("datasources = {'Shop': lambda sql, params: 'rows', 'Ledger': lambda sql, params: [1],"
           " 'Archive': lambda sql, params: [], 'Cache': lambda sql, params: []}\n")
    project(tmp_path, 'tool customer({ id: "a" })\n', decls=BRIDGE_DECLS, config=None,
            files={"tools.py": bad})
    result = luma("shop.luma", "--tool-module", "tools.py", cwd=tmp_path)
    assert result.code == 1, result.stderr
    assert errors(result.stderr).startswith(
        "error[TOOL_OUTPUT_INVALID]: The bridge of datasource 'Shop' returned a str for query "
        "'customer'; expected a list of rows (dicts).\n"), result.stderr
    project(tmp_path, 'tool account({ id: "a" })\n', decls=BRIDGE_DECLS, config=None,
            files={"tools.py": bad})
    result = luma("shop.luma", "--tool-module", "tools.py", cwd=tmp_path)
    assert result.code == 1, result.stderr
    assert errors(result.stderr).startswith(
        "error[TOOL_OUTPUT_INVALID]: account.output: the bridge of datasource 'Ledger' returned "
        "an int as a row; expected a dict of column names to values.\n"), result.stderr


def test_a_datasources_export_that_is_not_a_dict(tmp_path: Path) -> None:
    project(tmp_path, 'tool customer({ id: "a" })\n', decls=BRIDGE_DECLS, config=None,
            files={"tools.py": "datasources = ['Shop']\n"})
    result = luma("shop.luma", "--tool-module", "tools.py", cwd=tmp_path)
    assert result.code == 2, result.stderr
    assert "exports 'datasources' as a list value; it must be a dict of datasource names to " \
        "bridges." in result.stderr, result.stderr


def test_a_memory_database_serves_every_call_of_the_run(tmp_path: Path) -> None:
    config = {"datasources": {"Shop": {"driver": "sqlite", "path": ":memory:",
                                       "init": "shop.sql"}}}
    project(tmp_path, """\
agent Clerk {
  tool_concurrency: 4
  tools: [pay, top]
  fn run() -> any {
    tool pay({ request_id: "r1", customer_id: "c1", amount: 1 })
    tool top({ min_total: 0 })
  }
}
""", config=config)
    code, out, err = run(tmp_path)
    assert code == 0, err
    assert [r["id"] for r in out] == ["c1", "c2"]  # type: ignore[union-attr]
    assert not (tmp_path / ":memory:").exists()


def test_export_shows_parameters_and_description_never_the_sql(tmp_path: Path) -> None:
    project(tmp_path, 'tool customer({ id: "c1" })\n')
    for provider in ("openai", "anthropic", "gemini"):
        result = luma("export", "shop.luma", "--provider", provider, cwd=tmp_path)
        assert result.code == 0, result.stderr
        assert "The biggest customers first." in result.stdout
        assert "min_total" in result.stdout and "record_payment" not in result.stdout
        assert "SELECT" not in result.stdout and "INSERT" not in result.stdout
        assert "FROM customers" not in result.stdout and ":min_total" not in result.stdout


def test_a_model_calls_a_query_natively(tmp_path: Path) -> None:
    project(tmp_path, """\
schema Answer { names: string[] }
agent Analyst {
  tools: [top, pay]
  tool_policy: "deny_write"
  fn run() -> Answer {
    ask "Who are the biggest customers?" -> Answer
  }
}
""")
    result = luma("shop.luma", "--trace", "trace.jsonl", cwd=tmp_path)
    assert result.code == 0, result.stderr
    events = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    native = [(e["tool"], e["mode"], e["outcome"]) for e in events if e["event"] == "tool.call"]
    assert ("top", "native", "ok") in native
    assert ("pay", "native", "TOOL_PERMISSION_DENIED") in native or \
        all(t != "pay" for t, _, _ in native)
    assert [(e["datasource"], e["rows"]) for e in events
            if e["event"] == "tool.call" and e["tool"] == "top"] == [("Shop", 2)]
    db = sqlite3.connect(tmp_path / "shop.db")
    assert db.execute("SELECT count(*) FROM payments").fetchone() == (0,)


def test_a_command_needs_approval_under_an_approval_policy(tmp_path: Path) -> None:
    project(tmp_path, """\
agent Clerk {
  tool_policy: "approval"
  tools: [top, pay]
  fn run() -> any {
    rows = tool top({ min_total: 100 })
    tool pay({ request_id: "r1", customer_id: "c1", amount: 1 })
  }
}
""")
    result = luma("shop.luma", cwd=tmp_path)
    assert result.code == 1, result.stderr
    assert "error[TOOL_PERMISSION_DENIED]: Tool 'pay'" in result.stderr, result.stderr
    db = sqlite3.connect(tmp_path / "shop.db")
    assert db.execute("SELECT count(*) FROM payments").fetchone() == (0,)
    result = luma("shop.luma", cwd=tmp_path, env={"LUMA_APPROVED_TOOLS": "pay"})
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == {"rows_affected": 1}


FLAKY = """\
from pathlib import Path
from luma import LumaToolError

def ledger(sql, params):
    tries = Path("tries.txt")
    n = int(tries.read_text()) + 1 if tries.exists() else 1
    tries.write_text(str(n))
    if n < 3:
        raise LumaToolError("LEDGER_BUSY", "the ledger is busy", retryable=True)
    return 1

datasources = {"Ledger": ledger}
"""


def test_a_retried_command_runs_until_it_succeeds(tmp_path: Path) -> None:
    decls = """\
datasource Ledger { description: "Remote." }
command note(request_id: string) {
  datasource: Ledger
  sql: "INSERT INTO notes (id) VALUES (:request_id)"
  idempotent: true
  idempotency_key: request_id
  retries: 2
  retry_delay: 1
}
"""
    project(tmp_path, 'tool note({ request_id: "n1" })\n', decls=decls, config=None,
            files={"tools.py": FLAKY})
    result = luma("shop.luma", "--tool-module", "tools.py", "--trace", "t.jsonl", cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == {"rows_affected": 1}
    assert (tmp_path / "tries.txt").read_text() == "3"
    calls = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [c["attempts"] for c in calls if c["event"] == "tool.call"] == [3]


TYPES_SQL = """\
CREATE TABLE things (id UUID, price NUMERIC, count DECIMAL, day DATE, at TIMESTAMP,
                     doc JSON, raw JSONB, ratio REAL, whole INTEGER);
INSERT INTO things VALUES ('9b2e1c4a-8f3d-4a6b-9c1e-2d3f4a5b6c7d', 12.5, 12, '2024-02-29',
                           '2024-02-29 10:11:12', '{"a": [1, 2]}', '[true, null]', 0.25,
                           9007199254740991);
"""

TYPES_DECLS = """\
schema Thing {
  id: string
  price: float
  count: int
  day: string @format("date")
  at: string
  doc: map[int[]]
  raw: any
  ratio: float
  whole: int
}
datasource Shop { description: "The shop." }
query things() -> Thing[] {
  datasource: Shop
  sql: "SELECT id, price, count, day, at, doc, raw, ratio, whole FROM things"
}
"""


def test_sqlite_values_become_json(tmp_path: Path) -> None:
    project(tmp_path, "tool things({})\n", decls=TYPES_DECLS, sql=TYPES_SQL)
    code, out, err = run(tmp_path)
    assert code == 0, err
    assert out == [{"id": "9b2e1c4a-8f3d-4a6b-9c1e-2d3f4a5b6c7d", "price": 12.5, "count": 12,
                    "day": "2024-02-29", "at": "2024-02-29T10:11:12", "doc": {"a": [1, 2]},
                    "raw": [True, None], "ratio": 0.25, "whole": 9007199254740991}]


def test_the_pool_opens_at_most_the_agents_concurrency(tmp_path: Path) -> None:
    import threading

    from luma.data.bridges import pool_size
    from luma.data.sqlite import SqliteBridge
    from luma.syntax.parse import parse_text

    program, _ = parse_text('agent A { tool_concurrency: 3 }\nagent B { tool_concurrency: 2 }\n')
    assert program is not None and pool_size(program) == 3
    (tmp_path / "init.sql").write_text("CREATE TABLE t (x INTEGER);")
    bridge = SqliteBridge.open("Shop", "pool.db", "init.sql", tmp_path, 3)
    slow = ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 200000) "
            "SELECT count(*) AS n FROM r")
    results: list[object] = []
    workers = [threading.Thread(target=lambda: results.append(bridge.execute(slow, {}, None,
                                                                             None)))
               for _ in range(8)]
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join(30)
        assert results == [([{"n": 200000}], -1)] * 8
        assert bridge._pool.opened <= 3
    finally:
        bridge.close()


def test_closing_the_bridge_under_a_running_statement_interrupts_it_first(
        tmp_path: Path) -> None:
    # A run that gave up on a statement closes its bridge while the statement still runs in
    # its thread: the connection is interrupted, and closed only once the statement is done
    # (closing it under the statement crashed the process now and then).
    import threading
    import time

    from luma.data.sqlite import SqliteBridge
    from luma.data.statements import StatementCancelled

    bridge = SqliteBridge.open("Shop", "close.db", None, tmp_path, 2)
    endless = ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
               "SELECT count(*) AS n FROM r")
    outcome: list[BaseException] = []

    def work() -> None:
        try:
            bridge.execute(endless, {}, None, None)
        except BaseException as exc:  # what the statement ended with
            outcome.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    while bridge._pool.open_now < 1 or not bridge._pool._busy_conns:
        time.sleep(0.01)
    started = time.monotonic()
    bridge.close()
    worker.join(5)
    assert time.monotonic() - started < 2.5
    assert not worker.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], StatementCancelled)
    assert bridge._pool.open_now == 0


def test_a_datasources_export_for_an_undeclared_datasource(tmp_path: Path) -> None:
    project(tmp_path, 'tool customer({ id: "a" })\n', decls=BRIDGE_DECLS, config=None,
            files={"tools.py": BRIDGES.replace('"Cache": async_without_signal',
                                                '"Cache": async_without_signal, '
                                                '"Ledgr": async_bridge')})
    result = luma("shop.luma", "--tool-module", "tools.py", cwd=tmp_path)
    assert result.code == 2, result.stderr
    assert errors(result.stderr) == (
        "error: a tool module's datasources export names 'Ledgr', which is not a datasource of "
        "the program; did you mean 'Ledger'?\n")
