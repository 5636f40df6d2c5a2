"""Typed database contracts (DATA.md): the SQL reader, value conversion and the bridges.

``placeholders(sql, style)`` is for a module's own bridge whose driver wants another
placeholder style than ``:name``. Importing this package imports no database driver.
"""

from __future__ import annotations

from luma.data.sql import placeholders

__all__ = ["placeholders"]
