"""``needs`` resolution (RUNTIME.md §3 step 7, §4): build each context a tool declares from the
environment, as ``tool_contexts`` in the config describes it, and check it against its schema.

Context values are secrets. No message here ever contains one: a failure says which field and
which environment variable, and what kind of problem, never the text it found.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from luma.runtime.errors import LumaError
from luma.schema.validate import SchemaValidator, Violation

CONTEXT_INVALID = "TOOL_CONTEXT_INVALID"


class ContextProblem(Exception):
    """Why a context cannot be built; ``reason`` never holds a secret value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def context_error(tool: str, context: str, reason: str) -> LumaError:
    return LumaError(CONTEXT_INVALID, f"Tool '{tool}' cannot use context '{context}': {reason}",
                     tool=tool)


def parse_env_text(text: str, parse: str, field: str, env_name: str) -> Any:
    """One context field from its environment text, by ``parse`` kind (RUNTIME.md §4)."""
    if parse == "string":
        return text
    where = f"field '{field}' from {env_name}"
    if parse == "boolean":
        if text == "true":
            return True
        if text == "false":
            return False
        raise ContextProblem(f'{where} must be "true" or "false".')
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        if parse == "json":
            raise ContextProblem(f"{where} is not valid JSON.") from None
        value = None  # reported below as not a number
    if parse == "json":
        if isinstance(value, float) and not math.isfinite(value):
            raise ContextProblem(f"{where} is not valid JSON.")
        return value
    if type(value) not in (int, float) or not math.isfinite(value):
        raise ContextProblem(f"{where} is not a finite number." if parse == "number"
                             else f"{where} is not a whole number.")
    if parse == "integer":
        if isinstance(value, float):
            if not value.is_integer():
                raise ContextProblem(f"{where} is not a whole number.")
            return int(value)
    return value


def build_context(fields: Mapping[str, Any], env: Mapping[str, str],
                  keep_secret: Callable[[str], None]) -> dict[str, Any]:
    """Build one context from its ``tool_contexts`` entry (field name → ``ContextField``).

    Each string field's text, and the text of a ``json`` field with every string inside it, is
    handed to ``keep_secret`` as soon as it is read. Numbers and booleans are not: they are
    not secret-like, and scrubbing ``true`` or ``5432`` from a trace would corrupt it.
    """
    value: dict[str, Any] = {}
    for field, spec in fields.items():
        text = env.get(spec.env)
        if text is None:
            raise ContextProblem(f"field '{field}': environment variable {spec.env} is not set.")
        if spec.parse in ("string", "json"):
            keep_secret(text)
        parsed = parse_env_text(text, spec.parse, field, spec.env)
        if spec.parse == "json":
            for s in strings_in(parsed):
                keep_secret(s)
        value[field] = parsed
    return value


def strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)


def schema_problem(violations: Sequence[Violation]) -> str | None:
    """The hard violations of a context value, described without the values themselves.
    Fields the schema does not declare are allowed, at any depth: the host may pass more than
    the contract describes (a password, say), and it reaches the handler unchanged."""
    reasons = []
    for v in violations:
        if v.soft or v.rule == "unknown_field":
            continue
        where = f"field '{v.path}'" if v.path else "the value"
        if v.rule in ("type", "required"):
            reasons.append(f"{where}: {v.message}" if v.path else v.message)
        else:
            reasons.append(f"{where} breaks its {_RULE_WORDS.get(v.rule, v.rule)} rule")
    return "; ".join(reasons) + "." if reasons else None


_RULE_WORDS = {"range": "@range", "length": "@length", "pattern": "@pattern",
               "format": "@format", "enum": "enum", "const": "constant", "tag": "tagged union",
               "alternatives": "type"}


@dataclass(frozen=True, slots=True)
class Need:
    """One ``needs <name>: <Schema>`` of a tool, with its compiled schema."""

    name: str
    validator: SchemaValidator


class NeedsResolver:
    """Resolves the ``needs`` of one tool for one agent. Built once; :meth:`resolve` per call."""

    def __init__(self, tool: str, needs: Sequence[Need], contexts: Mapping[str, Any],
                 allowed: Sequence[str] | None, agent: str | None) -> None:
        self.tool = tool
        self.needs = tuple(needs)
        self.contexts = contexts
        self.allowed = None if allowed is None else frozenset(allowed)
        self.agent = agent

    def resolve(self, env: Mapping[str, str],
                keep_secret: Callable[[str], None]) -> dict[str, Any]:
        """``{context name: value}``; every secret string read is handed to ``keep_secret``
        first, even when the call then fails. Raises ``LumaError`` ``TOOL_CONTEXT_INVALID``
        naming the first context that cannot be used."""
        out: dict[str, Any] = {}
        for need in self.needs:
            name = need.name
            if self.allowed is not None and name not in self.allowed:
                raise context_error(self.tool, name, f"agent '{self.agent}' does not allow it in "
                                    "tool_contexts.")
            fields = self.contexts.get(name)
            if fields is None:
                raise context_error(self.tool, name, "it is not configured in tool_contexts of "
                                    "the config file.")
            try:
                value = build_context(fields, env, keep_secret)
            except ContextProblem as problem:
                raise context_error(self.tool, name, problem.reason) from None
            checked, violations = need.validator.validate_and_fill(value, soft_rules=False)
            problem_text = schema_problem(violations)
            if problem_text is not None:
                raise context_error(self.tool, name, problem_text)
            out[name] = checked
        return out
