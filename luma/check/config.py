"""Configuration entries (``key: value`` in tools, models and agents): duplicate keys (E006),
unknown keys (E008) and values of the wrong kind or out of range (E009).

Values in declarations are constants written in source; each reader below accepts exactly the
form the key allows, reports anything else, and returns the value (or None when it is invalid).
"""

from __future__ import annotations

from collections.abc import Sequence

from luma.check.names import report_duplicates
from luma.limits import MAX_TIMEOUT_MS
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag, did_you_mean


def describe(expr: ast.Expr) -> str:
    """A short rendering of a value for a message: ``-1``, ``"writes"``, ``the name 'x'``."""
    import json  # here: messages only (luma check does not load json for a clean program)

    if isinstance(expr, ast.Literal):
        return json.dumps(expr.value)
    if isinstance(expr, ast.StringLit):
        text = expr.value if len(expr.value) <= 40 else expr.value[:37] + "..."
        return json.dumps(text, ensure_ascii=False)
    if isinstance(expr, ast.Name):
        return f"the name '{expr.id}'"
    path = dotted_path(expr)
    if path is not None:
        return f"the path '{'.'.join(path)}'"
    if isinstance(expr, ast.ListLit):
        return "a list"
    if isinstance(expr, ast.ObjectLit):
        return "an object"
    return "an expression"


def dotted_path(expr: ast.Expr) -> list[str] | None:
    """``a.b.c`` written as names and member accesses, as its parts; None for anything else."""
    if isinstance(expr, ast.Name):
        return [expr.id]
    if isinstance(expr, ast.Member):
        head = dotted_path(expr.obj)
        return None if head is None else [*head, expr.name]
    return None


def check_keys(entries: Sequence[ast.ConfigEntry], known: Sequence[str], owner: str,
               bag: DiagnosticBag) -> dict[str, ast.ConfigEntry]:
    """Report repeated keys (E006) and unknown keys (E008, with did-you-mean); return the first
    entry of each known key."""
    first = report_duplicates(
        entries, lambda e: e.key, lambda e: e.key_span,
        lambda key: f"Configuration key '{key}' is given more than once in {owner}.",
        bag, code="E006", first_label="first given here")
    for entry in first.values():
        if entry.key not in known:
            bag.error("E008", f"Unknown configuration key '{entry.key}' in {owner}.",
                      entry.key_span, hint=did_you_mean(entry.key, list(known)))
    return {key: entry for key, entry in first.items() if key in known}


class ValueReader:
    """Reads configuration values of one declaration (``owner`` is e.g. ``tool 'x'``),
    reporting E009 for a value of the wrong kind or out of range."""

    def __init__(self, owner: str, bag: DiagnosticBag) -> None:
        self.owner = owner
        self.bag = bag

    def invalid(self, entry: ast.ConfigEntry, expected: str, hint: str | None = None,
                shown: str | None = None) -> None:
        """E009 on the entry's value: ``'<key>' of <owner> must be <expected>, not <shown>.``"""
        shown = shown if shown is not None else describe(entry.value)
        self.bag.error("E009", f"'{entry.key}' of {self.owner} must be {expected}, not {shown}.",
                       entry.value.span, hint=hint)

    def string(self, entry: ast.ConfigEntry) -> str | None:
        if isinstance(entry.value, ast.StringLit):
            return entry.value.value
        self.invalid(entry, "a string", hint=_quote_hint(entry.value))
        return None

    def choice(self, entry: ast.ConfigEntry, options: Sequence[str]) -> str | None:
        value = entry.value
        text: str | None = None
        if isinstance(value, ast.StringLit):
            if value.value in options:
                return value.value
            text = value.value
        elif isinstance(value, ast.Name):
            text = value.id
        import json

        listed = ", ".join(json.dumps(o) for o in options)
        hint: str | None
        if isinstance(value, ast.Name) and text in options:
            hint = f'write it as a string: "{text}"'
        else:
            hint = did_you_mean(text, list(options)) if text is not None else None
        self.invalid(entry, f"one of {listed}", hint=hint)
        return None

    def boolean(self, entry: ast.ConfigEntry) -> bool | None:
        value = entry.value
        if isinstance(value, ast.Literal) and isinstance(value.value, bool):
            return value.value
        self.invalid(entry, "true or false")
        return None

    def integer(self, entry: ast.ConfigEntry, minimum: int, millis: bool = False,
                maximum: int | None = None) -> int | None:
        """An integer literal ≥ ``minimum`` (and ≤ ``maximum``, a limit of ``luma/limits.py``);
        ``millis`` names the unit in the message."""
        number = _int_literal(entry.value)
        if number is not None and maximum is not None and number > maximum:
            unit = " milliseconds" if millis else ""
            self.invalid(entry, f"at most {maximum}{unit}")
            return None
        if number is not None and number >= minimum:
            return number
        kind = "an integer number of milliseconds" if millis else "an integer"
        bound = "> 0" if millis and minimum == 1 else f"≥ {minimum}"
        self.invalid(entry, f"{kind} {bound}")
        return None

    def number(self, entry: ast.ConfigEntry, low: float, high: float | None) -> float | None:
        value = entry.value
        if (isinstance(value, ast.Literal) and isinstance(value.value, (int, float))
                and not isinstance(value.value, bool)):
            number = float(value.value)
            if number >= low and (high is None or number <= high):
                return number
        bounds = f"a number from {low:g} to {high:g}" if high is not None else f"a number ≥ {low:g}"
        self.invalid(entry, bounds)
        return None

    def name(self, entry: ast.ConfigEntry, what: str) -> ast.Name | None:
        """A bare name (``model: GPT54Mini``), reported when written as anything else."""
        if isinstance(entry.value, ast.Name):
            return entry.value
        self.invalid(entry, f"the name of a declared {what}", hint=_unquote_hint(entry.value),
                     shown=_shown_as_name(entry.value))
        return None

    def name_list(self, entry: ast.ConfigEntry, what: str) -> list[ast.Name] | None:
        """A list of bare names (``tools: [a, b]``); items of another form are reported one by
        one and left out."""
        value = entry.value
        if not isinstance(value, ast.ListLit):
            self.invalid(entry, f"a list of {what} names", hint=_listify_hint(value))
            return None
        names = []
        for item in value.items:
            if isinstance(item, ast.Name):
                names.append(item)
            else:
                self.bag.error(
                    "E009", f"Every item of '{entry.key}' of {self.owner} must be a {what} name, "
                    f"not {_shown_as_name(item)}.", item.span, hint=_unquote_hint(item))
        return names

    def string_list(self, entry: ast.ConfigEntry) -> list[ast.StringLit] | None:
        """A list of string literals (``tool_scopes: ["db:write"]``)."""
        value = entry.value
        if not isinstance(value, ast.ListLit):
            self.invalid(entry, "a list of strings", hint=_listify_hint(value))
            return None
        strings = []
        for item in value.items:
            if isinstance(item, ast.StringLit):
                strings.append(item)
            else:
                self.bag.error(
                    "E009", f"Every item of '{entry.key}' of {self.owner} must be a string, "
                    f"not {describe(item)}.", item.span, hint=_quote_hint(item))
        return strings


def _int_literal(expr: ast.Expr) -> int | None:
    if (isinstance(expr, ast.Literal) and isinstance(expr.value, int)
            and not isinstance(expr.value, bool)):
        return expr.value
    return None


def _shown_as_name(expr: ast.Expr) -> str:
    if isinstance(expr, ast.StringLit):
        return f"the string {describe(expr)}"
    return describe(expr)


def _unquote_hint(expr: ast.Expr) -> str | None:
    if isinstance(expr, ast.StringLit) and _is_identifier(expr.value):
        return f"write the name without quotes: {expr.value}"
    return None


def _quote_hint(expr: ast.Expr) -> str | None:
    if isinstance(expr, ast.Name):
        return f'write it in quotes: "{expr.id}"'
    return None


def _listify_hint(expr: ast.Expr) -> str | None:
    if isinstance(expr, (ast.Name, ast.StringLit)):
        text = expr.id if isinstance(expr, ast.Name) else describe(expr)
        return f"write it as a list: [{text}]"
    return None


def _is_identifier(text: str) -> bool:
    import re

    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text) is not None


def is_env_var_name(text: str) -> bool:
    """Whether ``text`` can name an environment variable (letters, digits, ``_``)."""
    return _is_identifier(text)


def check_timeout(owner: str, entry: ast.ConfigEntry, read: ValueReader,
                  bag: DiagnosticBag) -> None:
    """``timeout:`` of ``owner`` (``Tool 'x'``, ``Datasource 'y'``): milliseconds > 0."""
    value = entry.value
    if (isinstance(value, ast.Literal) and isinstance(value.value, int)
            and not isinstance(value.value, bool)):
        if value.value <= 0:
            bag.error("E013", f"{owner} timeout must be greater than zero.",
                      value.span, hint="give the timeout in milliseconds, e.g. timeout: 3000")
        elif value.value > MAX_TIMEOUT_MS:
            read.invalid(entry, f"at most {MAX_TIMEOUT_MS} milliseconds")
        return
    read.invalid(entry, "an integer number of milliseconds > 0")
