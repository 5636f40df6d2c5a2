"""Database values as JSON values (DATA.md §2), and Luma values as database parameters.

A row crosses the boundary only as JSON: integers and floats as they are; an exact ``Decimal``
as an int when it has no fraction, else a float; dates, times and timestamps as ISO 8601 text;
UUIDs as text; JSON columns as the JSON they hold (already decoded by the driver). Anything
else (bytes, an interval, a driver's own type) is an error that names the column.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from decimal import Decimal
from typing import Any


class NoJsonForm(Exception):
    """A value with no JSON form; ``path`` is where it is below the column (``""``, ``.a[2]``)."""

    def __init__(self, kind: str, path: str = "") -> None:
        super().__init__(kind)
        self.kind = kind
        self.path = path


def to_json(value: Any) -> Any:
    """``value`` as a JSON value, or :class:`NoJsonForm`."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise NoJsonForm(f"the float {value!r}")
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise NoJsonForm(f"the decimal {value}")
        if value == value.to_integral_value():
            return int(value)
        return float(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise NoJsonForm(f"an object key {k!r} that is not text")
            try:
                out[k] = to_json(v)
            except NoJsonForm as exc:
                raise NoJsonForm(exc.kind, f".{k}{exc.path}") from None
        return out
    if isinstance(value, (list, tuple)):
        items = []
        for i, v in enumerate(value):
            try:
                items.append(to_json(v))
            except NoJsonForm as exc:
                raise NoJsonForm(exc.kind, f"[{i}]{exc.path}") from None
        return items
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise NoJsonForm("a bytes value")
    raise NoJsonForm(f"a {type(value).__name__} value")


__all__ = ["NoJsonForm", "to_json"]
