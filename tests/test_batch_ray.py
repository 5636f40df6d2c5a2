"""``luma batch --engine ray`` on a local Ray instance of 2 CPUs, started once for the module
(``ray.init``) and reached with ``--ray-address`` as a cluster is (docs/batch.md): the same rows
as ``--engine local``, the tool modules loaded once per worker, a worker that dies mid-batch
has its rows run again, and with a PostgreSQL store every idempotent write runs once."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_runner import luma
from pg_server import pg_admin
from run_programs import assert_no_traceback

STORE_ENV = "LUMA_BATCH_RAY_STORE_URL"
PG_URL = os.environ.get("LUMA_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")

PROGRAM = """\
schema Out { doubled: int }
schema Saved { n: int }
tool save(n: int) -> Saved {
  description: "Write n once."
  side_effects: "write"
  idempotent: true
  idempotency_key: n
}
tool double(n: int) -> Out { description: "Twice n." }
agent Calc {
  tools: [save, double]
  fn run(n: int) -> Out {
    saved = tool save({ n: n })
    return tool double({ n: saved.n })
  }
}
"""

TOOLS = """\
import os

HERE = {here!r}
with open(os.path.join(HERE, "loads.txt"), "a") as f:
    f.write(f"{{os.getpid()}}\\n")

def save(input):
    with open(os.path.join(HERE, "writes.txt"), "a") as f:
        f.write(f"{{input['n']}}\\n")
    return {{"n": input["n"]}}

def double(input):
    guard = os.path.join(HERE, "died.txt")
    if input["n"] == 7 and {crash} and not os.path.exists(guard):
        open(guard, "w").close()
        os._exit(1)  # the worker dies in the middle of row 7, after its write
    return {{"doubled": input["n"] * 2}}
"""


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    import ray
    os.environ.setdefault(STORE_ENV, PG_URL)  # the workers' environment is the cluster's
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def project(tmp: Path, *, crash: bool, store: dict[str, object] | None = None) -> None:
    (tmp / "calc.luma").write_text(PROGRAM)
    (tmp / "tools.py").write_text(TOOLS.format(here=str(tmp), crash=crash))
    (tmp / "in.jsonl").write_text("".join(json.dumps({"n": n}) + "\n" for n in range(20)))
    if store is not None:
        (tmp / "luma.config.json").write_text(json.dumps({"idempotency_store": store}))


def batch(tmp: Path, output: str, *more: str) -> tuple[int, str]:
    done = luma("batch", "calc.luma", "--tool-module", "tools.py", "--input", "in.jsonl",
                "--output", output, *more, cwd=tmp, env={STORE_ENV: PG_URL}, timeout=120)
    assert done.stdout == ""
    assert_no_traceback(done.stderr)
    return done.code, done.stderr


def rows(path: Path) -> dict[int, object]:
    found = [json.loads(line) for line in path.read_text().splitlines()]
    by_index = {row["index"]: row for row in found}
    assert len(by_index) == len(found)
    return by_index


@pytest.fixture
def pg_table() -> Iterator[str]:
    admin = pg_admin(PG_URL)
    table = f"luma_test_batch_{uuid.uuid4().hex[:12]}"
    try:
        yield table
    finally:
        admin.execute(f'DROP TABLE IF EXISTS "{table}"')
        admin.close()


def test_the_same_rows_as_the_local_engine_and_one_load_per_worker(
        ray_address: str, tmp_path: Path, pg_table: str) -> None:
    project(tmp_path, crash=False, store={"backend": "postgres", "url": {"env": STORE_ENV},
                                          "table": pg_table})
    code, err = batch(tmp_path, "local.jsonl", "--concurrency", "4")
    assert (code, err) == (0, "luma batch: 20 succeeded, 0 failed\n")
    (tmp_path / "loads.txt").unlink()
    (tmp_path / "writes.txt").unlink()
    (tmp_path / "luma.config.json").write_text(json.dumps({"idempotency_store": {
        "backend": "postgres", "url": {"env": STORE_ENV}, "table": pg_table + "_ray"}}))
    try:
        code, err = batch(tmp_path, "ray.jsonl", "--concurrency", "4", "--engine", "ray",
                          "--ray-address", ray_address)
    finally:
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute(f'DROP TABLE IF EXISTS "{pg_table}_ray"')
    assert (code, err) == (0, "luma batch: 20 succeeded, 0 failed\n")
    assert rows(tmp_path / "ray.jsonl") == rows(tmp_path / "local.jsonl")
    # one load by the batch itself (its checks) and one per worker: 2 CPUs, 2 workers; no row
    # loaded the tool module again
    loads = (tmp_path / "loads.txt").read_text().split()
    assert len(loads) == len(set(loads)) == 3
    assert sorted(map(int, (tmp_path / "writes.txt").read_text().split())) == list(range(20))


def test_a_worker_that_dies_has_its_rows_run_again_and_each_write_runs_once(
        ray_address: str, tmp_path: Path, pg_table: str) -> None:
    project(tmp_path, crash=True, store={"backend": "postgres", "url": {"env": STORE_ENV},
                                         "table": pg_table})
    # --concurrency 2: one row at a time on each of the 2 workers
    code, err = batch(tmp_path, "out.jsonl", "--concurrency", "2", "--engine", "ray",
                      "--ray-address", ray_address)
    assert (code, err) == (0, "luma batch: the Ray worker running input line 8 died; the row "
                              "runs again\nluma batch: 20 succeeded, 0 failed\n")
    assert (tmp_path / "died.txt").exists()
    assert rows(tmp_path / "out.jsonl") == {
        n: {"index": n, "ok": True, "result": {"doubled": 2 * n}} for n in range(20)}
    # row 7 ran twice, but its write once: the second run replayed it from PostgreSQL
    assert sorted(map(int, (tmp_path / "writes.txt").read_text().split())) == list(range(20))
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as admin:
        (count,) = admin.execute(f'SELECT count(*) FROM "{pg_table}"').fetchone()  # type: ignore[misc]
    assert count == 20
    # the batch's own load and the 2 workers', and the restarted worker's when it came back
    # before the batch ended: once per process, never per row
    loads = (tmp_path / "loads.txt").read_text().split()
    assert len(loads) == len(set(loads)) in (3, 4)


def test_the_memory_and_file_stores_are_refused(tmp_path: Path) -> None:
    for store in (None, {"backend": "file"}):
        project(tmp_path, crash=False, store=store)
        code, err = batch(tmp_path, "out.jsonl", "--engine", "ray")
        backend = "memory" if store is None else "file"
        assert (code, err) == (2, "luma batch: error: --engine ray needs a shared idempotency "
                                  "store: the program has idempotent tools and its store is "
                                  f"'{backend}', which each worker would keep on its own; set "
                                  "idempotency_store.backend to 'postgres' or 'redis' in the "
                                  "config\n")
        assert not (tmp_path / "out.jsonl").exists()
        (tmp_path / "luma.config.json").unlink(missing_ok=True)


def test_without_the_extra_a_one_line_error(tmp_path: Path) -> None:
    project(tmp_path, crash=False)
    hidden = tmp_path / "no_ray"
    (hidden / "ray").mkdir(parents=True)
    (hidden / "ray" / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    done = luma("batch", "calc.luma", "--tool-module", "tools.py", "--input", "in.jsonl",
                "--output", "out.jsonl", "--engine", "ray", cwd=tmp_path,
                env={"PYTHONPATH": str(hidden)})
    assert (done.code, done.stderr) == (2, "luma batch: error: --engine ray needs Ray, an "
                                           "optional extra: pip install 'luma[ray]'\n")
    assert not (tmp_path / "out.jsonl").exists()


def test_files_outside_the_program_folder_and_an_address_without_the_engine(
        tmp_path: Path, pg_table: str) -> None:
    folder = tmp_path / "app"
    folder.mkdir()
    project(folder, crash=False, store={"backend": "postgres", "url": {"env": STORE_ENV},
                                        "table": pg_table})
    (tmp_path / "tools.py").write_text((folder / "tools.py").read_text())
    done = luma("batch", "calc.luma", "--tool-module", "../tools.py", "--input", "in.jsonl",
                "--output", "out.jsonl", "--engine", "ray", cwd=folder,
                env={STORE_ENV: PG_URL})
    assert (done.code, done.stderr) == (
        2, f"luma batch: error: the tool module ../tools.py is outside the program's folder "
           f"{folder.resolve()}, the folder that travels to the Ray workers; move it into that "
           "folder\n")
    done = luma("batch", "calc.luma", "--tool-module", "tools.py", "--input", "in.jsonl",
                "--output", "out.jsonl", "--ray-address", "auto", cwd=folder)
    assert (done.code, done.stderr) == (2, "luma batch: error: --ray-address needs --engine ray\n")
    assert not (folder / "out.jsonl").exists()
