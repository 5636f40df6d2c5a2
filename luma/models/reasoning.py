"""Which OpenAI (and Azure OpenAI) models reason, from the model id, and which models refuse
sampling settings (docs/models.md).

A reasoning model takes ``max_completion_tokens`` instead of ``max_tokens``, accepts
``reasoning_effort``, and, while it reasons, refuses a ``temperature`` or ``top_p`` other than
the default. The families differ in whether they reason when ``reasoning_effort`` is not given,
and whether ``reasoning_effort: "none"`` turns reasoning off:

- ``o1``, ``o3``, ``o4`` … and the first GPT-5 family (``gpt-5``, ``gpt-5-mini``, ``-nano``,
  ``-pro``, ``-codex``), the ``gpt-5.N-chat`` and ``gpt-5.N-pro`` variants and
  ``gpt-5.1-codex``: always reason;
- ``gpt-5.1`` … ``gpt-5.4`` (with ``-mini``, ``-nano``): reason only when ``reasoning_effort``
  is given and is not ``"none"``;
- ``gpt-5.5`` and later ``gpt-5.N``: reason unless ``reasoning_effort`` is ``"none"``;
- ``gpt-6`` and later: always reason;
- ``gpt-5-chat…`` and every other id: do not reason.

``gpt-5-1`` reads as ``gpt-5.1`` (Azure deployment names have no dots).

On Chat Completions, ``gpt-5.2`` and later ``gpt-5.N`` models (not the ``-chat``, ``-pro`` and
``-codex`` variants) refuse function tools next to any reasoning: with tools, they must be sent
``reasoning_effort: "none"`` (``tools_need_no_reasoning``).

The model key ``reasoning`` overrides the rule, for an Azure deployment or a compatible server
whose names say nothing: ``true`` reads as "reasons unless ``reasoning_effort`` is ``"none"``",
``false`` as "does not reason".

Anthropic's Claude Opus 4.7, 4.8 and 5, Sonnet 5, Fable 5 and Mythos 5 refuse
``temperature`` and ``top_p`` altogether.

Facts from pydantic-ai ``pydantic_ai_slim/pydantic_ai/profiles/openai.py`` (verified there
against the live API, 2026-07) and ``profiles/anthropic.py``, at commit
4fda38988f2939fa6ea9cdefcf120693e10ef491.
This module imports nothing heavy: the checker uses it.
"""

from __future__ import annotations

import re

from luma.record import Record

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
REASONING_PROVIDERS = ("openai", "azure")

# Patterns for re.match, which compiles each on first use (and keeps it): the checker imports
# this module for every program, and only a model with sampling or reasoning keys needs them.
_O_SERIES = r"o[0-9]"
# gpt-5.N, and gpt-5-N as Azure deployments spell it (not a dated gpt-5-2025-08-07)
_GPT5_MINOR = r"gpt-5[.-]([0-9]{1,2})(?![0-9])(.*)"
_GPT_MAJOR = r"gpt-([0-9]+)(?![0-9.])"
_NO_SAMPLING_CLAUDE = ("claude-fable-5", "claude-mythos-5", "claude-opus-4-7", "claude-opus-4-8",
                       "claude-opus-5", "claude-sonnet-5")


class Reasoning(Record):
    """How a model family reasons: ``by_default``, it reasons when ``reasoning_effort`` is not
    given; ``can_disable``, ``reasoning_effort: "none"`` turns reasoning off."""

    __slots__ = __match_args__ = ("by_default", "can_disable")

    def __init__(self, by_default: bool, can_disable: bool) -> None:
        self.by_default = by_default
        self.can_disable = can_disable

    def active(self, effort: str | None) -> bool:
        """Whether the model reasons with this ``reasoning_effort`` (None: not given)."""
        if effort is None:
            return self.by_default
        return not (effort == "none" and self.can_disable)


ALWAYS = Reasoning(by_default=True, can_disable=False)
OPT_IN = Reasoning(by_default=False, can_disable=True)
DEFAULT_ON = Reasoning(by_default=True, can_disable=True)


def reasoning_of(model_id: str | None, override: bool | None = None) -> Reasoning | None:
    """The reasoning family of an OpenAI model id, or None for a model that does not reason."""
    if override is not None:
        return DEFAULT_ON if override else None
    if not model_id:
        return None
    name = model_id.strip().lower()
    if re.match(_O_SERIES, name):
        return ALWAYS
    if name.startswith("gpt-5-chat"):
        return None
    minor = re.match(_GPT5_MINOR, name)
    if minor is not None:
        number, rest = int(minor.group(1)), minor.group(2)
        if rest.startswith(("-chat", "-pro")) or (number == 1 and rest.startswith("-codex")):
            return ALWAYS
        return OPT_IN if number <= 4 else DEFAULT_ON
    major = re.match(_GPT_MAJOR, name)
    if major is not None and int(major.group(1)) >= 5:
        return ALWAYS
    return None


def takes_parallel_tool_calls(model_id: str | None) -> bool:
    """The o-series refuses ``parallel_tool_calls`` (it makes one call per turn anyway)."""
    return not re.match(_O_SERIES, (model_id or "").strip().lower())


def tools_need_no_reasoning(model_id: str | None, override: bool | None = None) -> bool:
    """Whether Chat Completions refuses function tools while this model reasons."""
    if override is not None or not model_id:
        return False
    minor = re.match(_GPT5_MINOR, model_id.strip().lower())
    if minor is None:
        return False
    rest = minor.group(2)
    return int(minor.group(1)) >= 2 and not rest.startswith(("-chat", "-pro", "-codex"))


def sampling_problem(provider: str | None, model: str, model_id: str | None,
                     override: bool | None, effort: str | None, key: str,
                     value: float) -> str | None:
    """Why ``key`` (``temperature`` or ``top_p``) set to ``value`` cannot be sent, or None."""
    if provider == "anthropic":
        if (model_id or "").lower().startswith(_NO_SAMPLING_CLAUDE):
            return f"Model '{model}' ({model_id}) does not accept '{key}'; remove '{key}'."
        return None
    if provider not in REASONING_PROVIDERS or value == 1:
        return None   # 1 is the default, which every reasoning model takes
    family = reasoning_of(model_id, override)
    if family is None or not family.active(effort):
        return None
    what = f"Model '{model}' is a reasoning model ({model_id})" if override is None else \
        f"Model '{model}' is a reasoning model (reasoning: true)"
    if family.can_disable:
        now = f'reasoning_effort "{effort}"' if effort is not None else "no reasoning_effort"
        return (f"{what} and reasons with {now}, so it does not accept '{key}'; remove "
                f"'{key}', or set reasoning_effort: \"none\".")
    return f"{what} and always reasons, so it does not accept '{key}'; remove '{key}'."


def effort_problem(model: str, model_id: str | None, override: bool | None,
                   effort: str) -> str | None:
    """Why this ``reasoning_effort`` cannot be sent, or None."""
    family = reasoning_of(model_id, override)
    if effort == "none" and family is not None and not family.can_disable:
        return (f"Model '{model}' ({model_id}) always reasons, so reasoning_effort \"none\" is "
                "not accepted; use \"low\", \"medium\" or \"high\".")
    return None
