"""Per-provider schema dialects: thin transformers over the one neutral JSON Schema.

``luma.schema.compile`` produces a single neutral form (Draft 2020-12, ``$defs``, ``x-luma-*``
keys). Each provider accepts a different subset of JSON Schema, so each gets one function here:

- ``openai_schema``: OpenAI strict mode when it can be had (every object closed, every property
  required, optional properties nullable, unsupported keywords moved into ``description``), else
  plain JSON Schema with ``strict`` off.
- ``anthropic_schema``: standard JSON Schema with ``title`` and ``$schema`` removed.
- ``gemini_schema``: the OpenAPI subset Gemini accepts (``$ref`` inlined, no
  ``additionalProperties``, ``const`` as a one-value ``enum``, ``nullable`` instead of type lists,
  unsupported formats described in words).

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

# Gemini's Schema object (OpenAPI 3.0 subset) as accepted by functionDeclarations.parameters and
# generationConfig.responseSchema.
GEMINI_FORMATS = frozenset({"date-time", "enum"})
_GEMINI_KEYS = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
    "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
    "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum",
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
    return root


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
        elif not any(k in node for k in ("type", "enum", "const", "$ref")):
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
    if "$ref" in node or "const" in node:
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
    """The subset of the schema that Gemini's ``Schema`` object accepts, ``$ref``s inlined."""
    source = strip_luma_keys(schema)
    defs = source.pop("$defs", {}) if isinstance(source.get("$defs"), dict) else {}
    return _GeminiDialect(defs).node(source, ())


class _GeminiDialect:
    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs

    def node(self, schema: Any, expanding: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(schema, dict):
            return {}
        node = dict(schema)
        name = _ref_name(node)
        if name is not None:
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if name in expanding or name not in self.defs:
                # a recursive reference cannot be inlined; the model gets it in words
                return self.node({**siblings, "description": _gemini_recursive(name, siblings)},
                                 expanding)
            return self.node({**copy.deepcopy(self.defs[name]), **siblings}, (*expanding, name))

        phrases: list[str] = []
        if "const" in node:
            node["enum"] = [node.pop("const")]
            node.setdefault("type", _json_type(node["enum"][0]))
        for key in ("oneOf", "allOf"):
            if key in node:
                node["anyOf"] = node.pop(key)
        if "anyOf" in node:
            node.pop("type", None)
            node["anyOf"] = [self.node(s, expanding) for s in node["anyOf"]]
        if isinstance(node.get("type"), list):
            types = [t for t in node["type"] if t != "null"]
            if len(types) < len(node["type"]):
                node["nullable"] = True
            node["type"] = types[0] if len(types) == 1 else node["type"]
        extra = node.pop("additionalProperties", None)
        if isinstance(extra, dict):
            phrases.append("an object whose keys are strings and whose values are "
                           + _gemini_words(self.node(extra, expanding)))
        if isinstance(node.get("properties"), dict):
            node["properties"] = {k: self.node(v, expanding)
                                  for k, v in node["properties"].items()}
            if not node["properties"]:
                del node["properties"]  # Gemini rejects an OBJECT with empty properties
        if not node.get("required") or "properties" not in node:
            node.pop("required", None)
        if isinstance(node.get("items"), dict):
            node["items"] = self.node(node["items"], expanding)
        if "examples" in node:
            examples = node.pop("examples")
            if isinstance(examples, list) and examples:
                node["example"] = examples[0]
        if "format" in node and node["format"] not in GEMINI_FORMATS:
            phrases.append(_phrase("format", node.pop("format")))
        for key in list(node):
            if key not in _GEMINI_KEYS:
                phrases.append(_phrase(key, node.pop(key)))
        _describe(node, phrases)
        return node


def _gemini_recursive(name: str, siblings: dict[str, Any]) -> str:
    base = siblings.get("description")
    text = f"a {name} value, with the same shape as the enclosing {name}"
    return f"{base} ({text})" if isinstance(base, str) and base else text[0].upper() + text[1:]


def _gemini_words(schema: dict[str, Any]) -> str:
    t = schema.get("type")
    return f"of type {t}" if isinstance(t, str) else "any JSON value"


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"
