"""Queries and commands through the Python API (luma.api): the datasources open once when a
program loads, every run of it shares their pools, and closing the program closes them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import luma.api
from test_data_sqlite import DECLS, SHOP_SQL

CONFIG = {"datasources": {"Shop": {"driver": "sqlite", "path": ":memory:", "init": "shop.sql"}}}

CLERK = """
agent Clerk {
  tool_concurrency: 4
  tools: [top, pay, customer]
  fn run(request_id: string) -> any {
    tool pay({ request_id: request_id, customer_id: "c1", amount: 2 })
  }
  fn biggest() -> Customer[] {
    tool top({ min_total: 100 })
  }
}
"""


def _write(tmp_path: Path) -> Path:
    (tmp_path / "shop.sql").write_text(SHOP_SQL)
    path = tmp_path / "shop.luma"
    path.write_text(DECLS + CLERK)
    return path


def test_runs_of_one_program_share_its_database(tmp_path: Path) -> None:
    program = luma.api.load(_write(tmp_path), config=CONFIG)
    try:
        async def many() -> list[object]:
            return list(await asyncio.gather(
                *(program.run("Clerk", request_id=f"r{i}") for i in range(6))))

        assert asyncio.run(many()) == [{"rows_affected": 1}] * 6
        rows = program.call_sync("Clerk", "biggest")
        assert [r["id"] for r in rows] == ["c1"]
        bridge = program._datasources.builtin["Shop"]
        assert bridge._pool.opened == 1  # an in-memory database lives in its one connection
    finally:
        program.close()
    assert bridge._pool.open_now == 0


def test_a_datasource_without_a_bridge_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(luma.api.LoadError) as caught:
        luma.api.load(_write(tmp_path), config={})
    assert caught.value.problems == ["datasource 'Shop' has no registered bridge."]


def test_a_module_bridge_given_as_a_tool_is_refused(tmp_path: Path) -> None:
    with pytest.raises(luma.api.LoadError) as caught:
        luma.api.load(_write(tmp_path), config=CONFIG,
                      tools={"top": lambda input: []})
    assert caught.value.problems == [
        "'top' is a query: its handler is the bridge of its datasource; it takes no other "
        "handler."]
