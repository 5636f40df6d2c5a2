"""Run-time values are JSON values; helpers for rendering, equality and type names."""

from __future__ import annotations

import json
import math
import re
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


# ------------------------------------------------------------------------ the JSON boundary

MAX_JSON_DEPTH = 200
"""How deeply lists and objects may nest in a value that crosses into the runtime from a
handler (and in a program's arguments)."""

_SCALARS = (str, int, float, bool, type(None))
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOOL_MODULE_NAME = re.compile(r"luma_tool_module_(.+?)_[0-9a-f]{12}(?:_\w+)?")  # modules.py


def json_problem(value: Any) -> tuple[str, str] | None:
    """Where ``value`` stops being a JSON value, as ``(path, reason)``; None when it is one.

    A JSON value is ``None``, a bool, an int, a finite float, a string of valid Unicode (no lone
    surrogate), a list, or a dict with string keys, nested at most :data:`MAX_JSON_DEPTH` deep
    and without a cycle. The path reads like a validation path (``items[2].qty``). The walk is
    iterative, so a deep value cannot exhaust Python's stack.
    """
    # (value, path parts, depth); a None entry pops the innermost container off the chain
    stack: list[tuple[Any, tuple[str, ...], int] | None] = [(value, (), 0)]
    chain: list[int] = []  # ids of the containers being walked: seeing one again is a cycle
    on_chain: set[int] = set()
    while stack:
        entry = stack.pop()
        if entry is None:
            on_chain.discard(chain.pop())
            continue
        item, path, depth = entry
        t = type(item)
        if t is str:
            if not item.isascii() and _bad_unicode(item):
                return _path(path), "the string is not valid Unicode (it holds a lone surrogate)"
            continue
        if t is int or t is bool or item is None:
            continue
        if t is float:
            if not math.isfinite(item):
                return _path(path), f"{item} is not a JSON number"
            continue
        if isinstance(item, (dict, list)):
            if id(item) in on_chain:
                return _path(path), "the value contains itself (a circular reference)"
            if depth >= MAX_JSON_DEPTH:
                return _path(path), f"the value nests deeper than {MAX_JSON_DEPTH} levels"
            on_chain.add(id(item))
            chain.append(id(item))
            stack.append(None)
            if isinstance(item, dict):
                for key in item:
                    if type(key) is not str:
                        return _path(path), (f"the key {key!r} is a Python "
                                             f"{type(key).__name__}, not a string")
                    if not key.isascii() and _bad_unicode(key):
                        return _path(path), "a key is not valid Unicode (it holds a lone surrogate)"
                stack.extend((v, (*path, _key(k)), depth + 1) for k, v in item.items())
            else:
                stack.extend((v, (*path, f"[{i}]"), depth + 1) for i, v in enumerate(item))
            continue
        if isinstance(item, _SCALARS):  # a subclass: an enum member, a numpy float...
            if isinstance(item, float) and not math.isfinite(item):
                return _path(path), f"{float(item)} is not a JSON number"
            if isinstance(item, str) and _bad_unicode(item):
                return _path(path), "the string is not valid Unicode (it holds a lone surrogate)"
            continue
        return _path(path), f"a Python {python_type_name(item)} is not a JSON value"
    return None


def python_type_name(value: Any) -> str:
    """``set``, ``decimal.Decimal``, ``tools.Order``: a value's Python type, for messages (a
    tool module is named by its file's stem, not by the name it was imported under)."""
    t = type(value)
    module = t.__module__
    if module in ("builtins", "__main__"):
        return t.__qualname__
    loaded = _TOOL_MODULE_NAME.fullmatch(module)
    if loaded is not None:
        module = loaded.group(1)
    return f"{module}.{t.__qualname__}"


def _bad_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _key(key: str) -> str:
    return f".{key}" if _IDENTIFIER.fullmatch(key) else f"[{json.dumps(key, ensure_ascii=False)}]"


def _path(parts: tuple[str, ...]) -> str:
    if len(parts) > 12:  # a path that deep is read by its ends
        parts = (*parts[:6], f"...({len(parts) - 9} more)...", *parts[-3:])
    text = "".join(parts)
    return text[1:] if text.startswith(".") else text


def parse_json(text: str) -> Any:
    """JSON text as a value, refusing what JSON does not have and Python's parser accepts:
    ``NaN``, ``Infinity``, a number too large for a float (``1e999``), nesting deeper than
    :data:`MAX_JSON_DEPTH`. Raises :class:`json.JSONDecodeError` for text that does not parse
    and :class:`ValueError` (with the reason) for one of those."""

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    def number(digits: str) -> float:
        value = float(digits)
        if not math.isfinite(value):
            raise ValueError(f"{digits} is not a finite number")
        return value

    try:
        value = json.loads(text, parse_constant=constant, parse_float=number)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:
        try:
            json.loads(text)  # text that is not JSON at all says so first ("NaNa")
        except json.JSONDecodeError:
            raise
        except (ValueError, RecursionError):
            pass
        if isinstance(exc, RecursionError):
            raise ValueError(f"the value nests deeper than {MAX_JSON_DEPTH} levels") from None
        raise ValueError(str(exc)) from None
    problem = json_problem(value)
    if problem is not None:
        raise ValueError(problem[1])
    return value
