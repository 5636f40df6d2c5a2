"""A module's bridge for tests/codegen/data.luma, typed by the generated file."""

from typing import Any

from luma import Signal

from data_types import ForgetResult, GeneratedDatasources, TopParams, TopResult


def shop(sql: str, params: dict[str, Any], signal: Signal) -> list[dict[str, Any]] | int:
    if sql.startswith("DELETE"):
        return 1
    return [{"id": "c1", "total": 1.5}]


async def shop_async(sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return []


datasources: GeneratedDatasources = {"Shop": shop}
later: GeneratedDatasources = {"Shop": shop_async}
rows: TopResult = [{"id": "c1", "total": 1.5}]
done: ForgetResult = {"rows_affected": 1}
params: TopParams = {"min_total": 1.0, "limit": 10, "region": None}
