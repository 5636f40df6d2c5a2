"""Small pieces the provider wire formats share: the forced final-answer tool, tool arguments
as objects, and tool results as JSON."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from luma.models.base import ChatRequest, Message, ModelSettings, ResponseFormat, ToolCall

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


def require_model_id(settings: ModelSettings, what: str = "model id") -> None:
    """An HTTP provider needs the provider's model id (azure: the deployment) to call."""
    if not settings.model:
        from luma.runtime.errors import LumaError

        raise LumaError("MODEL_CONFIG", f"Model '{settings.name}' needs a name: the {what} to call.")
