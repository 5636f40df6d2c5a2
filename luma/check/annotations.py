"""Annotations on fields and parameters (LANGUAGE.md §3): known names, argument count and kind,
fit with the type, bounds, regexes, and ``@default``/``@example`` values that the type accepts."""

from __future__ import annotations

from luma.check.symbols import Symbols
from luma.check.types import type_kind, type_text
from luma.limits import MAX_LENGTH, MAX_SAFE_INTEGER
from luma.record import Record
from luma.syntax import ast
from luma.syntax.constants import FORMATS, constant_value
from luma.syntax.diagnostics import DiagnosticBag, Related, did_you_mean

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

SEVERITIES = ("soft", "hard")


class _Spec(Record):
    __slots__ = __match_args__ = ("params", "count", "applies_to", "applies_words", "repeatable")

    def __init__(self, params: str, count: int, applies_to: tuple[str, ...] = (),
                 applies_words: str = "", repeatable: bool = False) -> None:
        self.params = params  # how the arguments read in a message: "(min, max)"
        self.count = count
        self.applies_to = applies_to  # type kinds; empty: any type
        self.applies_words = applies_words
        self.repeatable = repeatable


ANNOTATIONS: dict[str, _Spec] = {
    "desc": _Spec('("text")', 1),
    "default": _Spec("(value)", 1),
    "range": _Spec("(min, max)", 2, ("int", "float"), "int and float"),
    "length": _Spec("(min, max)", 2, ("string", "list"), "string and list types"),
    "pattern": _Spec('("regex")', 1, ("string",), "string"),
    "format": _Spec('("name")', 1, ("string",), "string"),
    "example": _Spec("(value)", 1, repeatable=True),
    "severity": _Spec('("soft")', 1),
}
"""Every annotation Luma knows. ``@example`` may be repeated (a model sees every example)."""


def check_annotations(f: ast.Field, type_ok: bool, symbols: Symbols, bag: DiagnosticBag,
                      values: ValueCheck | None) -> None:
    """Report every problem with the annotations of one field or parameter. ``type_ok`` says
    whether its type resolved (the fit checks are skipped when it did not); ``values`` validates
    ``@default`` and ``@example`` values against the field's type."""
    seen: dict[str, ast.Annotation] = {}
    values_to_check: list[tuple[ast.Annotation, Any]] = []
    errors_before = len(bag.items)
    for a in f.annotations:
        spec = ANNOTATIONS.get(a.name)
        if spec is None:
            hint = did_you_mean(a.name, list(ANNOTATIONS))
            bag.error("E020", f"Unknown annotation '@{a.name}'.", a.name_span,
                      hint=hint.replace("'", "'@", 1) if hint else
                      "known annotations: " + ", ".join("@" + n for n in ANNOTATIONS))
            continue
        first = seen.get(a.name)
        if first is not None and not spec.repeatable:
            bag.error("E044", f"@{a.name} is given more than once on '{f.name}'.", a.name_span,
                      related=(Related(first.name_span, "first given here"),))
            continue
        seen[a.name] = a
        if len(a.args) != spec.count:
            word = "argument" if spec.count == 1 else "arguments"
            bag.error("E025", f"@{a.name} takes {spec.count} {word} {spec.params}, "
                      f"not {len(a.args)}.", a.span)
            continue
        args = _constants(a, bag)
        if args is None:
            continue
        kind = type_kind(f.type, symbols) if type_ok else "unknown"
        if spec.applies_to and kind != "unknown" and kind not in spec.applies_to:
            bag.error("E021", f"@{a.name} cannot be used on '{f.name}' of type "
                      f"'{type_text(f.type)}'; it applies to {spec.applies_words}.", a.name_span)
            continue
        _check_arguments(f, a, args, bag, kind)
        if a.name in ("default", "example"):
            values_to_check.append((a, args[0]))
    if type_ok and values is not None:
        # when a rule of the field is itself wrong, values are judged by the type alone
        rules_ok = len(bag.items) == errors_before
        for a, value in values_to_check:
            values.check(f, a, value, bag, with_rules=rules_ok)


def _constants(a: ast.Annotation, bag: DiagnosticBag) -> list[Any] | None:
    out = []
    for arg in a.args:
        ok, value = constant_value(arg)
        if not ok:
            bag.error("E025", f"The arguments of @{a.name} must be constant values.", arg.span,
                      hint="write a literal: a string, number, true, false, null, a list or "
                           "an object")
            return None
        out.append(value)
    return out


def _is_number(v: Any) -> bool:
    return type(v) in (int, float)


def _show(v: Any) -> str:
    import json  # here: messages only

    return json.dumps(v, ensure_ascii=False)


def _check_arguments(f: ast.Field, a: ast.Annotation, args: list[Any],
                     bag: DiagnosticBag, kind: str) -> None:
    if a.name in ("desc", "pattern", "format", "severity") and not isinstance(args[0], str):
        bag.error("E025", f"The argument of @{a.name} must be a string, not {_show(args[0])}.",
                  a.args[0].span)
        return
    if a.name == "range":
        _check_bounds(a, args, bag, whole=False, integers=kind == "int")
    elif a.name == "length":
        _check_bounds(a, args, bag, whole=True)
    elif a.name == "pattern":
        _check_regex(a, args[0], bag)
    elif a.name == "format" and args[0] not in FORMATS:
        bag.error("E021", f"Unknown format {_show(args[0])}; use one of "
                  f"{', '.join(FORMATS)}.", a.args[0].span,
                  hint=did_you_mean(args[0], list(FORMATS)))
    elif a.name == "severity" and args[0] not in SEVERITIES:
        bag.error("E025", f'@severity must be "soft" or "hard", not {_show(args[0])}.',
                  a.args[0].span, hint=did_you_mean(args[0], list(SEVERITIES)))


def _check_bounds(a: ast.Annotation, args: list[Any], bag: DiagnosticBag, whole: bool,
                  integers: bool = False) -> None:
    """``whole``: @length, whose bounds are counts up to ``MAX_LENGTH``; ``integers``: @range of
    an int, whose bounds stay within the integers Luma holds (``MAX_SAFE_INTEGER``)."""
    ok = True
    for arg, value in zip(a.args, args):
        if value is None:
            continue
        if not _is_number(value) or (whole and not float(value).is_integer()):
            kind = "whole numbers" if whole else "numbers"
            bag.error("E025", f"The bounds of @{a.name} must be {kind} or null, "
                      f"not {_show(value)}.", arg.span)
            ok = False
        elif whole and value < 0:
            bag.error("E022", f"The bounds of @{a.name} cannot be negative: {_show(value)}.",
                      arg.span)
            ok = False
        elif whole and value > MAX_LENGTH:
            bag.error("E022", f"The bounds of @{a.name} can be at most {MAX_LENGTH}, not "
                      f"{_show(value)}.", arg.span,
                      hint="leave the maximum out with null for no upper bound")
            ok = False
        elif integers and abs(value) > MAX_SAFE_INTEGER:
            bag.error("E022", f"The bounds of @{a.name} on an int must be within "
                      f"-{MAX_SAFE_INTEGER} and {MAX_SAFE_INTEGER}, not {_show(value)}.",
                      arg.span, hint="write null for no bound")
            ok = False
    low, high = args
    if ok and low is not None and high is not None and low > high:
        bag.error("E022", f"The minimum {_show(low)} of @{a.name} is greater than its maximum "
                  f"{_show(high)}.", a.span)


def _check_regex(a: ast.Annotation, regex: str, bag: DiagnosticBag) -> None:
    import re

    try:
        re.compile(regex)
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        bag.error("E024", f"@pattern {_show(regex)} is not a valid regular expression: "
                  f"{exc.msg}{where}.", a.args[0].span)
        return
    except RecursionError:  # Python's own regex parser recurses once per group
        bag.error("E024", f"@pattern {_abridged(regex)} is not a valid regular expression: "
                  "its groups are nested too deeply.", a.args[0].span)
        return
    from luma.schema.patterns import HINT, matching_time

    time = matching_time(regex)
    if not time.is_bounded:
        bag.error("E049", time.describe(_show(regex)), a.args[0].span, hint=HINT)


def _abridged(regex: str) -> str:
    return _show(regex if len(regex) <= 60 else regex[:50] + "...")


class ValueCheck:
    """Validates ``@default`` and ``@example`` values against their field (E023) with the one
    validator the runtime uses. The field's own rules count, soft ones as hard: a default or an
    example that breaks its own ``@range`` is a mistake either way."""

    def __init__(self, program: ast.Program) -> None:
        self.program = program
        self._compiler: Any = None

    def check(self, f: ast.Field, a: ast.Annotation, value: Any, bag: DiagnosticBag,
              with_rules: bool = True) -> None:
        problems = self._problems(f, value, with_rules)
        if problems:
            shown = "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")
            bag.error("E023", f"@{a.name} of '{f.name}' is not a valid '{type_text(f.type)}': "
                      f"{shown}.", a.args[0].span)

    def _problems(self, f: ast.Field, value: Any, with_rules: bool) -> list[str]:
        from luma.schema.compile import SEVERITY_KEY, SchemaCompiler
        from luma.schema.validate import SchemaError, validate

        if self._compiler is None:
            self._compiler = SchemaCompiler(self.program)
        if with_rules:
            schema = self._compiler.field_schema(f)
            for key in ("default", "examples", "description", SEVERITY_KEY):
                schema.pop(key, None)
        else:
            schema = self._compiler.type_schema(f.type)
        try:
            # the definitions the field reaches, not every one of the program: each value's
            # check costs its field, not the program's size
            violations = validate(self._compiler.with_defs(schema), value, soft_rules=False)
        except SchemaError:
            return []  # a type in error somewhere (an unknown name deep inside): reported there
        return [v.render(f.name) if v.path else v.message for v in violations]
