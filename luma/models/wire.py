"""Small pieces the provider wire formats share: the forced final-answer tool, tool arguments
as objects, and tool results as JSON."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from luma.models.base import ChatRequest, Message, ModelSettings, ResponseFormat, ToolCall

if TYPE_CHECKING:
    from luma.runtime.secrets import SecretRedactor

FINAL_ANSWER_DESCRIPTION = ("Give your final answer. Call this tool exactly once, with the "
                            "complete answer as its input.")
_NAME_SAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class FinalAnswerTool:
    """A structured final answer asked for as a forced tool call (Anthropic, Gemini with tools).

    ``wrapped``: the answer schema is not a plain object, so the tool's input is
    ``{"value": answer}`` and the answer is unwrapped on the way back.
    """

    name: str
    schema: dict[str, Any]
    wrapped: bool

    def answer_text(self, arguments: Any) -> str:
        """The final answer as JSON text, from the tool call's input."""
        if self.wrapped and isinstance(arguments, dict) and "value" in arguments:
            arguments = arguments["value"]
        return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def final_answer_tool(request: ChatRequest, fmt: ResponseFormat) -> FinalAnswerTool:
    """The final-answer tool for a request: a name no declared tool uses, and an object schema."""
    taken = {t.name for t in request.tools}
    name = "final_answer"
    n = 1
    while name in taken:
        name = f"final_answer_{n}"
        n += 1
    schema = fmt.schema
    plain_object = (schema.get("type") == "object" and isinstance(schema.get("properties"), dict)
                    and not any(k in schema for k in ("oneOf", "anyOf", "allOf")))
    if plain_object:
        return FinalAnswerTool(name, schema, False)
    inner = {k: v for k, v in schema.items() if k not in ("$defs", "$schema")}
    wrapper: dict[str, Any] = {"type": "object", "properties": {"value": inner},
                               "required": ["value"], "additionalProperties": False}
    if "$defs" in schema:
        wrapper["$defs"] = schema["$defs"]
    return FinalAnswerTool(name, wrapper, True)


def schema_name(name: str) -> str:
    """A name that fits the providers' ``^[A-Za-z0-9_-]{1,64}$``."""
    cleaned = _NAME_SAFE.sub("_", name)[:64]
    return cleaned or "answer"


def arguments_object(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as an object, for wire formats that carry objects (Anthropic, Gemini).

    Arguments that are not a JSON object (only possible when they came from a text wire) are
    sent back as ``{}``: the failed call has already been answered with a tool result.
    """
    arguments = call.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {}
    return arguments if isinstance(arguments, dict) else {}


def arguments_text(call: ToolCall) -> str:
    """A call's arguments as JSON text (OpenAI carries text)."""
    if isinstance(call.arguments, str):
        return call.arguments
    return json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))


def system_text(messages: Iterable[Message]) -> str | None:
    """The system messages joined, for wires that carry the system prompt apart."""
    parts = [m.content for m in messages if m.role == "system" and m.content]
    return "\n\n".join(parts) if parts else None


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def as_text(value: Any) -> str | None:
    """A non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def require_model_id(settings: ModelSettings, what: str = "model id") -> None:
    """An HTTP provider needs the provider's model id (azure: the deployment) to call."""
    if not settings.model:
        from luma.runtime.errors import LumaError

        raise LumaError("MODEL_CONFIG", f"Model '{settings.name}' needs a name: the {what} to call.")


def encode_json(value: Any, redactor: SecretRedactor) -> str:
    """A value as the JSON text a request body carries: redacted, compact, UTF-8 as it is."""
    return json.dumps(redactor.redact_value(value), ensure_ascii=False, separators=(",", ":"))


class JsonArray:
    """An array in a request body whose items the adapter encodes itself (``items`` gives their
    JSON texts, redacted with the run's redactor): ``ModelHttp.post_json`` joins them. The
    redactor is given at the moment of sending, when the request's own secrets are known."""

    __slots__ = ("items",)

    def __init__(self, items: Callable[[SecretRedactor], list[str]]) -> None:
        self.items = items

    def json(self, redactor: SecretRedactor) -> str:
        return "[" + ",".join(self.items(redactor)) + "]"


class SentMessages:
    """What a provider made of each message it has sent, made once: a conversation's next
    request rebuilds and encodes only its new messages and joins the rest, so a long tool loop
    costs each message once, not once per request.

    A value is kept per message (by identity; the message is held while it is kept) and per
    set of secrets: a secret registered later makes the messages encoded before it be encoded
    again. The values the latest request did not use are dropped once there are more than four
    times as many as it used (plus 256), so a provider that runs many conversations keeps about
    the latest ones."""

    def __init__(self) -> None:
        self._values: dict[int, tuple[Message, int, Any]] = {}
        self._used: set[int] = set()
        self.made = 0     # values made (the tests count them)
        self.reused = 0   # values taken from what an earlier request made

    def start_request(self) -> None:
        if len(self._values) > 4 * len(self._used) + 256:
            self._values = {k: v for k, v in self._values.items() if k in self._used}
        self._used = set()

    def get(self, message: Message, redactor: SecretRedactor,
            make: Callable[[Message], Any]) -> Any:
        key = id(message)
        self._used.add(key)
        generation = len(redactor)
        kept = self._values.get(key)
        if kept is not None and kept[0] is message and kept[1] == generation:
            self.reused += 1
            return kept[2]
        value = make(message)
        self._values[key] = (message, generation, value)
        self.made += 1
        return value
