"""The PostgreSQL server the tests use (``docker compose up -d``, or LUMA_TEST_POSTGRES_URL):
without one those tests fail, saying how to start it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import psycopg


def pg_admin(url: str) -> psycopg.Connection:
    """An autocommit connection to the server at ``url``, or the test fails with how to start
    one."""
    import psycopg

    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"no PostgreSQL server answers at {url} ({' '.join(str(exc).split())}): "
                    "start one with `docker compose up -d`, or point LUMA_TEST_POSTGRES_URL at "
                    "one", pytrace=False)
