"""The one validator: JSON values against the neutral JSON Schema the compiler produces.

Structure and messages are Luma's own (short English, one line, Luma type names); patterns use
Python ``re.fullmatch``; formats are checked by :mod:`luma.schema.formats`. A schema is compiled
once into a tree of nodes and cached, because validation runs on every tool call.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from luma.schema.compile import PATTERN_KEY, SEVERITY_KEY, TAG_KEY
from luma.schema.formats import FORMAT_CHECKS
from luma.schema.violations import (
    TYPE_NAMES,
    Violation,
    copy_json,
    format_violations,
    join_path,
    json_equal,
    kind_name,
    plural,
    render_value,
)

__all__ = [
    "SchemaError",
    "SchemaValidator",
    "Violation",
    "format_violations",
    "join_path",
    "validate",
    "validate_and_fill",
    "validator_for",
]


class SchemaError(ValueError):
    """The schema uses something this validator does not implement, or is malformed."""


# ------------------------------------------------------------------------------ the walker

# A path is a linked list ``(parent, key)`` so that descending costs one tuple; it is rendered
# to text only when a violation is recorded.
_Path = Any
_MISSING = object()
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def render_path(path: _Path, *, elide: bool = False) -> str:
    """A value path (a linked list of keys, innermost last) as text: ``a.b[0]["odd key"]``.
    With ``elide``, a path more than 12 steps deep keeps its ends."""
    parts: list[str] = []
    while path is not None:
        path, key = path
        if isinstance(key, int):
            parts.append(f"[{key}]")
        elif _IDENTIFIER.fullmatch(key):
            parts.append("." + key)
        else:
            parts.append("[" + json.dumps(key, ensure_ascii=False) + "]")
    parts.reverse()
    if elide and len(parts) > 12:  # a path that deep is read by its ends
        parts = [*parts[:6], f"...({len(parts) - 9} more)...", *parts[-3:]]
    text = "".join(parts)
    return text[1:] if text.startswith(".") else text


_MAX_DEFAULT_DEPTH = 16


class _Run:
    """The state of one validation: options and the violations found so far."""

    __slots__ = ("fill", "soft_rules", "infer_tags", "out", "default_depth")

    def __init__(self, fill: bool, soft_rules: bool, infer_tags: bool) -> None:
        self.fill = fill
        self.soft_rules = soft_rules
        self.infer_tags = infer_tags
        self.out: list[Violation] = []
        self.default_depth = 0  # defaults filled inside defaults, bounded for recursive schemas

    def trial(self) -> _Run:
        return _Run(self.fill, self.soft_rules, self.infer_tags)

    def add(self, path: _Path, message: str, rule: str, soft: bool = False) -> None:
        self.out.append(Violation(render_path(path), message, rule, soft))

    def hard_failed(self) -> bool:
        return any(not v.soft for v in self.out)


_JSON_KINDS: dict[type, str] = {type(None): "null", bool: "boolean", str: "string",
                                list: "array", dict: "object"}


class _Node:
    """A compiled schema. Attributes left ``None`` are keywords the schema does not use."""

    __slots__ = (
        "label", "never", "ref", "types", "enum", "enum_strings", "const",
        "props", "required", "additional", "defaults", "items",
        "minimum", "maximum", "ex_minimum", "ex_maximum", "min_len", "max_len",
        "min_items", "max_items", "pattern", "pattern_text", "format", "format_check",
        "soft", "tag", "members", "one_of", "any_of", "all_of",
    )

    def __init__(self) -> None:
        self.label: str | None = None
        self.never = False  # the ``false`` schema
        self.ref: _Node | None = None
        self.types: frozenset[str] | None = None
        self.enum: list[Any] | None = None
        self.enum_strings: frozenset[str] | None = None
        self.const: tuple[Any] | None = None
        self.props: dict[str, _Node] | None = None
        self.required: tuple[str, ...] | None = None
        self.additional: _Node | bool | None = None  # False: closed; None: anything goes
        self.defaults: dict[str, Any] | None = None
        self.items: _Node | None = None
        self.minimum: float | None = None
        self.maximum: float | None = None
        self.ex_minimum: float | None = None
        self.ex_maximum: float | None = None
        self.min_len: float | None = None
        self.max_len: float | None = None
        self.min_items: float | None = None
        self.max_items: float | None = None
        self.pattern: Callable[[str], re.Match[str] | None] | None = None
        self.pattern_text = ""
        self.format = ""
        self.format_check: Callable[[str], bool] | None = None
        self.soft = False
        self.tag: str | None = None
        self.members: dict[str, _Node] = {}
        self.one_of: list[_Node] | None = None
        self.any_of: list[_Node] | None = None
        self.all_of: list[_Node] | None = None

    # the expected-type phrase of a type mismatch: a schema's name, or Luma type names
    def expected(self) -> str:
        if self.label:
            return self.label
        names = []
        for t in self.types or ():
            if t == "object" and self.props is None and isinstance(self.additional, _Node):
                names.append("map")
            else:
                names.append(TYPE_NAMES.get(t, t))
        return " or ".join(names)

    def check(self, value: Any, path: _Path, run: _Run) -> Any:
        if self.never:
            run.add(path, "no value is allowed here", "type")
            return value
        if self.ref is not None:
            value = self.ref.check(value, path, run)
        t = type(value)
        types = self.types
        if types is not None:
            if t is float:
                if not math.isfinite(value):
                    ok = False
                elif "number" in types:
                    ok = True
                elif "integer" in types and value.is_integer():
                    ok = True
                    if run.fill:
                        value = int(value)
                else:
                    ok = False
            elif t is int:
                ok = "integer" in types or "number" in types
            else:
                kind = _JSON_KINDS.get(t)
                if kind is None:
                    kind = _JSON_KINDS.get(_base_type(value), "")
                ok = kind in types
            if not ok:
                run.add(path, f"expected {self.expected()}, got {kind_name(value)}", "type")
                return value
        if self.enum is not None:
            if self.enum_strings is not None and t is str:
                ok = value in self.enum_strings
            else:
                ok = any(json_equal(value, e) for e in self.enum)
            if not ok:
                shown = ", ".join(render_value(e) for e in self.enum[:12])
                if len(self.enum) > 12:
                    shown += ", ..."
                run.add(path, f"{render_value(value)} is not one of {shown}", "enum")
                return value
        if self.const is not None and not json_equal(value, self.const[0]):
            run.add(path, f"expected {render_value(self.const[0])}, got {render_value(value)}",
                    "const")
            return value
        if t is dict or (t not in _JSON_KINDS and isinstance(value, dict)):
            if self.tag is not None:
                return self._union(value, path, run)
            if self.props is not None or self.additional is not None:
                value = self._object(value, path, run)
        elif t is list or (t not in _JSON_KINDS and isinstance(value, list)):
            value = self._array(value, path, run)
        elif t is str:
            self._string(value, path, run)
        elif t is int or t is float:
            self._number(value, path, run)
        if self.one_of is not None:
            value = self._alternatives(self.one_of, value, path, run, exactly_one=True)
        if self.any_of is not None:
            value = self._alternatives(self.any_of, value, path, run, exactly_one=False)
        if self.all_of is not None:
            for node in self.all_of:
                value = node.check(value, path, run)
        return value

    # objects ---------------------------------------------------------------------------
    def _object(self, value: dict[str, Any], path: _Path, run: _Run) -> Any:
        props: dict[str, _Node] = self.props or {}
        out: dict[str, Any] | None = {} if run.fill else None
        for name, child in props.items():
            if name in value:
                checked = child.check(value[name], (path, name), run)
                if out is not None:
                    out[name] = checked
            elif out is not None and self.defaults and name in self.defaults:
                if run.default_depth >= _MAX_DEFAULT_DEPTH:
                    # a schema whose default contains itself (`inner: P @default({})`) would
                    # expand forever: deep enough, the default is taken as written
                    out[name] = copy_json(self.defaults[name])
                    continue
                run.default_depth += 1
                try:
                    out[name] = child.check(copy_json(self.defaults[name]), (path, name), run)
                finally:
                    run.default_depth -= 1
        for name in self.required or ():
            if name not in value and (out is None or name not in out):
                run.add(path, f"missing required field {name!r}", "required")
        additional = self.additional
        for key, item in value.items():
            if key in props:
                continue
            if additional is False:
                run.add(path, f"unknown field {key!r}", "unknown_field")
            elif isinstance(additional, _Node):
                item = additional.check(item, (path, key), run)
            if out is not None:
                out[key] = item
        return value if out is None else out

    def _union(self, value: dict[str, Any], path: _Path, run: _Run) -> Any:
        members = self.members
        tag_name = self.tag or ""
        tag = value.get(tag_name, _MISSING)
        member = members.get(tag) if isinstance(tag, str) else None
        if member is not None:
            return member.check(value, path, run)
        if tag is _MISSING and run.infer_tags:
            fits = []
            for name, node in members.items():
                trial = run.trial()
                result = node.check({tag_name: name, **value}, path, trial)
                if not trial.hard_failed():
                    fits.append((name, result, trial))
            if len(fits) == 1:
                _, result, trial = fits[0]
                run.out.extend(trial.out)
                return result
            if fits:  # not a wrong tag: a value that leaves the choice open
                run.add((path, tag_name), "must identify a tagged union member: the value fits "
                        f"more than one ({_listed([n for n, _, _ in fits])}).", "tag")
                return value
        run.add((path, tag_name), "must identify a tagged union member.", "tag")
        return value

    # lists, strings, numbers ---------------------------------------------------------------
    def _array(self, value: list[Any], path: _Path, run: _Run) -> Any:
        soft = self.soft and run.soft_rules
        n = len(value)
        if self.min_items is not None and n < self.min_items:
            run.add(path, f"{render_value(value)} has {plural(n, 'item')}, fewer than the "
                          f"minimum of {self.min_items}", "length", soft)
        if self.max_items is not None and n > self.max_items:
            run.add(path, f"{render_value(value)} has {plural(n, 'item')}, more than the "
                          f"maximum of {self.max_items}", "length", soft)
        items = self.items
        if items is None:
            return list(value) if run.fill else value
        if run.fill:
            return [items.check(item, (path, i), run) for i, item in enumerate(value)]
        for i, item in enumerate(value):
            items.check(item, (path, i), run)
        return value

    def _string(self, value: str, path: _Path, run: _Run) -> None:
        soft = self.soft and run.soft_rules
        if self.min_len is not None or self.max_len is not None:
            n = len(value)
            if self.min_len is not None and n < self.min_len:
                run.add(path, f"{render_value(value)} has {plural(n, 'character')}, fewer "
                              f"than the minimum of {self.min_len}", "length", soft)
            if self.max_len is not None and n > self.max_len:
                run.add(path, f"{render_value(value)} has {plural(n, 'character')}, more "
                              f"than the maximum of {self.max_len}", "length", soft)
        if self.pattern is not None and self.pattern(value) is None:
            run.add(path, f"{render_value(value)} does not match the pattern "
                          f"{self.pattern_text}", "pattern", soft)
        if self.format_check is not None and not self.format_check(value):
            run.add(path, f"{render_value(value)} is not a valid {_FORMAT_NAMES[self.format]}",
                    "format", soft)

    def _number(self, value: float, path: _Path, run: _Run) -> None:
        soft = self.soft and run.soft_rules
        if self.minimum is not None and value < self.minimum:
            run.add(path, f"{render_value(value)} is less than the minimum of "
                          f"{render_value(self.minimum)}", "range", soft)
        if self.ex_minimum is not None and value <= self.ex_minimum:
            run.add(path, f"{render_value(value)} is not greater than "
                          f"{render_value(self.ex_minimum)}", "range", soft)
        if self.maximum is not None and value > self.maximum:
            run.add(path, f"{render_value(value)} is greater than the maximum of "
                          f"{render_value(self.maximum)}", "range", soft)
        if self.ex_maximum is not None and value >= self.ex_maximum:
            run.add(path, f"{render_value(value)} is not less than "
                          f"{render_value(self.ex_maximum)}", "range", soft)

    def _alternatives(self, nodes: list[_Node], value: Any, path: _Path, run: _Run,
                      exactly_one: bool) -> Any:
        fits = []
        for node in nodes:
            trial = run.trial()
            result = node.check(value, path, trial)
            if not trial.hard_failed():
                fits.append((result, trial))
                if not exactly_one:
                    break
        if not fits:
            run.add(path, f"{render_value(value)} does not match any of the allowed shapes",
                    "alternatives")
            return value
        if len(fits) > 1:
            run.add(path, f"{render_value(value)} matches more than one of the allowed shapes",
                    "alternatives")
            return value
        result, trial = fits[0]
        run.out.extend(trial.out)
        return result


def _listed(names: list[str]) -> str:
    quoted = [f'"{n}"' for n in names]
    return ", ".join(quoted[:-1]) + f" and {quoted[-1]}"


def _printable(text: str) -> str:
    """``text`` as written, with only its unprintable characters escaped (one line)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _base_type(value: Any) -> type:
    for t in (bool, str, list, dict):
        if isinstance(value, t):
            return t
    return type(value)


_FORMAT_NAMES = {"email": "email address", "uri": "URI", "date": "date (YYYY-MM-DD)",
                 "date-time": "date-time (RFC 3339)", "uuid": "UUID"}

# ----------------------------------------------------------------------------- compilation

# Keywords that only describe; validation ignores them.
_ANNOTATIONS = frozenset({
    "$schema", "$id", "$comment", "$defs", "definitions", "title", "description", "default",
    "examples", "deprecated", "readOnly", "writeOnly",
})
_HANDLED = frozenset({
    "$ref", "type", "enum", "const", "properties", "required", "additionalProperties", "items",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
    "minItems", "maxItems", "pattern", "format", "oneOf", "anyOf", "allOf",
})


class _Compiler:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.nodes: dict[int, _Node] = {}

    def node(self, schema: Any, label: str | None = None) -> _Node:
        cached = self.nodes.get(id(schema))
        if cached is not None:
            return cached
        node = _Node()
        # registered before its children are compiled, so recursive $refs find it
        self.nodes[id(schema)] = node
        if schema is True or schema == {}:
            node.label = label
            return node
        if schema is False:
            node.never = True
            return node
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {schema!r}")
        for key in schema:
            if key not in _HANDLED and key not in _ANNOTATIONS and not key.startswith("x-"):
                raise SchemaError(f"unsupported JSON Schema keyword '{key}'")
        node.label = label
        if "$ref" in schema:
            node.ref = self.ref(schema["$ref"])
        self._types(node, schema)
        if "enum" in schema:
            node.enum = list(schema["enum"])
            if all(type(e) is str for e in node.enum):
                node.enum_strings = frozenset(node.enum)
        if "const" in schema:
            node.const = (schema["const"],)
        self._object(node, schema)
        if "items" in schema:
            node.items = self.node(schema["items"])
        self._bounds(node, schema)
        if "pattern" in schema:
            raw = schema.get(PATTERN_KEY)
            try:
                if isinstance(raw, str):
                    # only for a schema with a pattern: the analysis is not start-up's cost
                    from luma.schema.patterns import matching_time

                    compiled = re.compile(raw)
                    if not matching_time(raw).is_bounded:  # refused by the checker (E049)
                        raise SchemaError(f"pattern {raw!r} can take more than linear time "
                                          "to match")
                    node.pattern = compiled.fullmatch
                    node.pattern_text = "'" + _printable(raw) + "'"
                else:
                    node.pattern = re.compile(schema["pattern"]).search
                    node.pattern_text = render_value(schema["pattern"])
            except (re.error, RecursionError) as exc:
                raise SchemaError(f"invalid pattern {raw or schema['pattern']!r}: {exc}") from None
        if "format" in schema and schema["format"] in FORMAT_CHECKS:
            node.format = schema["format"]
            node.format_check = FORMAT_CHECKS[schema["format"]]
        node.soft = schema.get(SEVERITY_KEY) == "soft"
        for key in ("oneOf", "anyOf", "allOf"):
            if key in schema:
                branches = schema[key]
                if not isinstance(branches, list) or not branches:
                    raise SchemaError(f"'{key}' must be a non-empty list of schemas")
                setattr(node, {"oneOf": "one_of", "anyOf": "any_of", "allOf": "all_of"}[key],
                        [self.node(b) for b in branches])
        if isinstance(schema.get(TAG_KEY), str) and node.one_of is not None:
            self._union(node, schema)
        return node

    @staticmethod
    def _types(node: _Node, schema: dict[str, Any]) -> None:
        if "type" not in schema:
            return
        types = schema["type"]
        types = [types] if isinstance(types, str) else list(types)
        for t in types:
            if t not in TYPE_NAMES:
                raise SchemaError(f"unknown JSON Schema type {t!r}")
        node.types = frozenset(types)

    def _object(self, node: _Node, schema: dict[str, Any]) -> None:
        if "properties" in schema:
            node.props = {k: self.node(v) for k, v in schema["properties"].items()}
            defaults = {k: v["default"] for k, v in schema["properties"].items()
                        if isinstance(v, dict) and "default" in v}
            node.defaults = defaults or None
        if "required" in schema:
            node.required = tuple(schema["required"])
        if "additionalProperties" in schema:
            extra = schema["additionalProperties"]
            node.additional = False if extra is False else (None if extra is True
                                                            else self.node(extra))

    @staticmethod
    def _bounds(node: _Node, schema: dict[str, Any]) -> None:
        for key, slot in (("minimum", "minimum"), ("maximum", "maximum"),
                          ("exclusiveMinimum", "ex_minimum"), ("exclusiveMaximum", "ex_maximum"),
                          ("minLength", "min_len"), ("maxLength", "max_len"),
                          ("minItems", "min_items"), ("maxItems", "max_items")):
            if key in schema:
                bound = schema[key]
                if type(bound) not in (int, float):
                    raise SchemaError(f"'{key}' must be a number, not {bound!r}")
                setattr(node, slot, bound)

    def _union(self, node: _Node, schema: dict[str, Any]) -> None:
        tag = schema[TAG_KEY]
        members: dict[str, _Node] = {}
        for branch, compiled in zip(schema["oneOf"], node.one_of or ()):
            prop = branch.get("properties", {}).get(tag) if isinstance(branch, dict) else None
            if not isinstance(prop, dict) or not isinstance(prop.get("const"), str):
                return  # not a tagged union after all: validate as a plain oneOf
            members[prop["const"]] = compiled
        node.tag = tag
        node.members = members
        node.one_of = None

    def ref(self, ref: Any) -> _Node:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaError(f"only local references are supported, not {ref!r}")
        target: Any = self.root
        label = None
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            key = raw.replace("~1", "/").replace("~0", "~")
            try:
                target = target[int(key)] if isinstance(target, list) else target[key]
            except (KeyError, IndexError, ValueError, TypeError):
                raise SchemaError(f"unresolvable reference {ref!r}") from None
            label = key
        return self.node(target, label if ref.startswith("#/$defs/") else None)


# ------------------------------------------------------------------------------ public API


class SchemaValidator:
    """A schema compiled for validation. Treat the schema as frozen once compiled."""

    __slots__ = ("schema", "_root")

    def __init__(self, schema: dict[str, Any] | bool) -> None:
        self.schema = schema
        self._root = _Compiler(schema).node(schema)

    @classmethod
    def sharing(cls, schema: dict[str, Any] | bool, same: SchemaValidator) -> SchemaValidator:
        """A validator for ``schema`` that reuses the compiled form of an equal schema."""
        validator = cls.__new__(cls)
        validator.schema = schema
        validator._root = same._root
        return validator

    def validate(self, value: Any, *, soft_rules: bool = True) -> list[Violation]:
        """Every violation of ``value``; soft rules are reported with ``soft=True`` unless
        ``soft_rules`` is false, which makes them hard."""
        run = _Run(False, soft_rules, False)
        self._root.check(value, None, run)
        return run.out

    def validate_and_fill(self, value: Any, *, soft_rules: bool,
                          infer_tags: bool = False) -> tuple[Any, list[Violation]]:
        """Fill defaults, turn whole floats into ints where an int is expected, and validate.

        With ``infer_tags`` a tagged-union value that lacks its tag gets the tag of the one
        member it fits (input semantics). The returned value is new wherever the schema
        describes its structure; parts typed ``any`` are shared with ``value``.
        """
        run = _Run(True, soft_rules, infer_tags)
        result = self._root.check(value, None, run)
        return result, run.out


_CACHE_SIZE = 1024
_CACHE_LOCK = threading.Lock()
# By identity first (no cost beyond a lookup); a schema object seen for the first time is then
# looked up by its JSON text, so callers that rebuild an equal schema do not recompile it.
_BY_ID: OrderedDict[int, SchemaValidator] = OrderedDict()
_BY_TEXT: OrderedDict[str, SchemaValidator] = OrderedDict()


def validator_for(schema: dict[str, Any] | bool) -> SchemaValidator:
    """The cached validator of a schema object. The schema must not change after this call."""
    key = id(schema)
    with _CACHE_LOCK:
        found = _BY_ID.get(key)
        if found is not None and found.schema is schema:
            _BY_ID.move_to_end(key)
            return found
    try:
        # key order is kept: it decides the order of fields in filled values and violations
        text: str | None = json.dumps(schema, separators=(",", ":"), allow_nan=True)
    except (TypeError, ValueError):
        text = None
    with _CACHE_LOCK:
        same = _BY_TEXT.get(text) if text is not None else None
    if same is not None:
        compiled = SchemaValidator.sharing(schema, same)
    else:
        compiled = SchemaValidator(schema)
    with _CACHE_LOCK:
        _remember(_BY_ID, key, compiled)
        if text is not None and same is None:
            _remember(_BY_TEXT, text, compiled)
    return compiled


def _remember(cache: OrderedDict[Any, SchemaValidator], key: Any, value: SchemaValidator) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > _CACHE_SIZE:
        cache.popitem(last=False)


def validate(schema: dict[str, Any], value: Any, *, soft_rules: bool = True) -> list[Violation]:
    """Every violation of ``value`` against ``schema`` (hard and soft)."""
    return validator_for(schema).validate(value, soft_rules=soft_rules)


def validate_and_fill(schema: dict[str, Any], value: Any, *, soft_rules: bool,
                      infer_tags: bool = False) -> tuple[Any, list[Violation]]:
    """Fill ``@default``s, coerce whole floats to int, then validate; see
    :meth:`SchemaValidator.validate_and_fill`."""
    return validator_for(schema).validate_and_fill(value, soft_rules=soft_rules,
                                                   infer_tags=infer_tags)


