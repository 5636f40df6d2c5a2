"""Per-provider schema dialects: thin transformers over the one neutral JSON Schema.

``luma.schema.compile`` produces a single neutral form (Draft 2020-12, ``$defs``, ``x-luma-*``
keys). Each provider accepts a different subset of JSON Schema, so each gets one function here:

- ``openai_schema``: OpenAI strict mode when it can be had (every object closed, every property
  required, optional properties nullable, a type on every node (a ``const`` becomes a typed
  one-value ``enum``), unsupported keywords moved into ``description``, within the documented
  size limits), else plain JSON Schema with ``strict`` off.
- ``anthropic_schema``: standard JSON Schema with ``title`` and ``$schema`` removed.
- ``gemini_schema``: the JSON Schema subset of Gemini's ``responseJsonSchema`` and
  ``parametersJsonSchema`` fields (``$ref``/``$defs`` and ``additionalProperties`` kept, ``const``
  as a typed one-value ``enum``, a ``$ref`` alone in its node, other keywords in words, a
  recursive field made optional because Gemini takes recursion only through optional fields).

Every dialect drops the ``x-luma-*`` keys. Whatever a dialect leaves out of the wire is still
enforced by Luma's local validation of the value that comes back.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

DEFS_PREFIX = "#/$defs/"
LUMA_KEY_PREFIX = "x-luma-"

# Keywords whose value is one schema, a list of schemas, or a name → schema map.
_ONE_SCHEMA = ("items", "not", "contains", "propertyNames")
_SCHEMA_LISTS = ("oneOf", "anyOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "$defs", "patternProperties")

# OpenAI strict mode: https://platform.openai.com/docs/guides/structured-outputs (supported schemas)
OPENAI_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
_OPENAI_STRICT_KEYS = frozenset({
    "type", "description", "title", "properties", "required", "additionalProperties", "items",
    "enum", "const", "anyOf", "$ref", "$defs", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
})

# OpenAI strict mode's documented size limits.
OPENAI_MAX_PROPERTIES = 5000
OPENAI_MAX_NESTING = 10
OPENAI_MAX_ENUM_VALUES = 1000
OPENAI_MAX_STRING_CHARS = 120_000       # property, definition and enum names, together
OPENAI_LARGE_ENUM = 250                 # an enum longer than this ...
OPENAI_LARGE_ENUM_CHARS = 15_000        # ... has at most this many characters in its values

# Gemini's JSON-Schema fields (generationConfig.responseJsonSchema and
# functionDeclarations[].parametersJsonSchema): the keywords the API documents as supported.
# A $ref must be alone in its node (beside other $-keywords); a recursive reference is accepted
# only inside a property that is not required.
GEMINI_FORMATS = frozenset({"date-time"})
_GEMINI_KEYS = frozenset({
    "$id", "$defs", "$ref", "$anchor", "type", "format", "title", "description", "enum", "items",
    "prefixItems", "minItems", "maxItems", "minimum", "maximum", "anyOf", "properties",
    "additionalProperties", "required", "propertyOrdering",
})


class StrictSchemaError(ValueError):
    """The schema has no form that a provider's strict mode accepts; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ---------------------------------------------------------------------------------- common
def strip_luma_keys(schema: Any) -> Any:
    """A copy of a schema without the ``x-luma-*`` keys (and without ``$schema``)."""
    return _map_schema(schema, lambda node: {k: v for k, v in node.items()
                                             if not k.startswith(LUMA_KEY_PREFIX)
                                             and k != "$schema"})


def _map_schema(schema: Any, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """Apply ``fn`` to every schema node, children first rebuilt, returning a new tree."""
    if not isinstance(schema, dict):
        return schema
    node = dict(schema)
    for key in _ONE_SCHEMA:
        if isinstance(node.get(key), dict):
            node[key] = _map_schema(node[key], fn)
    if isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = _map_schema(node["additionalProperties"], fn)
    for key in _SCHEMA_LISTS:
        if isinstance(node.get(key), list):
            node[key] = [_map_schema(s, fn) for s in node[key]]
    for key in _SCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            node[key] = {name: _map_schema(s, fn) for name, s in node[key].items()}
    return fn(node)


def _ref_name(node: dict[str, Any]) -> str | None:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(DEFS_PREFIX):
        return ref[len(DEFS_PREFIX):]
    return None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _phrase(key: str, value: Any) -> str:
    """A keyword the wire cannot carry, said in words for the model."""
    words = {
        "minLength": f"at least {value} characters",
        "maxLength": f"at most {value} characters",
        "minItems": f"at least {value} items",
        "maxItems": f"at most {value} items",
        "minimum": f"minimum {value}",
        "maximum": f"maximum {value}",
        "pattern": f"must match the regular expression {value}",
        "format": f"format: {value}",
        "default": f"default: {_json(value)}",
    }
    if key == "examples" and isinstance(value, list):
        return "; ".join(f"example: {_json(v)}" for v in value)
    return words.get(key, f"{key}: {_json(value)}")


def _describe(node: dict[str, Any], phrases: list[str]) -> None:
    """Append phrases to a node's description, in one parenthesised line."""
    if not phrases:
        return
    extra = "; ".join(phrases)
    base = node.get("description")
    node["description"] = f"{base} ({extra})" if isinstance(base, str) and base else \
        extra[0].upper() + extra[1:] + "."


# ---------------------------------------------------------------------------------- OpenAI
def openai_schema(schema: dict[str, Any], strict: bool | None) -> tuple[dict[str, Any], bool]:
    """The schema as OpenAI should receive it, and whether to send ``strict: true``.

    ``strict`` True: the strict form or ``StrictSchemaError``; False: plain JSON Schema;
    None: the strict form whenever the schema has one, else plain JSON Schema.
    """
    if strict is False:
        return plain_schema(schema), False
    try:
        return openai_strict_schema(schema), True
    except StrictSchemaError:
        if strict:
            raise
        return plain_schema(schema), False


def plain_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Standard JSON Schema for a provider that accepts it as it is (no Luma keys)."""
    result: dict[str, Any] = strip_luma_keys(schema)
    return result


def openai_strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI strict form of a neutral schema, or ``StrictSchemaError``."""
    source = strip_luma_keys(schema)
    defs: dict[str, Any] = source.get("$defs", {}) if isinstance(source.get("$defs"), dict) else {}
    root = _StrictOpenAI(defs).node(source, path="the answer", root=True)
    if defs:
        root["$defs"] = {name: _StrictOpenAI(defs).node(d, path=f"'{name}'")
                         for name, d in defs.items()}
    _openai_limits(root)
    return root


def _openai_limits(schema: dict[str, Any]) -> None:
    """``StrictSchemaError`` when a strict schema passes one of OpenAI's documented limits."""
    properties = enum_values = chars = 0
    for node in _nodes(schema):
        props = node.get("properties")
        if isinstance(props, dict):
            properties += len(props)
            chars += sum(len(k) for k in props)
        values = node.get("enum")
        if isinstance(values, list):
            enum_values += len(values)
            text = sum(len(v) for v in values if isinstance(v, str))
            chars += text
            if len(values) > OPENAI_LARGE_ENUM and text > OPENAI_LARGE_ENUM_CHARS:
                raise StrictSchemaError(
                    f"an enum of {len(values)} values has {text} characters in its values "
                    f"(strict mode allows {OPENAI_LARGE_ENUM_CHARS} beyond "
                    f"{OPENAI_LARGE_ENUM} values)")
    chars += sum(len(k) for k in schema.get("$defs", {}))
    if properties > OPENAI_MAX_PROPERTIES:
        raise StrictSchemaError(f"it has {properties} object properties (strict mode allows "
                                f"{OPENAI_MAX_PROPERTIES})")
    if enum_values > OPENAI_MAX_ENUM_VALUES:
        raise StrictSchemaError(f"it has {enum_values} enum values (strict mode allows "
                                f"{OPENAI_MAX_ENUM_VALUES})")
    if chars > OPENAI_MAX_STRING_CHARS:
        raise StrictSchemaError(f"its names and enum values have {chars} characters (strict "
                                f"mode allows {OPENAI_MAX_STRING_CHARS})")
    depth = _object_depth(schema, schema.get("$defs", {}), ())
    if depth > OPENAI_MAX_NESTING:
        raise StrictSchemaError(f"objects nest {depth} levels deep (strict mode allows "
                                f"{OPENAI_MAX_NESTING})")


def _nodes(schema: Any) -> list[dict[str, Any]]:
    """Every schema node of a tree, ``$defs`` included (copies, for reading)."""
    found: list[dict[str, Any]] = []

    def visit(node: dict[str, Any]) -> dict[str, Any]:
        found.append(node)
        return node
    _map_schema(schema, visit)
    return found


def _object_depth(node: Any, defs: dict[str, Any], expanding: tuple[str, ...]) -> int:
    """How many objects nest inside one another, a ``$ref`` followed until it recurs."""
    if not isinstance(node, dict):
        return 0
    name = _ref_name(node)
    if name is not None:
        if name in expanding:
            return 0    # recursion is allowed; its depth is the model's to choose
        return _object_depth(defs.get(name), defs, (*expanding, name))
    children: list[Any] = []
    for key in _ONE_SCHEMA:
        children.append(node.get(key))
    for key in _SCHEMA_LISTS:
        children.extend(node.get(key) or [])
    if isinstance(node.get("properties"), dict):
        children.extend(node["properties"].values())
    deepest = max((_object_depth(c, defs, expanding) for c in children), default=0)
    return deepest + (1 if node.get("type") == "object" or "properties" in node else 0)


class _StrictOpenAI:
    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs

    def node(self, schema: dict[str, Any], *, path: str, root: bool = False) -> dict[str, Any]:
        node = {k: v for k, v in schema.items() if k != "$defs"} if root else dict(schema)
        name = _ref_name(node)
        if name is not None and len(node) > 1:
            # OpenAI rejects keywords beside a $ref: inline the definition under the siblings
            target = self.defs.get(name)
            if not isinstance(target, dict):
                raise StrictSchemaError(f"{path} refers to an unknown schema '{name}'")
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            node = {**copy.deepcopy(target), **siblings}
        elif name is not None:
            return node
        if "oneOf" in node:
            node["anyOf"] = node.pop("oneOf")
        if "anyOf" in node:
            node.pop("type", None)  # the branches carry their own types
            if root:
                raise StrictSchemaError(f"{path} is a union at the top level")
            node["anyOf"] = [self.node(s, path=path) for s in node["anyOf"]]
        elif "const" in node:
            # strict mode wants a type on every schema, and says a constant as a one-value enum
            value = node.pop("const")
            node.setdefault("type", json_type(value))
            node["enum"] = [value]
        elif not any(k in node for k in ("type", "enum", "$ref")):
            raise StrictSchemaError(f"{path} accepts any JSON value")
        if root and node.get("type") != "object":
            raise StrictSchemaError(f"{path} is not an object")

        if node.get("type") == "object":
            extra = node.get("additionalProperties")
            if isinstance(extra, dict) or (extra is not False and not node.get("properties")):
                raise StrictSchemaError(f"{path} is a map with free-form keys")
            properties: dict[str, Any] = node.get("properties", {})
            required = set(node.get("required", []))
            node["properties"] = {}
            for key, sub in properties.items():
                converted = self.node(sub, path=f"field '{key}'")
                node["properties"][key] = converted if key in required else _nullable(converted)
            node["required"] = list(properties)
            node["additionalProperties"] = False
        elif isinstance(node.get("items"), dict):
            node["items"] = self.node(node["items"], path=f"the items of {path}")

        phrases: list[str] = []
        for key in list(node):
            if key == "format" and node[key] in OPENAI_STRICT_FORMATS:
                continue
            if key not in _OPENAI_STRICT_KEYS or key == "format":
                value = node.pop(key)
                if key != "default" or value is not None:
                    phrases.append(_phrase(key, value))
        _describe(node, phrases)
        return node


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """The same schema that also accepts ``null`` (how strict mode says "optional")."""
    node = dict(node)
    if "$ref" in node:
        described = {k: node.pop(k) for k in ("description",) if k in node}
        return {"anyOf": [node, {"type": "null"}], **described}
    if "anyOf" in node:
        if not any(s.get("type") == "null" for s in node["anyOf"] if isinstance(s, dict)):
            node["anyOf"] = [*node["anyOf"], {"type": "null"}]
        return node
    t = node.get("type")
    if isinstance(t, str) and t != "null":
        node["type"] = [t, "null"]
    elif isinstance(t, list) and "null" not in t:
        node["type"] = [*t, "null"]
    if isinstance(node.get("enum"), list) and None not in node["enum"]:
        node["enum"] = [*node["enum"], None]
    return node


def drop_strict_nulls(schema: dict[str, Any], value: Any) -> Any:
    """Remove the ``null``s a strict-mode model sent for optional fields, which mean "absent".

    ``schema`` is the neutral schema the strict form was made from; the result is a new value.
    """
    defs = schema.get("$defs", {}) if isinstance(schema.get("$defs"), dict) else {}
    return _drop_nulls(schema, value, defs, 0)


def _drop_nulls(schema: Any, value: Any, defs: dict[str, Any], depth: int) -> Any:
    if not isinstance(schema, dict) or depth > 64:
        return value
    name = _ref_name(schema)
    if name is not None:
        return _drop_nulls(defs.get(name), value, defs, depth + 1)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_drop_nulls(schema["items"], v, defs, depth + 1) for v in value]
    if not isinstance(value, dict):
        return value
    for key in ("oneOf", "anyOf"):
        member = _union_member(schema.get(key), value, defs)
        if member is not None:
            return _drop_nulls(member, value, defs, depth + 1)
    properties = schema.get("properties")
    extra = schema.get("additionalProperties")
    if not isinstance(properties, dict):
        if isinstance(extra, dict):
            return {k: _drop_nulls(extra, v, defs, depth + 1) for k, v in value.items()}
        return value
    required = set(schema.get("required", []))
    result = {}
    for key, item in value.items():
        if item is None and key in properties and key not in required:
            continue
        result[key] = _drop_nulls(properties.get(key), item, defs, depth + 1)
    return result


def _union_member(members: Any, value: dict[str, Any], defs: dict[str, Any]) -> Any:
    """The member of a tagged union that a value's tag names, if any."""
    if not isinstance(members, list):
        return None
    for member in members:
        if isinstance(member, dict) and _ref_name(member):
            member = defs.get(_ref_name(member) or "")
        if not isinstance(member, dict):
            continue
        for key, sub in (member.get("properties") or {}).items():
            if isinstance(sub, dict) and "const" in sub and value.get(key) == sub["const"]:
                return member
    return None


# ------------------------------------------------------------------------------- Anthropic
def anthropic_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Standard JSON Schema for Anthropic: no ``title``, no ``$schema``, no Luma keys."""
    result: dict[str, Any] = _map_schema(
        strip_luma_keys(schema), lambda node: {k: v for k, v in node.items() if k != "title"})
    return result


# ---------------------------------------------------------------------------------- Gemini
def gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as Gemini's JSON-Schema fields take it (``responseJsonSchema``,
    ``parametersJsonSchema``)."""
    source = strip_luma_keys(schema)
    out: dict[str, Any] = _map_schema(source, _gemini_node)
    for owner, field in gemini_recursive_required(source):
        node = out["$defs"][owner]
        node["required"] = [k for k in node["required"] if k != field]
        if not node["required"]:
            del node["required"]
    return out


def _gemini_node(schema: dict[str, Any]) -> dict[str, Any]:
    node = dict(schema)
    phrases: list[str] = []
    if "const" in node:
        value = node.pop("const")
        node.setdefault("type", json_type(value))
        node["enum"] = [value]
    if "oneOf" in node:
        node["anyOf"] = node.pop("oneOf")
    if "anyOf" in node and node.get("type") == "object":
        del node["type"]   # each member says its own type
    if "format" in node and node["format"] not in GEMINI_FORMATS:
        phrases.append(_phrase("format", node.pop("format")))
    for key in list(node):
        if key not in _GEMINI_KEYS:
            value = node.pop(key)
            if key != "default" or value is not None:
                phrases.append(_phrase(key, value))
    _describe(node, phrases)
    if "$ref" in node and any(not k.startswith("$") for k in node):
        # a $ref stands alone; what was said beside it moves to a one-member anyOf around it
        ref = {k: v for k, v in node.items() if k.startswith("$")}
        return {"anyOf": [ref], **{k: v for k, v in node.items() if not k.startswith("$")}}
    return node


def gemini_recursive_required(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """The required fields through which a definition refers back to itself, as (definition,
    field). Gemini takes a recursive reference only inside a field that is not required, so
    these go to it as optional (Luma's local validation still requires them)."""
    defs = schema.get("$defs", {}) if isinstance(schema.get("$defs"), dict) else {}
    found: list[tuple[str, str]] = []
    for owner, node in defs.items():
        if not isinstance(node, dict) or not isinstance(node.get("properties"), dict):
            continue
        for field in node.get("required", []):
            sub = node["properties"].get(field)
            if any(_reaches(defs, name, owner, ()) for name in _refs_in(sub)):
                found.append((owner, field))
    return found


def _refs_in(schema: Any) -> list[str]:
    return [name for node in _nodes(schema) if (name := _ref_name(node)) is not None]


def _reaches(defs: dict[str, Any], name: str, target: str, seen: tuple[str, ...]) -> bool:
    """Whether definition ``name`` is, or leads back to, definition ``target``."""
    if name == target:
        return True
    if name in seen or name not in defs:
        return False
    return any(_reaches(defs, n, target, (*seen, name)) for n in _refs_in(defs[name]))


def json_type(value: Any) -> str:
    """The JSON Schema type of a constant."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"
