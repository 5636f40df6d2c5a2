"""A datasources export that names a datasource the program does not declare."""

from typing import Any

from data_types import GeneratedDatasources


def shop(sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return []


datasources: GeneratedDatasources = {"Shp": shop}
