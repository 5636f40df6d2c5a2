"""Run-time values are JSON values; helpers for rendering, equality and type names."""

from __future__ import annotations

import json
from typing import Any


def type_name(value: Any) -> str:
    """The Luma name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def is_number(value: Any) -> bool:
    return type(value) in (int, float)


def compact_json(value: Any) -> str:
    """Compact JSON text, as interpolation and ``json(x)`` render it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: equal values give equal text (cache and idempotency keys)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True,
                      allow_nan=False)


def render(value: Any) -> str:
    """How a value appears inside a string: strings verbatim, everything else as compact JSON."""
    if isinstance(value, str):
        return value
    return compact_json(value)


def deep_equal(a: Any, b: Any) -> bool:
    """JSON equality: a bool never equals a number; ``1 == 1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if is_number(a) and is_number(b):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(deep_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def short(value: Any, limit: int = 80) -> str:
    """A value as compact JSON, cut for messages."""
    try:
        text = compact_json(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
