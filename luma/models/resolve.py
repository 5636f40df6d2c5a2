"""Which model answers an ``ask``, and with which settings (MODELS.md §1).

A model's settings are its ``.luma`` declaration with the ``models`` overrides of
``luma.config.json`` laid over it. An agent without ``model:`` (and every top-level ``ask``) uses
the default model: ``--model NAME``, else the config's ``default_model``, else the built-in
offline model ``test`` (provider ``test``, ``call_tools: "all"``), so that a program runs on a
fresh machine with no key and no network.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from luma.models.base import ModelSettings
from luma.models.reasoning import EFFORTS, REASONING_PROVIDERS, effort_problem, sampling_problem
from luma.models.wire import as_text
from luma.runtime.errors import LumaError
from luma.syntax.constants import constant_value
from luma.syntax import ast
from luma.syntax.source import Span

OFFLINE_MODEL = "test"
"""The name of the built-in offline model (when no declaration of that name exists)."""

PROVIDERS = ("openai", "azure", "anthropic", "gemini", "test")
API_KEY_ENVS = {
    "openai": "OPENAI_API_KEY",
    "azure": "AZURE_OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}
ANTHROPIC_MAX_TOKENS = 4096
DEFAULT_TIMEOUT_MS = 60000
DEFAULT_MAX_RETRIES = 2

MODEL_KEYS = ("provider", "name", "base_url", "api_key_env", "api_version", "temperature",
              "max_tokens", "top_p", "timeout", "max_retries", "strict", "call_tools",
              "responses", "reasoning_effort", "reasoning")


class ModelConfigError(Exception):
    """The models cannot be set up (a bad override, an unknown ``--model``); one line each."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("\n".join(messages))
        self.messages = messages


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """The model one ``ask`` uses; ``offline_default`` when nothing chose it but the fallback."""

    settings: ModelSettings
    offline_default: bool = False


class ModelResolver:
    """Settings for every model of a program, and the default-model rule.

    Everything that can be checked without a request is checked here, when the run starts:
    override keys and values, ``default_model`` and ``--model`` naming a model that exists.
    """

    def __init__(self, program: ast.Program, *, overrides: Mapping[str, Any] | None = None,
                 default_model: str | None = None, config_default: str | None = None,
                 base_dir: str | None = None, config_name: str = "luma.config.json") -> None:
        from luma.syntax.diagnostics import did_you_mean

        self.base_dir = base_dir or os.getcwd()
        overrides = dict(overrides or {})
        problems: list[str] = []
        self.models: dict[str, ModelSettings] = {}
        for decl in program.models:
            if decl.name in self.models:
                continue  # a duplicate is a checker error; the first declaration counts
            values = declaration_values(decl)
            override = overrides.get(decl.name)
            if override is not None:
                values.update(_checked_override(config_name, decl.name, override, problems))
            settings = self.models[decl.name] = self._settings(decl.name, values)
            if override is not None:
                problems.extend(_reasoning_problems(settings))
        if OFFLINE_MODEL not in self.models:
            values = {"provider": "test"}
            override = overrides.get(OFFLINE_MODEL)
            if override is not None:
                values.update(_checked_override(config_name, OFFLINE_MODEL, override, problems))
            self.models[OFFLINE_MODEL] = self._settings(OFFLINE_MODEL, values)
        for name in overrides:
            if name not in self.models:  # a misspelt override would leave the real endpoint
                hint = did_you_mean(str(name), list(self.models))
                problems.append(f"{config_name}: models.{name}: unknown model"
                                + (f"; {hint}" if hint else f" ({_known(self.models)})"))

        self.default: str = OFFLINE_MODEL
        self.default_is_fallback = True
        for chosen, where in ((default_model, "--model"),
                              (config_default, f"{config_name}: default_model")):
            if chosen is None:
                continue
            if chosen not in self.models:
                problems.append(f"{where}: there is no model named '{chosen}' "
                                f"({_known(self.models)})")
            elif self.default_is_fallback:
                self.default = chosen
                self.default_is_fallback = False
        if problems:
            raise ModelConfigError(problems)

    def _settings(self, name: str, values: Mapping[str, Any]) -> ModelSettings:
        provider = values.get("provider")
        if not isinstance(provider, str) or provider not in PROVIDERS:
            provider = "test" if provider is None else str(provider)
        call_tools = values.get("call_tools", "all")
        if isinstance(call_tools, list):
            call_tools = [str(n) for n in call_tools]
        elif call_tools not in ("all", "none"):
            call_tools = "all"
        responses = values.get("responses")
        if isinstance(responses, str) and responses:
            responses = os.path.normpath(os.path.join(self.base_dir, responses))
        else:
            responses = None
        max_tokens = _int_or_none(values.get("max_tokens"))
        if max_tokens is None and provider == "anthropic":
            max_tokens = ANTHROPIC_MAX_TOKENS
        strict = values.get("strict")
        effort = values.get("reasoning_effort")
        reasoning = values.get("reasoning")
        return ModelSettings(
            name=name,
            provider=provider,
            model=as_text(values.get("name")),
            base_url=as_text(values.get("base_url")),
            api_key_env=as_text(values.get("api_key_env")),
            api_version=as_text(values.get("api_version")),
            temperature=_number_or_none(values.get("temperature")),
            max_tokens=max_tokens,
            top_p=_number_or_none(values.get("top_p")),
            timeout_ms=_int_or_none(values.get("timeout")) or DEFAULT_TIMEOUT_MS,
            max_retries=_int_or(values.get("max_retries"), DEFAULT_MAX_RETRIES),
            strict=strict if isinstance(strict, bool) else None,
            reasoning_effort=effort if isinstance(effort, str) and effort in EFFORTS else None,
            reasoning=reasoning if isinstance(reasoning, bool) else None,
            call_tools=call_tools,
            responses=responses,
        )

    forced: str | None = None  # the model of every ask, agents' own included (luma test)

    def force(self, name: str | None) -> None:
        """Make ``name`` (None: the offline model) answer every ``ask``, whatever model its
        agent names: a test's ``model:`` or ``luma test --model``."""
        name = OFFLINE_MODEL if name is None else name
        if name not in self.models:
            raise ModelConfigError([f"there is no model named '{name}' "
                                    f"({_known(self.models)})"])
        self.forced = name

    def for_agent(self, agent: ast.AgentDecl | None) -> ResolvedModel:
        """The model an ``ask`` in ``agent`` (None: at the top level) uses."""
        if self.forced is not None:
            return ResolvedModel(self.models[self.forced])
        if agent is not None:
            entry = agent.entry("model")
            if entry is not None and isinstance(entry.value, ast.Name):
                name = entry.value.id
                settings = self.models.get(name)
                if settings is None:
                    raise LumaError("MODEL_CONFIG", f"Agent '{agent.name}' uses model '{name}', "
                                    f"which is not declared ({_known(self.models)}).")
                return ResolvedModel(settings)
        return ResolvedModel(self.models[self.default], self.default_is_fallback)


def reachable_models(program: ast.Program, resolver: ModelResolver, agent: str | None,
                     fn: str | None) -> list[ModelSettings]:
    """The models an ``ask`` can use in a run of ``agent.fn`` (None: the top-level
    statements), following calls of agent methods; in the order they are first reached."""
    models: dict[str, ModelSettings] = {}
    for owner in _ask_owners(program, agent, fn):
        settings = resolver.for_agent(owner).settings
        models.setdefault(settings.name, settings)
    return list(models.values())


def _ask_owners(program: ast.Program, agent: str | None,
                fn: str | None) -> list[ast.AgentDecl | None]:
    """The agents (None: the top level) whose ``ask``s a run of ``agent.fn`` can reach."""
    agents = {a.name: a for a in reversed(program.agents)}  # the first declaration wins
    owners: dict[str | None, ast.AgentDecl | None] = {}
    seen: set[tuple[str, str]] = set()
    pending: list[tuple[ast.AgentDecl | None, tuple[ast.Stmt, ...]]] = []

    def visit(owner: ast.AgentDecl, name: str) -> None:
        method = owner.fn(name)
        if method is not None and (owner.name, name) not in seen:
            seen.add((owner.name, name))
            pending.append((owner, method.body))

    if agent is None:
        pending.append((None, program.statements))
    elif agent in agents:
        visit(agents[agent], fn or "run")
    while pending:
        owner, body = pending.pop()
        for node in _nodes(body):
            if isinstance(node, ast.Ask):
                owners.setdefault(owner.name if owner is not None else None, owner)
            elif isinstance(node, ast.Call):
                callee = node.callee
                if isinstance(callee, ast.Member) and isinstance(callee.obj, ast.Name) \
                        and callee.obj.id in agents:
                    visit(agents[callee.obj.id], callee.name)
                elif isinstance(callee, ast.Name) and owner is not None:
                    visit(owner, callee.id)
    return list(owners.values())


def _nodes(value: Any) -> Iterator[Any]:
    """Every AST node in ``value`` (a node or a tuple of them), depth first."""
    if isinstance(value, tuple):
        for item in value:
            yield from _nodes(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, (type, Span)):
        yield value
        for f in dataclasses.fields(value):
            yield from _nodes(getattr(value, f.name))


def declaration_values(decl: ast.ModelDecl) -> dict[str, Any]:
    """The constant values of a model declaration's keys (``call_tools`` names as strings)."""
    values: dict[str, Any] = {}
    for entry in decl.config:
        if entry.key in values:
            continue  # a repeated key is a checker error; the first one counts
        if entry.key == "call_tools" and isinstance(entry.value, ast.ListLit):
            names = []
            for item in entry.value.items:
                if isinstance(item, ast.Name):
                    names.append(item.id)
                elif isinstance(item, ast.StringLit):
                    names.append(item.value)
            values["call_tools"] = names
            continue
        ok, value = constant_value(entry.value)
        if ok:
            values[entry.key] = value
    return values


def api_key_env(settings: ModelSettings) -> str | None:
    """The environment variable that holds the model's API key (None for ``test``)."""
    if settings.provider == "test":
        return None
    return settings.api_key_env or API_KEY_ENVS.get(settings.provider)


def require_api_key(settings: ModelSettings, env: Mapping[str, str]) -> str | None:
    """The model's API key, or ``MODEL_AUTH`` before any request when it is not set."""
    name = api_key_env(settings)
    if name is None:
        return None
    value = env.get(name, "").strip()
    if not value:
        raise LumaError("MODEL_AUTH", f"Model '{settings.name}' needs an API key in {name}.")
    return value


# --------------------------------------------------------------------------- config checks


def _checked_override(config_name: str, model: str, override: Any,
                      problems: list[str]) -> dict[str, Any]:
    """The keys of one ``models.<name>`` entry that are valid; the others become problems."""
    from luma.syntax.diagnostics import did_you_mean

    where = f"{config_name}: models.{model}"
    if not isinstance(override, Mapping):
        problems.append(f"{where}: must be an object of model keys")
        return {}
    out: dict[str, Any] = {}
    for key, value in override.items():
        if key not in MODEL_KEYS:
            hint = did_you_mean(str(key), list(MODEL_KEYS))
            problems.append(f"{where}.{key}: unknown key" + (f"; {hint}" if hint else ""))
            continue
        expected = _expected(key, value)
        if expected is not None:
            problems.append(f"{where}.{key}: must be {expected}")
            continue
        out[key] = value
    return out


def _expected(key: str, value: Any) -> str | None:
    """What ``value`` should have been for ``key``, or None when it is fine."""
    if key == "provider":
        return None if value in PROVIDERS else "one of " + ", ".join(PROVIDERS)
    if key in ("name", "base_url", "api_key_env", "api_version", "responses"):
        return None if isinstance(value, str) and value.strip() else "a non-empty string"
    if key in ("temperature", "top_p"):
        high = 2 if key == "temperature" else 1
        ok = type(value) in (int, float) and 0 <= value <= high
        return None if ok else f"a number from 0 to {high}"
    if key in ("max_tokens", "timeout"):
        return None if type(value) is int and value >= 1 else "an integer ≥ 1"
    if key == "max_retries":
        return None if type(value) is int and value >= 0 else "an integer ≥ 0"
    if key in ("strict", "reasoning"):
        return None if isinstance(value, bool) else "true or false"
    if key == "reasoning_effort":
        return None if value in EFFORTS else "one of " + ", ".join(EFFORTS)
    if key == "call_tools":
        ok = value in ("all", "none") or (isinstance(value, list)
                                         and all(isinstance(v, str) for v in value))
        return None if ok else '"all", "none" or a list of tool names'
    return None


def _reasoning_problems(settings: ModelSettings) -> list[str]:
    """What the model refuses in the settings a config override produced (a reasoning
    model's sampling keys, a Claude model that takes none; the declaration alone is checked by
    the checker)."""
    where = f"luma.config.json: models.{settings.name}"
    out = []
    if settings.reasoning_effort is not None and settings.provider in REASONING_PROVIDERS:
        problem = effort_problem(settings.name, settings.model, settings.reasoning,
                                 settings.reasoning_effort)
        if problem is not None:
            out.append(f"{where}: {problem}")
    for key, value in (("temperature", settings.temperature), ("top_p", settings.top_p)):
        if value is not None:
            problem = sampling_problem(settings.provider, settings.name, settings.model,
                                       settings.reasoning, settings.reasoning_effort, key, value)
            if problem is not None:
                out.append(f"{where}: {problem}")
    return out


def _known(models: Mapping[str, ModelSettings]) -> str:
    return "models: " + ", ".join(sorted(models))


def _int_or_none(value: Any) -> int | None:
    return value if type(value) is int and value >= 1 else None


def _int_or(value: Any, default: int) -> int:
    return value if type(value) is int and value >= 0 else default


def _number_or_none(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) else None
