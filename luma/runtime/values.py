"""Run-time values are JSON values; helpers for rendering, equality and type names."""

from __future__ import annotations

import json
import math
import re
import sys
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
    """How a value appears inside a string: strings verbatim, everything else as compact JSON.
    A value that is not JSON (one that came from outside without the boundary check) is a
    ``TYPE_INVALID`` error, not a crash."""
    if isinstance(value, str):
        return value
    return json_text(value)


def json_text(value: Any) -> str:
    """``json(x)``: compact JSON text, or ``TYPE_INVALID`` naming what is not JSON."""
    try:
        return compact_json(value)
    except (TypeError, ValueError, RecursionError):
        pass
    problem = json_problem(value)
    if problem is None:  # too deep for the encoder, within the check's own bound
        problem = ("", "the value nests too deeply to be written as JSON")
    where = f" at {problem[0]}" if problem[0] else ""
    from luma.runtime.errors import LumaError

    raise LumaError("TYPE_INVALID", f"cannot write the value as JSON{where}: {problem[1]}")


def deep_equal(a: Any, b: Any) -> bool:
    """JSON equality: a bool never equals a number; ``1 == 1.0``. Iterative, so values of any
    depth compare without exhausting Python's stack."""
    pending = [(a, b)]
    while pending:
        a, b = pending.pop()
        if a is b and type(a) in (list, dict, str):
            continue
        if isinstance(a, bool) or isinstance(b, bool):
            if not (type(a) is type(b) and a == b):
                return False
        elif is_number(a) and is_number(b):
            if not a == b:
                return False
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                return False
            pending.extend(zip(a, b))
        elif isinstance(a, dict) and isinstance(b, dict):
            if a.keys() != b.keys():
                return False
            pending.extend((a[k], b[k]) for k in a)
        elif not (type(a) is type(b) and bool(a == b)):
            return False
    return True


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
_TOOL_MODULE_NAME = re.compile(r"luma_tool_module_(.+?)_[0-9a-f]{12}(?:_\w+)?")  # modules.py


def json_problem(value: Any, subclasses: list[bool] | None = None) -> tuple[str, str] | None:
    """Where ``value`` stops being a JSON value, as ``(path, reason)``; None when it is one.

    A JSON value is ``None``, a bool, an int or a finite float within ±1.8e308, a string of valid
    Unicode (no lone surrogate), a list, or a dict with string keys, nested at most :data:`MAX_JSON_DEPTH` deep
    and without a cycle. The path reads like a validation path (``items[2].qty``). The walk is
    iterative, so a deep value cannot exhaust Python's stack; scalars inside a container are
    checked in place, and a path is spelled out only for the answer.

    A subclass of ``str``, ``int``, ``float``, ``dict`` or ``list`` (an ``enum.StrEnum``
    member, a numpy float, an ``OrderedDict``) is a JSON value too; when ``subclasses`` is
    given, ``subclasses[0]`` is set when one was seen (:func:`plain_json` makes them plain).
    """
    if type(value) is dict:  # the common result, a flat object of plain values: one pass
        for key, item in value.items():
            t = type(item)
            if type(key) is not str or t not in _PLAIN or (t is str and not item.isascii()) \
                    or (t is int and not -_BIG_INT < item < _BIG_INT) \
                    or (t is float and not math.isfinite(item)):
                break
        else:
            return None
    else:
        reason = _scalar_problem(value)
        if reason is not None:
            return "", reason
        if subclasses is not None and type(value) not in _PLAIN and type(value) is not list:
            subclasses[0] = True
        if not isinstance(value, (dict, list)):
            return None
    # containers still to walk: (container, its path as a linked list (parent, key), depth)
    stack: list[tuple[Any, Any, int]] = [(value, None, 0)]
    # id -> (path, depth) of every container walked so far: for cycles, and so that a container
    # shared by several fields is walked once (unless it now sits deeper)
    walked: dict[int, tuple[Any, int]] = {}
    while stack:
        container, path, depth = stack.pop()
        if depth >= MAX_JSON_DEPTH:
            return _path(path), f"the value nests deeper than {MAX_JSON_DEPTH} levels"
        seen = walked.get(id(container))
        if seen is not None and seen[1] >= depth:
            continue
        walked[id(container)] = (path, depth)
        is_dict = isinstance(container, dict)
        for key, item in container.items() if is_dict else enumerate(container):
            if is_dict:
                if type(key) is not str:
                    return _path(path), (f"the key {_short_repr(key)} is a Python "
                                         f"{python_type_name(key)}, not a string")
                if not key.isascii() and _bad_unicode(key):
                    return _path(path), "a key is not valid Unicode (it holds a lone surrogate)"
            t = type(item)
            if t is str or t is int or t is bool or item is None:
                if t is str and not item.isascii() and _bad_unicode(item):
                    return _path((path, key)), _BAD_STRING
                if t is int and not -_BIG_INT < item < _BIG_INT:
                    return _path((path, key)), _too_big(item)
                continue
            if t is dict or t is list or isinstance(item, (dict, list)):
                if id(item) in walked and _on_path(walked, item, path):
                    return _path((path, key)), _CIRCULAR
                if subclasses is not None and t is not dict and t is not list:
                    subclasses[0] = True
                stack.append((item, (path, key), depth + 1))
                continue
            reason = _scalar_problem(item)
            if reason is not None:
                return _path((path, key)), reason
            if subclasses is not None and t is not float:
                subclasses[0] = True
    return None


def plain_json(value: Any) -> Any:
    """A JSON value (as :func:`json_problem` accepts it) with every subclass made its plain
    base type, so the rest of the runtime sees only ``dict``, ``list``, ``str``, ``int``,
    ``float``, ``bool`` and ``None``. A container shared by several fields stays shared."""
    done: dict[int, Any] = {}

    def plain(v: Any) -> Any:
        t = type(v)
        if t in _PLAIN:
            return v
        if isinstance(v, dict) or isinstance(v, list):
            copy = done.get(id(v))
            if copy is None:
                if isinstance(v, dict):
                    copy = done[id(v)] = {}
                    copy.update((k, plain(x)) for k, x in v.items())
                else:
                    copy = done[id(v)] = []
                    copy.extend(plain(x) for x in v)
            return copy
        if isinstance(v, bool):
            return bool(v)
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            return float(v)
        if isinstance(v, str):
            return str.__str__(v)
        return v

    return plain(value)


_PLAIN = frozenset({str, int, float, bool, type(None)})
_BAD_STRING = "the string is not valid Unicode (it holds a lone surrogate)"
_BIG_INT = int(sys.float_info.max) + 1  # from here on, beyond the range of a float: most JSON
# readers cannot hold it, and it cannot be mixed with a float


def _too_big(n: int) -> str:
    digits = n.bit_length() * 30103 // 100000 + 1  # about; str() of it may not even be allowed
    return f"an int of about {digits} digits is beyond ±1.8e308, the range of a JSON number"
_CIRCULAR = "the value contains itself (a circular reference)"


def _scalar_problem(item: Any) -> str | None:
    """Why a value that is not a list or dict is not a JSON value; None when it is one."""
    t = type(item)
    if t is float:
        return None if math.isfinite(item) else f"{item} is not a JSON number"
    if t is str:
        return _BAD_STRING if not item.isascii() and _bad_unicode(item) else None
    if t is int or (t is not bool and isinstance(item, int)):  # an enum.IntEnum member...
        return None if -_BIG_INT < item < _BIG_INT else _too_big(item)
    if item is None or t is bool or isinstance(item, (dict, list)):
        return None
    if isinstance(item, float):  # a subclass: a numpy float...
        return None if math.isfinite(item) else f"{float(item)} is not a JSON number"
    if isinstance(item, str):  # an enum.StrEnum member...
        return _BAD_STRING if _bad_unicode(item) else None
    return f"a Python {python_type_name(item)} is not a JSON value"


def _on_path(walked: dict[int, tuple[Any, int]], item: Any, path: Any) -> bool:
    """Whether ``item`` (already walked somewhere) contains the container at ``path``: a cycle,
    not just the same list shared by two fields."""
    target = walked[id(item)][0]
    node = path
    while True:
        if node is target:
            return True
        if node is None:
            return False
        node = node[0]


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__name__}>"
    return text if len(text) <= 40 else text[:37] + "..."


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


def _path(path: Any) -> str:
    from luma.schema.validate import render_path

    return render_path(path, elide=True)


def parse_json(text: str, *, object_pairs_hook: Any = None) -> Any:
    """JSON text as a value, refusing what JSON does not have and Python's parser accepts:
    ``NaN``, ``Infinity``, a number too large for a float (``1e999``), nesting deeper than
    :data:`MAX_JSON_DEPTH`. Raises :class:`json.JSONDecodeError` for text that does not parse
    and :class:`ValueError` (with the reason) for one of those. ``object_pairs_hook`` is
    ``json.loads``'s."""

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    def number(digits: str) -> float:
        value = float(digits)
        if not math.isfinite(value):
            raise ValueError(f"{digits} is not a finite number")
        return value

    def integer(digits: str) -> int:
        if len(digits) > 310:  # more than any int within range; int() may refuse the text
            raise ValueError(f"an int of {len(digits.lstrip('-'))} digits is beyond ±1.8e308, "
                             "the range of a JSON number")
        return int(digits)

    try:
        value = json.loads(text, parse_constant=constant, parse_float=number, parse_int=integer,
                           object_pairs_hook=object_pairs_hook)
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
