"""What the offline ``test`` model saw in a conversation (MODELS.md §4), for the values it
synthesizes: the fields of tool results and the values written in the prompt.

- A tool result's JSON gives every key at any depth with its value (``{"words": 5}``).
- The prompt gives the same for each JSON object or list written in it (an interpolated value),
  a value after a label at the start of a line (``The text is: Luma keeps contracts``,
  ``limit: 3``), and the other numbers in it, in order (``add 20 and 22``).

Keys are compared in lower case. Tool results come first, the latest first: what the model's own
calls returned is the freshest fact it has.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Seen"]

_MASK = "\x00"
_LABEL = re.compile(r"^\s*(?:(?:the|a|an|my|your|our)\s+)?([A-Za-z_][\w-]*)"
                    r"(?:\s+(?:is|are|was|were))?\s*:\s*(.*?)\s*$", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")
_MAX_TEXT = 100_000  # a prompt or result longer than this is read up to here
_MAX_ATTEMPTS = 1_000  # brackets in a prompt tried as the start of JSON


@dataclass(frozen=True, slots=True)
class Seen:
    """``named``: lower-case key → the values seen for it, best first; ``numbers``: the
    prompt's other numbers, in order."""

    named: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    numbers: tuple[int | float, ...] = ()

    @classmethod
    def of(cls, results: Sequence[str], prompt: str | None) -> Seen:
        """From tool results' texts (best first) and the prompt's text."""
        named: dict[str, list[Any]] = {}
        for text in results:
            try:
                value = json.loads(text[:_MAX_TEXT])
            except (ValueError, RecursionError):
                continue  # plain text: nothing named in it
            for key, item in _pairs(value):
                named.setdefault(key, []).append(item)
        numbers: list[int | float] = []
        if prompt:
            for key, item in _prompt_pairs(prompt[:_MAX_TEXT], numbers):
                named.setdefault(key, []).append(item)
        return cls({k: tuple(v) for k, v in named.items()}, tuple(numbers))


def _pairs(value: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Every ``(key, value)`` of the objects in a JSON value, outside in, in order."""
    if depth > 32:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key).lower(), item
        for item in value.values():
            yield from _pairs(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _pairs(item, depth + 1)


def _prompt_pairs(text: str, numbers: list[int | float]) -> Iterator[tuple[str, Any]]:
    """The named values of a prompt; its other numbers are appended to ``numbers``."""
    masked, decoded = _json_spans(text)
    for value in decoded:
        yield from _pairs(value)
    for line in masked.splitlines():
        m = _LABEL.match(line)
        rest = line
        if m and m.group(2) and _MASK not in m.group(2):
            shown = m.group(2)
            number = _number(shown)
            yield m.group(1).lower(), shown if number is None else number
            rest = line[:m.start(2)] if number is not None else line
        for found in _NUMBER.finditer(rest):
            value = _number(found.group())
            if value is not None:
                numbers.append(value)


def _json_spans(text: str) -> tuple[str, list[Any]]:
    """The text with each JSON object or list in it masked out, and their values."""
    decoder = json.JSONDecoder()
    out: list[str] = []
    values: list[Any] = []
    attempts = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "{[" and attempts < _MAX_ATTEMPTS:
            attempts += 1
            try:
                value, end = decoder.raw_decode(text, i)
            except (ValueError, RecursionError):
                value, end = None, i
            if end > i and isinstance(value, (dict, list)):
                values.append(value)
                out.append(_MASK)
                i = end
                continue
        out.append(ch)
        i += 1
    return "".join(out), values


def _number(text: str) -> int | float | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value
