"""Tool contracts (LANGUAGE.md §4): parameters, return type, `needs`, configuration values and
the consistency rules."""

from __future__ import annotations

from luma.check.annotations import ValueCheck
from luma.check.config import ValueReader, check_keys, check_timeout, dotted_path
from luma.check.fields import check_fields
from luma.check.names import check_declared_name, report_duplicates
from luma.check.symbols import Symbols
from luma.check.types import check_type, report_unknown_type, type_kind, type_text
from luma.limits import MAX_RETRIES, MAX_RETRY_DELAY_MS
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag, did_you_mean

TOOL_KEYS = (
    "description", "side_effects", "cache", "scope", "credential", "error", "retries",
    "retry_backoff", "retry_delay", "timeout", "idempotent", "idempotency_key",
    "idempotency_ttl_ms",
)
SIDE_EFFECTS = ("none", "read", "write")
RETRY_BACKOFFS = ("none", "fixed", "exponential")


def check_tool(tool: ast.ToolDecl, symbols: Symbols, bag: DiagnosticBag,
               values: ValueCheck | None) -> None:
    check_declared_name(tool.name, tool.name_span, bag, tool.kind)
    owner = f"{tool.kind} '{tool.name}'"
    check_fields(tool.params, "Parameter", owner, symbols, bag, values)
    if tool.kind != "tool":
        from luma.check.data import check_data_tool

        check_data_tool(tool, symbols, bag)  # return type, needs, datasource, sql
        side_effects = "read" if tool.kind == "query" else "write"
        _check_config(tool, symbols, bag, TOOL_KEYS + DATA_KEYS, side_effects)
        return
    _check_return(tool, symbols, bag)
    _check_needs(tool, symbols, bag)
    _check_config(tool, symbols, bag)


DATA_KEYS = ("datasource", "sql")
"""The keys a query or command takes besides a tool's (DATA.md §1); checked in check/data.py."""


def _check_return(tool: ast.ToolDecl, symbols: Symbols, bag: DiagnosticBag) -> None:
    t = tool.returns
    assert t is not None  # only a command may omit it
    check_type(t, symbols, bag)
    if isinstance(t, ast.NamedType):
        return  # a declared schema or union, or an unknown name (E007 above)
    bag.error("E016", f"Tool '{tool.name}' must return a declared schema, not "
              f"'{type_text(t)}'.", t.span,
              hint="declare a schema for the result, e.g. schema Result { value: "
                   f"{type_text(t)} }}")


def _check_needs(tool: ast.ToolDecl, symbols: Symbols, bag: DiagnosticBag) -> None:
    """Each context is named once and typed by a declared object schema: the host builds it
    field by field (RUNTIME.md §4)."""
    report_duplicates(tool.needs, lambda n: n.name, lambda n: n.name_span,
                      lambda name: f"Context '{name}' is declared more than once in tool "
                                   f"'{tool.name}'.", bag)
    for need in tool.needs:
        if not check_type(need.type, symbols, bag):
            continue
        if type_kind(need.type, symbols) != "object":
            bag.error("E009", f"'needs {need.name}' of tool '{tool.name}' must name a declared "
                      f"object schema, not '{type_text(need.type)}'.", need.type.span)


def _check_config(tool: ast.ToolDecl, symbols: Symbols, bag: DiagnosticBag,
                  keys: tuple[str, ...] = TOOL_KEYS, fixed_side_effects: str | None = None
                  ) -> None:
    """``fixed_side_effects``: a query's or command's, which it may not set (check/data.py)."""
    owner = f"{tool.kind} '{tool.name}'"
    entries = check_keys(tool.config, keys, owner, bag)
    read = ValueReader(owner, bag)
    side_effects: str | None = fixed_side_effects or "none"
    cache = idempotent = False
    retries = 0
    for key, entry in entries.items():
        if key in ("description", "scope"):
            read.string(entry)
        elif key == "credential":
            _check_credential(entry, read)
        elif key in DATA_KEYS:
            continue  # check/data.py
        elif key == "side_effects":
            if fixed_side_effects is None:
                side_effects = read.choice(entry, SIDE_EFFECTS)
        elif key == "retry_backoff":
            read.choice(entry, RETRY_BACKOFFS)
        elif key in ("cache", "idempotent"):
            flag = read.boolean(entry)
            if key == "cache":
                cache = flag is True
            else:
                idempotent = flag is True
        elif key == "retries":
            retries = read.integer(entry, 0, maximum=MAX_RETRIES) or 0
        elif key == "retry_delay":
            read.integer(entry, 0, millis=True, maximum=MAX_RETRY_DELAY_MS)
        elif key == "idempotency_ttl_ms":
            read.integer(entry, 1, millis=True)
        elif key == "timeout":
            check_timeout(f"{tool.kind.capitalize()} '{tool.name}'", entry, read, bag)
        elif key == "error":
            _check_error_schema(entry, read, symbols, bag)
        elif key == "idempotency_key":
            _check_idempotency_key(tool, entry, read, symbols, bag)
    _check_consistency(tool, entries, side_effects, cache, idempotent, retries, bag)


def _check_consistency(tool: ast.ToolDecl, entries: dict[str, ast.ConfigEntry],
                       side_effects: str | None, cache: bool, idempotent: bool, retries: int,
                       bag: DiagnosticBag) -> None:
    """The rules of LANGUAGE.md §4, each reported on the entry that breaks it."""
    name = tool.name
    if cache and side_effects == "write":
        bag.error("E012", f"Write tool '{name}' cannot use cache.", entries["cache"].span,
                  hint="a cached write would not happen again; remove cache: true")
    if cache and tool.needs:
        bag.error("E014", f"Cache cannot be used on a tool that uses needs: {name}",
                  entries["cache"].span)
    if idempotent and "idempotency_key" not in entries:
        bag.error("E010", f"Idempotent tool '{name}' must specify an idempotency_key.",
                  entries["idempotent"].span,
                  hint="add idempotency_key: <input field>, e.g. idempotency_key: request_id")
    if side_effects == "write" and retries > 0 and not idempotent:
        bag.error("E011", f"A write tool '{name}' must be idempotent and specify an "
                  "idempotency_key to be retried.", entries["retries"].span,
                  hint="add idempotent: true and idempotency_key: <input field>, or remove "
                       "retries")


def _check_credential(entry: ast.ConfigEntry, read: ValueReader) -> None:
    from luma.check.config import is_env_var_name

    text = read.string(entry)
    if text is not None and not is_env_var_name(text):
        read.invalid(entry, "the name of an environment variable")


def _check_error_schema(entry: ast.ConfigEntry, read: ValueReader, symbols: Symbols,
                        bag: DiagnosticBag) -> None:
    name = read.name(entry, "schema")
    if name is None or symbols.is_type(name.id):
        return
    if name.id in ast.PRIMITIVE_TYPES:
        read.invalid(entry, "the name of a declared schema", shown=f"'{name.id}'")
        return
    report_unknown_type(name.id, name.span, symbols, bag)


def _check_idempotency_key(tool: ast.ToolDecl, entry: ast.ConfigEntry, read: ValueReader,
                           symbols: Symbols, bag: DiagnosticBag) -> None:
    """``request_id`` or ``input.request_id``; a nested path walks object schemas."""
    path = dotted_path(entry.value)
    if path is None:
        hint = None
        if isinstance(entry.value, ast.StringLit):
            hint = f"write the path without quotes: {entry.value.value}"
        read.invalid(entry, "an input field path such as request_id or input.request_id",
                     hint=hint)
        return
    written = ".".join(path)
    params = {p.name: p for p in tool.params}
    if path[0] == "input" and len(path) > 1 and "input" not in params:
        path = path[1:]
    fields = params
    for i, step in enumerate(path):
        f = fields.get(step)
        if f is None:
            bag.error("E015", f"Idempotency key '{written}' of tool '{tool.name}' is not an "
                      "input field.", entry.value.span,
                      hint=did_you_mean(step, list(fields)))
            return
        if i + 1 < len(path):
            schema = (symbols.schemas.get(f.type.name) if isinstance(f.type, ast.NamedType)
                      else None)
            fields = {g.name: g for g in schema.fields} if schema is not None else {}


__all__ = ["check_tool", "check_timeout", "TOOL_KEYS", "DATA_KEYS", "SIDE_EFFECTS", "RETRY_BACKOFFS"]
