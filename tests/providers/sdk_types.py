"""Requests checked against the official SDKs' own request types.

``openai`` and ``anthropic`` describe a request body as nested ``TypedDict``s, which accept any
extra key; ``walk`` follows the type hints recursively and reports a key the type does not
declare, a required key that is missing, a literal with the wrong value and a value of the wrong
JSON kind. ``google-genai`` describes the REST body with pydantic models that forbid extra
fields and accept the wire's camelCase names, so each part of a Gemini body is validated by its
model.
"""

from __future__ import annotations

import collections.abc
import functools
import types
import typing
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin

from typing_extensions import is_typeddict

_SEQUENCES = {list, collections.abc.Iterable, collections.abc.Sequence, typing.Iterable,
              typing.Sequence, typing.List}
_MAPPINGS = {dict, collections.abc.Mapping, typing.Dict, typing.Mapping}


def walk(value: Any, hint: Any, path: str = "body") -> list[str]:
    """What in ``value`` does not fit the type ``hint`` (empty: it fits)."""
    origin = get_origin(hint)
    if origin is typing.Annotated:
        return walk(value, get_args(hint)[0], path)
    if origin in (Required, NotRequired):
        return walk(value, get_args(hint)[0], path)
    if hint is Any or hint is object:
        return []
    if hint is None or hint is type(None):
        return [] if value is None else [f"{path}: expected null, got {value!r:.60}"]
    if origin in (Union, types.UnionType):
        return _union(value, get_args(hint), path)
    if origin is Literal:
        allowed = get_args(hint)
        return [] if value in allowed else [f"{path}: {value!r:.60} is not one of {allowed}"]
    if is_typeddict(hint):
        return _typeddict(value, hint, path)
    if origin in _SEQUENCES or hint in _SEQUENCES:
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        args = get_args(hint)
        item = args[0] if args else Any
        return [p for i, v in enumerate(value) for p in walk(v, item, f"{path}[{i}]")]
    if origin in _MAPPINGS or hint in _MAPPINGS:
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {type(value).__name__}"]
        args = get_args(hint)
        item = args[1] if len(args) == 2 else Any
        return [p for k, v in value.items() for p in walk(v, item, f"{path}.{k}")]
    if hint is str:
        return [] if isinstance(value, str) else [f"{path}: expected a string, got {value!r:.60}"]
    if hint is bool:
        return [] if isinstance(value, bool) else [f"{path}: expected a boolean"]
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected an integer, got {value!r:.60}"]
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected a number, got {value!r:.60}"]
    if hint is bytes or hint is typing.IO or origin is type:
        return [f"{path}: a file or bytes value cannot be JSON"]
    if isinstance(hint, type) and hint.__module__.startswith(("openai", "anthropic", "httpx")):
        return [f"{path}: {hint.__name__} is not a JSON request value"]
    return []  # a type outside the JSON shapes (a TypeVar, a str subtype): not checked


def _union(value: Any, members: tuple[Any, ...], path: str) -> list[str]:
    results = []
    for member in members:
        problems = walk(value, member, path)
        if not problems:
            return []
        results.append((member, problems))
    # the member whose tag ("type", "role") the value names is the one to blame
    tagged = [problems for member, problems in results if _matches_tag(value, member)]
    if tagged:
        return tagged[0]
    same_kind = [problems for member, problems in results if _same_kind(value, member)]
    return min(same_kind or [p for _, p in results], key=len)


def _same_kind(value: Any, hint: Any) -> bool:
    """Whether ``hint`` is the JSON kind of ``value`` (a list for a list, ...)."""
    while get_origin(hint) in (Required, NotRequired, typing.Annotated):
        hint = get_args(hint)[0]
    origin = get_origin(hint)
    if isinstance(value, list):
        return origin in _SEQUENCES or hint in _SEQUENCES
    if isinstance(value, dict):
        return is_typeddict(hint) or origin in _MAPPINGS or hint in _MAPPINGS
    return not (is_typeddict(hint) or origin in _SEQUENCES or origin in _MAPPINGS)


def _matches_tag(value: Any, hint: Any) -> bool:
    if not (is_typeddict(hint) and isinstance(value, dict)):
        return False
    hints = typing.get_type_hints(hint, include_extras=True)
    for key in ("type", "role"):
        h = hints.get(key)
        while h is not None and get_origin(h) in (Required, NotRequired, typing.Annotated):
            h = get_args(h)[0]
        if h is not None and get_origin(h) is Literal and key in value:
            return value[key] in get_args(h)
    return False


def _typeddict(value: Any, hint: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected an object, got {type(value).__name__}"]
    hints = typing.get_type_hints(hint, include_extras=True)
    problems = [f"{path}: unknown key '{k}' (not in {hint.__name__})"
                for k in value if k not in hints]
    total = getattr(hint, "__total__", True)
    for key, h in hints.items():
        required = total
        if get_origin(h) is Required:
            required = True
        elif get_origin(h) is NotRequired:
            required = False
        if key not in value:
            if required:
                problems.append(f"{path}: missing required key '{key}' ({hint.__name__})")
            continue
        problems += walk(value[key], h, f"{path}.{key}")
    return problems


# ------------------------------------------------------------------------------ per provider
def openai_problems(body: Any) -> list[str]:
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

    problems: list[str] = []
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        body = {**body, "messages": [_without_extra_content(m, f"body.messages[{i}]", problems)
                                     for i, m in enumerate(body["messages"])]}
    return problems + walk(body, CompletionCreateParamsNonStreaming)


def _without_extra_content(message: Any, path: str, problems: list[str]) -> Any:
    """Gemini's OpenAI-compatible endpoint extends an assistant message and its tool calls with
    ``extra_content`` (``{"google": {"thought_signature": …}}``), which the openai SDK's types do
    not know; it must be an object, and the rest must fit the SDK's types."""
    if not isinstance(message, dict):
        return message
    out = dict(message)
    if "extra_content" in out:
        if not isinstance(out.pop("extra_content"), dict):
            problems.append(f"{path}.extra_content: expected an object")
    if isinstance(out.get("tool_calls"), list):
        out["tool_calls"] = [_without_extra_content(c, f"{path}.tool_calls[{j}]", problems)
                             for j, c in enumerate(out["tool_calls"])]
    return out


def azure_problems(body: Any) -> list[str]:
    """Azure takes the OpenAI body without ``model`` (the deployment is in the URL)."""
    if isinstance(body, dict) and "model" not in body:
        return openai_problems({**body, "model": "deployment"})
    return openai_problems(body)


# anthropic>=1 dropped the sampling settings from its request type (its migration guide sends them
# as extra body fields); the API still takes them: recorded/anthropic/sampling_settings.json.
ANTHROPIC_UNTYPED_SAMPLING = ("temperature", "top_p", "top_k")


def anthropic_problems(body: Any) -> list[str]:
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    if not isinstance(body, dict):
        return walk(body, MessageCreateParamsNonStreaming)
    typed = {k: v for k, v in body.items() if k not in ANTHROPIC_UNTYPED_SAMPLING}
    problems = walk(typed, MessageCreateParamsNonStreaming)
    problems += [p for k in ANTHROPIC_UNTYPED_SAMPLING if k in body
                 for p in walk(body[k], int if k == "top_k" else float, f"body.{k}")]
    return problems


@functools.cache
def _gemini_adapters() -> dict[str, Any]:
    import pydantic
    from google.genai import types as g

    return {
        "contents": pydantic.TypeAdapter(list[g.Content]),
        "systemInstruction": pydantic.TypeAdapter(g.Content),
        "tools": pydantic.TypeAdapter(list[g.Tool]),
        "toolConfig": pydantic.TypeAdapter(g.ToolConfig),
        "generationConfig": pydantic.TypeAdapter(g.GenerationConfig),
    }


def preload(provider: str) -> None:
    """Import (and build) a provider's SDK types now, when a fake server starts, not inside the
    first request a client under test times."""
    if provider == "gemini":
        _gemini_adapters()
    elif provider == "anthropic":
        from anthropic.types import message_create_params  # noqa: F401
    else:
        from openai.types.chat import completion_create_params  # noqa: F401


def gemini_problems(body: Any) -> list[str]:
    """The generateContent body: each part validated by google-genai's pydantic model."""
    import pydantic

    if not isinstance(body, dict):
        return ["body: expected an object"]
    parts = _gemini_adapters()
    problems = [f"body: unknown key '{k}'" for k in body if k not in parts]
    if "contents" not in body:
        problems.append("body: missing required key 'contents'")
    for key, adapter in parts.items():
        if key in body:
            try:
                adapter.validate_python(body[key])
            except pydantic.ValidationError as exc:
                problems += [f"body.{key}.{'.'.join(map(str, e['loc']))}: {e['msg']}"
                             for e in exc.errors()]
    return problems
