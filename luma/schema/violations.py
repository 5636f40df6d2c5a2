"""Violations: what a failed validation reports, and how values and paths read in messages."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from luma.record import Record


class Violation(Record):
    """One broken rule.

    ``path`` is dotted from the validated value (``items[2].qty``; ``""`` is the value itself);
    ``rule`` names what broke (``type``, ``required``, ``unknown_field``, ``enum``, ``const``,
    ``tag``, ``range``, ``length``, ``pattern``, ``format``, ``alternatives``); ``soft`` is true for
    a soft rule that only warns.
    """

    __slots__ = __match_args__ = ("path", "message", "rule", "soft")

    def __init__(self, path: str, message: str, rule: str, soft: bool) -> None:
        self.path = path
        self.message = message
        self.rule = rule
        self.soft = soft

    def render(self, prefix: str = "") -> str:
        """``<prefix>.<path>: <message>``; a union tag reads ``<path> must identify …``."""
        where = join_path(prefix, self.path)
        if self.rule == "tag":
            return f"{where} {self.message}"
        return f"{where}: {self.message}" if where else self.message


def join_path(prefix: str, path: str) -> str:
    """Join a prefix such as ``calculate.input`` and a violation path such as ``items[0].a``."""
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


def format_violations(prefix: str, violations: Sequence[Violation]) -> str:
    """Every violation on one line: ``calculate.input.a: …; calculate.input.b: …``."""
    return "; ".join(v.render(prefix) for v in violations)


# ------------------------------------------------------------------------------ rendering

_MAX_SHOWN = 80


def render_value(value: Any) -> str:
    """A value for a message: strings quoted like ``'x'``, anything else as compact JSON."""
    if isinstance(value, str):
        if len(value) > _MAX_SHOWN:
            return repr(value[:_MAX_SHOWN - 10])[:-1] + "...'"
        return repr(value)
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN - 3] + "..."


# JSON Schema type names as a Luma user knows them
TYPE_NAMES = {"integer": "int", "number": "float", "string": "string", "boolean": "bool",
              "null": "null", "array": "list", "object": "object"}


def kind_name(value: Any) -> str:
    """What a value is, for ``expected int, got <kind>``."""
    t = type(value)
    if t is float and not math.isfinite(value):
        return "a non-finite number"
    return _VALUE_KIND_NAMES.get(t) or _json_kind_name(value)


_VALUE_KIND_NAMES: dict[type, str] = {type(None): "null", bool: "bool", int: "int",
                                      float: "float", str: "string", list: "list",
                                      dict: "object"}


def _json_kind_name(value: Any) -> str:
    for t, name in _VALUE_KIND_NAMES.items():
        if isinstance(value, t) and t is not type(None):
            return name
    return type(value).__name__


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# ------------------------------------------------------------------------------- equality


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: ``true`` is not ``1``, ``1`` equals ``1.0``."""
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if ta in (int, float) and tb in (int, float):
        return bool(a == b)
    if ta is not tb:
        return False
    if ta is list:
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if ta is dict:
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (a default must not be shared between filled values)."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value
