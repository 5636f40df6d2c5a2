"""Model declarations (MODELS.md §1): keys, providers and value ranges."""

from __future__ import annotations

import json

from luma.check.config import ValueReader, check_keys, is_env_var_name
from luma.check.names import check_declared_name, report_duplicates
from luma.check.references import report_unknown_tool
from luma.check.symbols import Symbols
from luma.syntax import ast
from luma.syntax.diagnostics import DiagnosticBag

MODEL_KEYS = (
    "provider", "name", "base_url", "api_key_env", "api_version", "temperature", "max_tokens",
    "top_p", "timeout", "max_retries", "strict", "call_tools", "responses",
)
PROVIDERS = ("openai", "azure", "anthropic", "gemini", "test")
_ONLY_FOR = {"api_version": "azure", "call_tools": "test", "responses": "test"}


def check_model(model: ast.ModelDecl, symbols: Symbols, bag: DiagnosticBag) -> None:
    check_declared_name(model.name, model.name_span, bag, "model")
    owner = f"model '{model.name}'"
    entries = check_keys(model.config, MODEL_KEYS, owner, bag)
    read = ValueReader(owner, bag)
    provider: str | None = None
    if "provider" in entries:
        provider = read.choice(entries["provider"], PROVIDERS)
    else:
        listed = ", ".join(json.dumps(p) for p in PROVIDERS)
        bag.error("E009", f"Model '{model.name}' must specify a provider: one of {listed}.",
                  model.name_span, hint='e.g. provider: "openai"')
    if "name" not in entries and provider is not None and provider != "test":
        what = "the deployment name" if provider == "azure" else "the provider's model id"
        bag.error("E009", f"Model '{model.name}' must specify a name: {what}.",
                  model.name_span)
    for key, entry in entries.items():
        only = _ONLY_FOR.get(key)
        if only is not None and provider is not None and provider != only:
            bag.error("E008", f"'{key}' applies only to {only} models, and model "
                      f"'{model.name}' uses provider \"{provider}\".", entry.key_span)
            continue
        if key == "name":
            text = read.string(entry)
            if text is not None and not text.strip():
                read.invalid(entry, "a non-empty model id")
        elif key in ("api_version", "responses"):
            read.string(entry)
        elif key == "base_url":
            text = read.string(entry)
            if text is not None and not text.startswith(("http://", "https://")):
                read.invalid(entry, "an http:// or https:// URL")
        elif key == "api_key_env":
            text = read.string(entry)
            if text is not None and not is_env_var_name(text):
                read.invalid(entry, "the name of an environment variable")
        elif key == "temperature":
            read.number(entry, 0, 2)
        elif key == "top_p":
            read.number(entry, 0, 1)
        elif key == "max_tokens":
            read.integer(entry, 1)
        elif key == "timeout":
            read.integer(entry, 1, millis=True)
        elif key == "max_retries":
            read.integer(entry, 0)
        elif key == "strict":
            read.boolean(entry)
        elif key == "call_tools":
            _check_call_tools(entry, read, symbols, bag)


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
