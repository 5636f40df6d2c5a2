"""The value an ``ask`` wants, and reading the model's final answer (MODELS.md §2).

``AnswerShape`` is what an ``ask ... -> Type`` asks for: the schema local validation uses, the
schema sent to the provider (a type that is not a plain object schema is wrapped as
``{"value": …}``), and whether plain text is wanted (``-> string`` with no tools).

``read_answer`` parses tolerantly where it is safe — a JSON value inside a Markdown code fence
or after a sentence is found — unwraps, turns ``null`` for an optional field into "absent"
(strict schemas make every field required, so a model sends ``null`` for what it would leave
out), and validates.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from luma.schema.compile import TAG_KEY
from luma.schema.validate import Violation, validator_for
from luma.syntax import ast

WRAPPER_KEY = "value"
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)
_MAX_SCAN = 64   # start positions tried when looking for JSON inside prose


@dataclass(frozen=True, slots=True)
class AnswerShape:
    """What one ``ask`` type asks the model for."""

    name: str                    # the response format's name (the type's name, or "answer")
    schema: dict[str, Any]       # the standalone schema the answer is validated against
    wire: dict[str, Any]         # the schema sent to the provider (wrapped when needed)
    wrapped: bool
    is_string: bool              # `-> string`: plain text when no tools are offered


def answer_shape(type_: ast.TypeExpr, schema: dict[str, Any]) -> AnswerShape:
    """The shape of ``ask ... -> type_``; ``schema`` is the type's standalone schema."""
    wire = {k: v for k, v in schema.items() if k != "$schema"}
    wrapped = not _plain_object(wire)
    if wrapped:
        inner = {k: v for k, v in wire.items() if k != "$defs"}
        wrapper: dict[str, Any] = {"type": "object", "properties": {WRAPPER_KEY: inner},
                                   "required": [WRAPPER_KEY], "additionalProperties": False}
        if "$defs" in wire:
            wrapper["$defs"] = wire["$defs"]
        wire = wrapper
    return AnswerShape(_format_name(type_), schema, wire, wrapped,
                       isinstance(type_, ast.PrimitiveType) and type_.name == "string")


def _plain_object(schema: dict[str, Any]) -> bool:
    return (schema.get("type") == "object" and isinstance(schema.get("properties"), dict)
            and not any(k in schema for k in ("oneOf", "anyOf", "allOf")))


def _format_name(type_: ast.TypeExpr) -> str:
    if isinstance(type_, ast.NamedType):
        return type_.name
    if isinstance(type_, ast.ListType) and isinstance(type_.item, ast.NamedType):
        return f"{type_.item.name}_list"
    return "answer"


@dataclass(frozen=True, slots=True)
class AnswerProblem:
    """Why a final answer was not accepted: it is not JSON (``reason``), or it broke the
    schema (``violations``)."""

    reason: str | None = None
    violations: tuple[Violation, ...] = ()

    def lines(self, prefix: str) -> list[str]:
        """One line per problem; violation paths start at ``prefix``."""
        if self.reason is not None:
            return [self.reason]
        return [v.render(prefix) for v in self.violations]


def read_answer(shape: AnswerShape, text: str | None, *, plain: bool
                ) -> tuple[Any, list[Violation], AnswerProblem | None]:
    """The validated answer and its soft-rule violations, or the problem that rejects it."""
    if plain:
        value: Any = text or ""
    else:
        if text is None or not text.strip():
            return None, [], AnswerProblem(reason="the answer is empty")
        found, reason = extract_json(text)
        if reason is not None:
            if not shape.is_string:
                return None, [], AnswerProblem(reason=f"the answer is not JSON ({reason})")
            value = text.strip()   # a string answered as text is still the string
        else:
            value = found
            if shape.wrapped and isinstance(value, dict) and set(value) == {WRAPPER_KEY}:
                value = value[WRAPPER_KEY]
            elif shape.is_string and not isinstance(value, str):
                value = text.strip()
    value = drop_optional_nulls(shape.schema, value)
    checked, violations = validator_for(shape.schema).validate_and_fill(value, soft_rules=True)
    hard = [v for v in violations if not v.soft]
    if hard:
        return None, [], AnswerProblem(violations=tuple(hard))
    return checked, violations, None


# ------------------------------------------------------------------------------- parsing


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_no_constants)


def extract_json(text: str) -> tuple[Any, str | None]:
    """The JSON value in ``text``: the whole text, else a fenced block, else the first object
    (or list) that starts somewhere in the prose. Returns ``(value, None)`` or
    ``(None, why the whole text is not JSON)``."""
    stripped = text.strip()
    try:
        return _loads(stripped), None
    except json.JSONDecodeError as exc:
        reason = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except ValueError as exc:
        reason = str(exc)
    for match in _FENCE.finditer(text):
        try:
            return _loads(match.group(2).strip()), None
        except ValueError:
            continue
    decoder = json.JSONDecoder(parse_constant=_no_constants)
    first: tuple[Any] | None = None
    tried = 0
    for i, ch in enumerate(stripped):
        if ch not in "{[":
            continue
        tried += 1
        if tried > _MAX_SCAN:
            break
        try:
            value, _ = decoder.raw_decode(stripped, i)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value, None
        if first is None:
            first = (value,)
    if first is not None:
        return first[0], None
    return None, reason


def drop_optional_nulls(schema: dict[str, Any], value: Any) -> Any:
    """``value`` with every ``null`` of an optional field removed (it means "absent")."""
    return _Nulls(schema).strip(schema, value, 0)


class _Nulls:
    def __init__(self, root: dict[str, Any]) -> None:
        self.defs = root.get("$defs", {}) if isinstance(root, dict) else {}

    def strip(self, node: Any, value: Any, depth: int) -> Any:
        if not isinstance(node, dict) or depth > 64:
            return value
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            node = self.defs.get(ref[len("#/$defs/"):], {})
            if not isinstance(node, dict):
                return value
        if isinstance(value, dict):
            tag = node.get(TAG_KEY)
            if isinstance(tag, str) and isinstance(node.get("oneOf"), list):
                for member in node["oneOf"]:
                    const = member.get("properties", {}).get(tag, {}).get("const") \
                        if isinstance(member, dict) else None
                    if const is not None and const == value.get(tag):
                        return self.strip(member, value, depth + 1)
                return value
            properties = node.get("properties")
            extra = node.get("additionalProperties")
            if not isinstance(properties, dict) and not isinstance(extra, dict):
                return value
            properties = properties if isinstance(properties, dict) else {}
            required = set(node.get("required") or ())
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key in properties:
                    if item is None and key not in required:
                        continue
                    out[key] = self.strip(properties[key], item, depth + 1)
                elif isinstance(extra, dict):
                    out[key] = self.strip(extra, item, depth + 1)
                else:
                    out[key] = item
            return out
        if isinstance(value, list) and isinstance(node.get("items"), dict):
            return [self.strip(node["items"], item, depth + 1) for item in value]
        return value
