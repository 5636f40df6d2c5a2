"""Values synthesized from a JSON schema, for the offline ``test`` model (MODELS.md §4).

``synthesize(schema)`` returns a value that validates against ``schema``, the same value every
time. It takes, in this order of preference: a ``const``; the first ``@example``; the
``@default``; the first ``enum`` value; and otherwise builds one: required fields only, one item
per list (at least ``minItems``), the first member of a union (its tag written by the member's
``const``), numbers as ``1`` moved into ``@range``, ``true`` for booleans, a valid address, URI,
date, date-time or UUID for a ``@format``, a string matching a ``@pattern``, and for any other
string the field's own name, repeated or cut to fit ``@length``. Every candidate is checked with
the one validator, so a value that does not fit is never chosen while another does.

Given what the model saw (:class:`luma.models.seen.Seen`), a field prefers, before all of that,
a value seen under its own name; then one seen under a word of its description (``sum``
described as "the result of the addition" takes a seen ``result``); then, for a number, the
next number of the prompt that no other field took. A seen value is taken only where it is
valid, so the answer still fits the schema, and the same conversation gives the same answer.

A string or list is built with at most ``MAX_SYNTHESIZED_ITEMS`` characters or items: a schema
that needs more (``string[] @length(5000, null)``) is a ``LIMIT`` error naming the field, not a
value that takes minutes and gigabytes to build.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from luma.limits import MAX_SYNTHESIZED_ITEMS
from luma.schema.compile import PATTERN_KEY
from luma.schema.validate import SchemaError, SchemaValidator, validator_for

if TYPE_CHECKING:
    from luma.models.seen import Seen

__all__ = ["synthesize", "string_for_pattern"]

_DEEP = 12          # below this depth lists get only their minimum number of items
_TOO_DEEP = 48      # a schema that nests this far without end cannot be satisfied
_FIXED_DATE = "2024-01-01"
_FIXED_DATE_TIME = "2024-01-01T00:00:00Z"
_UUID_NAMESPACE = uuid.UUID("6f2b7c3e-3d0c-4b8e-9a1e-6c756d610000")


def synthesize(schema: Mapping[str, Any] | bool, name: str = "value",
               seen: Seen | None = None) -> Any:
    """A value valid under ``schema`` (self-contained, with its ``$defs``); ``name`` is what a
    string with no better source is called; ``seen``: values from the conversation, preferred
    where they fit."""
    return _Synthesizer(schema, seen).value(schema, name, 0)


_WORD = re.compile(r"[a-z_][a-z0-9_]{2,}")  # description words of three letters or more


class _Synthesizer:
    def __init__(self, root: Mapping[str, Any] | bool, seen: Seen | None = None) -> None:
        self.root = root
        self.defs: Mapping[str, Any] = root.get("$defs", {}) if isinstance(root, Mapping) else {}
        self._validators: dict[int, tuple[Any, SchemaValidator | None]] = {}
        self.seen = seen
        self._numbers = list(seen.numbers) if seen is not None else []  # not taken yet

    # ---------------------------------------------------------------------------- checking
    def fits(self, node: Any, value: Any) -> bool:
        """Whether ``value`` validates against ``node`` (hard and soft rules alike)."""
        found = self._validators.get(id(node))
        if found is None or found[0] is not node:
            schema = node
            if isinstance(node, Mapping) and node is not self.root and self.defs:
                schema = {**node, "$defs": self.defs}
            try:  # the process-wide cache: each request's synthesizer would build it again
                validator: SchemaValidator | None = validator_for(schema)
            except SchemaError:
                validator = None
            found = (node, validator)
            self._validators[id(node)] = found
        validator = found[1]
        if validator is None:
            return True  # a schema the validator cannot read: nothing to hold the value to
        return not validator.validate(value, soft_rules=False)

    def resolve(self, ref: str) -> Any:
        if ref.startswith("#/$defs/"):
            return self.defs.get(ref[len("#/$defs/"):], {})
        return {}

    # ---------------------------------------------------------------------------- values
    def value(self, node: Any, name: str, depth: int) -> Any:
        if node is True or node is None:
            return name
        if node is False or depth > _TOO_DEEP:
            return None
        if not isinstance(node, Mapping):
            return name
        if self.seen is not None and depth > 0:
            for candidate in self._seen(node, name):
                if self.fits(node, candidate):
                    return _copy(candidate)
            number = self._free_number(node)
            if number is not None:
                return number
        for candidate in self._given(node):
            if self.fits(node, candidate):
                return _copy(candidate)
        if isinstance(node.get("$ref"), str):
            return self.value(self.resolve(node["$ref"]), name, depth + 1)
        for key in ("oneOf", "anyOf"):
            branches = node.get(key)
            if isinstance(branches, list) and branches:
                return self._alternative(node, branches, name, depth)
        built = self._built(node, name, depth)
        return built

    def _seen(self, node: Mapping[str, Any], name: str) -> Iterator[Any]:
        """Values seen under the field's name, then under the words of its description."""
        assert self.seen is not None
        named = self.seen.named
        key = name.lower()
        yield from named.get(key, ())
        description = node.get("description")
        if isinstance(description, str):
            words = dict.fromkeys(_WORD.findall(description.lower()))
            for word in words:
                if word != key:
                    yield from named.get(word, ())

    def _free_number(self, node: Mapping[str, Any]) -> int | float | None:
        """The first of the prompt's untaken numbers that is valid here (taken now)."""
        if _kind(node) not in ("integer", "number") or "const" in node or "enum" in node:
            return None
        for i, number in enumerate(self._numbers):
            value: int | float = number
            if _kind(node) == "number":
                value = float(number)
            elif isinstance(number, float) and number.is_integer():
                value = int(number)
            if self.fits(node, value):
                del self._numbers[i]
                return value
        return None

    @staticmethod
    def _given(node: Mapping[str, Any]) -> Iterator[Any]:
        """Values the schema names itself, best first."""
        if "const" in node:
            yield node["const"]
        examples = node.get("examples")
        if isinstance(examples, list):
            yield from examples
        if "default" in node:
            yield node["default"]
        enum = node.get("enum")
        if isinstance(enum, list):
            yield from enum

    def _alternative(self, node: Mapping[str, Any], branches: list[Any], name: str,
                     depth: int) -> Any:
        outer = {k: v for k, v in node.items() if k not in ("oneOf", "anyOf")}
        first = None
        for i, branch in enumerate(branches):
            merged = {**outer, **branch} if isinstance(branch, Mapping) else branch
            candidate = self.value(merged, name, depth + 1)
            if i == 0:
                first = candidate
            if self.fits(node, candidate):
                return candidate
        return first

    def _built(self, node: Mapping[str, Any], name: str, depth: int) -> Any:
        kind = _kind(node)
        if kind == "null":
            return None
        if kind == "boolean":
            return True
        if kind in ("integer", "number"):
            return _number(node, kind == "integer")
        if kind == "string":
            return self._string(node, name)
        if kind == "array":
            return self._array(node, name, depth)
        if kind == "object":
            return self._object(node, depth)
        return name

    def _object(self, node: Mapping[str, Any], depth: int) -> dict[str, Any]:
        properties = node.get("properties")
        out: dict[str, Any] = {}
        if not isinstance(properties, Mapping):
            return out
        required = node.get("required")
        for key in required if isinstance(required, list) else ():
            if key in properties:
                out[key] = self.value(properties[key], key, depth + 1)
        return out

    def _array(self, node: Mapping[str, Any], name: str, depth: int) -> list[Any]:
        low = _whole(node.get("minItems")) or 0
        high = _whole(node.get("maxItems"))
        _within_limit(low, name, "items")
        count = max(low, 1 if depth < _DEEP else 0)
        if high is not None:
            count = min(count, high)
        items = node.get("items", True)
        return [self.value(items, name, depth + 1) for _ in range(count)]

    def _string(self, node: Mapping[str, Any], name: str) -> str:
        _within_limit(_whole(node.get("minLength")) or 0, name, "characters")
        candidates = list(_string_candidates(node, name))
        for candidate in candidates:
            if self.fits(node, candidate):
                return candidate
        return candidates[0]


def _within_limit(count: int, name: str, what: str) -> None:
    if count > MAX_SYNTHESIZED_ITEMS:
        from luma.runtime.errors import LumaError

        raise LumaError("LIMIT", f"The test model cannot build a value for '{name}': it needs "
                        f"at least {count} {what}, and the test model builds at most "
                        f"{MAX_SYNTHESIZED_ITEMS}.", details={"field": name, "needed": count,
                                                               "limit": MAX_SYNTHESIZED_ITEMS})


# ---------------------------------------------------------------------------------- leaves


def _kind(node: Mapping[str, Any]) -> str | None:
    t = node.get("type")
    if isinstance(t, list):
        real = [x for x in t if x != "null"]
        t = real[0] if real else "null"
    if isinstance(t, str):
        return t
    if "properties" in node or "additionalProperties" in node or "required" in node:
        return "object"
    if "items" in node:
        return "array"
    return None


def _whole(value: Any) -> int | None:
    """A non-negative bound as a whole number, or None."""
    if type(value) in (int, float) and value >= 0 and math.isfinite(value):
        return int(math.ceil(value))
    return None


def _bound(node: Mapping[str, Any], key: str) -> float | None:
    value: Any = node.get(key)
    return value if type(value) in (int, float) and math.isfinite(value) else None


def _number(node: Mapping[str, Any], integer: bool) -> int | float:
    """``1``, moved into the schema's bounds."""
    low, high = _bound(node, "minimum"), _bound(node, "maximum")
    ex_low, ex_high = _bound(node, "exclusiveMinimum"), _bound(node, "exclusiveMaximum")
    value: float = 1
    if low is not None and value < low:
        value = low
    if ex_low is not None and value <= ex_low:
        value = ex_low + 1
    if high is not None and value > high:
        value = high
    if ex_high is not None and value >= ex_high:
        value = ex_high - 1
        if ex_low is not None and value <= ex_low:
            value = (ex_low + ex_high) / 2
        if low is not None and value < low:
            value = (low + ex_high) / 2
    if not integer:
        return float(value)
    whole = math.ceil(value)
    if (high is not None and whole > high) or (ex_high is not None and whole >= ex_high):
        whole = math.floor(value)
    return int(whole)


def _slug(name: str) -> str:
    text = "".join(ch if ch.isalnum() and ch.isascii() else "-" for ch in name.lower())
    text = "-".join(part for part in text.split("-") if part)
    return text or "value"


def _string_candidates(node: Mapping[str, Any], name: str) -> Iterator[str]:
    fmt = node.get("format")
    slug = _slug(name)
    if fmt == "email":
        yield f"{slug}@example.com"
        yield "a@b.co"
    elif fmt == "uri":
        yield f"https://example.com/{slug}"
        yield "a:b"
    elif fmt == "date":
        yield _FIXED_DATE
    elif fmt == "date-time":
        yield _FIXED_DATE_TIME
    elif fmt == "uuid":
        yield str(uuid.uuid5(_UUID_NAMESPACE, name))
    pattern = node.get(PATTERN_KEY)
    if not isinstance(pattern, str):
        pattern = node.get("pattern")
    if isinstance(pattern, str):
        yield from _pattern_candidates(pattern)
    low = _whole(node.get("minLength")) or 0
    high = _whole(node.get("maxLength"))
    base = name or "value"
    text = base
    while len(text) < low:
        text += base
    if high is not None:
        text = text[:high]
    yield text
    yield "x" * low


def _pattern_candidates(pattern: str) -> Iterator[str]:
    """Strings made from ``pattern`` with every repetition taken at growing counts, so one of
    them can also meet a length bound."""
    seen: set[str] = set()
    for reps in (0, 1, 2, 3, 5, 8, 13, 21, 34, 64):
        text = string_for_pattern(pattern, reps)
        if text is not None and text not in seen:
            seen.add(text)
            yield text


# ---------------------------------------------------------------------------------- regex

_CHAR_POOL = ("a", "b", "x", "A", "0", "1", "_", "-", ".", " ", "@", "/", ":")


def string_for_pattern(pattern: str, reps: int = 0) -> str | None:
    """A string built from the parsed regex (each repetition taken ``reps`` times, within its
    bounds), or None when the pattern uses something this cannot build. Lookarounds are
    skipped, so the result is a candidate to check, not a guarantee."""
    import re
    from re import _parser as sre_parse

    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    groups: dict[int, str] = {}
    try:
        return _emit(list(parsed), reps, groups)
    except (_Unbuildable, RecursionError):
        return None


class _Unbuildable(Exception):
    pass


def _emit(items: list[Any], reps: int, groups: dict[int, str]) -> str:
    from re import _constants as c

    out: list[str] = []
    for op, arg in items:
        if op is c.LITERAL:
            out.append(chr(arg))
        elif op is c.NOT_LITERAL:
            out.append(next(ch for ch in _CHAR_POOL if ord(ch) != arg))
        elif op is c.ANY:
            out.append("a")
        elif op is c.IN:
            out.append(_char_in(arg))
        elif op is c.BRANCH:
            out.append(_emit(list(arg[1][0]), reps, groups))
        elif op is c.SUBPATTERN:
            group, _, _, sub = arg
            text = _emit(list(sub), reps, groups)
            if group is not None:
                groups[group] = text
            out.append(text)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            low, high, sub = arg
            count = max(low, reps)
            if high is not c.MAXREPEAT:
                count = min(count, high)
            if count > MAX_SYNTHESIZED_ITEMS:
                raise _Unbuildable("longer than the synthesis limit")
            total = 0
            for _ in range(count):
                piece = _emit(list(sub), reps, groups)
                total += len(piece)
                if total > MAX_SYNTHESIZED_ITEMS:  # (a{1000}){1000}: each count fits, not both
                    raise _Unbuildable("longer than the synthesis limit")
                out.append(piece)
        elif op is getattr(c, "ATOMIC_GROUP", None):
            out.append(_emit(list(arg), reps, groups))
        elif op is c.GROUPREF:
            out.append(groups.get(arg, ""))
        elif op is c.GROUPREF_EXISTS:
            group, yes, no = arg
            branch = yes if group in groups else no
            if branch is not None:
                out.append(_emit(list(branch), reps, groups))
        elif op in (c.AT, c.ASSERT, c.ASSERT_NOT):
            continue
        else:
            raise _Unbuildable(str(op))
    return "".join(out)


def _char_in(items: list[Any]) -> str:
    from re import _constants as c

    negate = bool(items) and items[0][0] is c.NEGATE
    body = items[1:] if negate else items

    def member(ch: str) -> bool:
        code = ord(ch)
        for op, arg in body:
            if op is c.LITERAL and code == arg:
                return True
            if op is c.RANGE and arg[0] <= code <= arg[1]:
                return True
            if op is c.CATEGORY and _in_category(ch, arg):
                return True
        return False

    pool: list[str] = []
    if not negate:
        for op, arg in body:  # the set's own first member is the most natural pick
            if op is c.LITERAL:
                pool.append(chr(arg))
            elif op is c.RANGE:
                pool.append(chr(arg[0]))
    pool.extend(_CHAR_POOL)
    for ch in pool:
        if member(ch) != negate:
            return ch
    for code in range(32, 0x3000):
        if member(chr(code)) != negate:
            return chr(code)
    raise _Unbuildable("an empty character set")


def _in_category(ch: str, category: Any) -> bool:
    from re import _constants as c

    word = ch.isalnum() or ch == "_"
    checks = {
        c.CATEGORY_DIGIT: ch.isdigit(), c.CATEGORY_NOT_DIGIT: not ch.isdigit(),
        c.CATEGORY_SPACE: ch.isspace(), c.CATEGORY_NOT_SPACE: not ch.isspace(),
        c.CATEGORY_WORD: word, c.CATEGORY_NOT_WORD: not word,
    }
    return bool(checks.get(category, False))


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
