"""Model declarations (MODELS.md §1): keys, providers and value ranges."""

from __future__ import annotations

from luma.check.config import ValueReader, check_keys, is_env_var_name
from luma.check.names import check_declared_name, report_duplicates
from luma.check.references import report_unknown_tool
from luma.check.symbols import Symbols
from luma.models.reasoning import EFFORTS, REASONING_PROVIDERS, effort_problem, sampling_problem
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag

MODEL_KEYS = (
    "provider", "name", "base_url", "api_key_env", "api_version", "temperature", "max_tokens",
    "top_p", "timeout", "max_retries", "strict", "call_tools", "responses", "reasoning_effort",
    "reasoning",
)
PROVIDERS = ("openai", "azure", "anthropic", "gemini", "test")
_ONLY_FOR: dict[str, tuple[str, ...]] = {
    "api_version": ("azure",), "call_tools": ("test",), "responses": ("test",),
    "reasoning_effort": REASONING_PROVIDERS, "reasoning": REASONING_PROVIDERS,
}


def check_model(model: ast.ModelDecl, symbols: Symbols, bag: DiagnosticBag) -> None:
    check_declared_name(model.name, model.name_span, bag, "model")
    owner = f"model '{model.name}'"
    entries = check_keys(model.config, MODEL_KEYS, owner, bag)
    read = ValueReader(owner, bag)
    provider: str | None = None
    if "provider" in entries:
        provider = read.choice(entries["provider"], PROVIDERS)
    else:
        import json  # here: messages only

        listed = ", ".join(json.dumps(p) for p in PROVIDERS)
        bag.error("E009", f"Model '{model.name}' must specify a provider: one of {listed}.",
                  model.name_span, hint='e.g. provider: "openai"')
    if "name" not in entries and provider is not None and provider != "test":
        what = "the deployment name" if provider == "azure" else "the provider's model id"
        bag.error("E009", f"Model '{model.name}' must specify a name: {what}.",
                  model.name_span)
    values: dict[str, object] = {}
    for key, entry in entries.items():
        only = _ONLY_FOR.get(key)
        if only is not None and provider is not None and provider not in only:
            bag.error("E008", f"'{key}' applies only to {' and '.join(only)} models, and model "
                      f"'{model.name}' uses provider \"{provider}\".", entry.key_span)
            continue
        values[key] = _checked_value(key, entry, read, symbols, bag)
    if provider is not None:
        _check_reasoning(model, provider, entries, values, bag)


def _checked_value(key: str, entry: ast.ConfigEntry, read: ValueReader, symbols: Symbols,
                   bag: DiagnosticBag) -> object:
    """Check one key's value; return it when it is valid (None otherwise)."""
    if key == "name":
        text = read.string(entry)
        if text is not None and not text.strip():
            read.invalid(entry, "a non-empty model id")
            return None
        return text
    if key in ("api_version", "responses"):
        return read.string(entry)
    if key == "base_url":
        text = read.string(entry)
        if text is not None and not text.startswith(("http://", "https://")):
            read.invalid(entry, "an http:// or https:// URL")
        return text
    if key == "api_key_env":
        text = read.string(entry)
        if text is not None and not is_env_var_name(text):
            read.invalid(entry, "the name of an environment variable")
        return text
    if key == "temperature":
        return read.number(entry, 0, 2)
    if key == "top_p":
        return read.number(entry, 0, 1)
    if key == "max_tokens":
        return read.integer(entry, 1)
    if key == "timeout":
        return read.integer(entry, 1, millis=True)
    if key == "max_retries":
        return read.integer(entry, 0)
    if key in ("strict", "reasoning"):
        return read.boolean(entry)
    if key == "reasoning_effort":
        return read.choice(entry, EFFORTS)
    if key == "call_tools":
        _check_call_tools(entry, read, symbols, bag)
    return None


def _check_reasoning(model: ast.ModelDecl, provider: str, entries: dict[str, ast.ConfigEntry],
                     values: dict[str, object], bag: DiagnosticBag) -> None:
    """A reasoning model (docs/models.md) refuses temperature and top_p while it reasons, a
    model that always reasons refuses reasoning_effort "none", and some Claude models refuse
    sampling settings altogether."""
    model_id = values.get("name")
    override = values.get("reasoning")
    effort = values.get("reasoning_effort")
    model_id = model_id if isinstance(model_id, str) else None
    override = override if isinstance(override, bool) else None
    effort = effort if isinstance(effort, str) else None
    if effort is not None:
        problem = effort_problem(model.name, model_id, override, effort)
        if problem is not None:
            bag.error("E009", problem, entries["reasoning_effort"].value.span)
    for key in ("temperature", "top_p"):
        value = values.get(key)
        if key in entries and isinstance(value, (int, float)):
            problem = sampling_problem(provider, model.name, model_id, override, effort, key,
                                       value)
            if problem is not None:
                bag.error("E009", problem, entries[key].key_span)


def _check_call_tools(entry: ast.ConfigEntry, read: ValueReader, symbols: Symbols,
                      bag: DiagnosticBag) -> None:
    """``"all"``, ``"none"`` or a list of declared tool names."""
    if isinstance(entry.value, ast.StringLit):
        read.choice(entry, ("all", "none"))
        return
    if not isinstance(entry.value, ast.ListLit):
        read.invalid(entry, '"all", "none" or a list of tool names')
        return
    names = read.name_list(entry, "tool") or []
    report_duplicates(names, lambda n: n.id, lambda n: n.span,
                      lambda name: f"Tool '{name}' is listed more than once in 'call_tools' "
                                   f"of {read.owner}.", bag, code="E009",
                      first_label="first listed here")
    for name in names:
        if name.id not in symbols.tools:
            report_unknown_tool(name.id, name.span, symbols, bag)
