"""The neutral model every provider adapter speaks (MODELS.md §2–§3).

The ask engine builds ``ChatRequest``s from these types and reads ``ChatResponse``s; each provider
file translates them to and from its own wire format, and nothing else knows a wire format.
Schemas here are the neutral JSON Schema of ``luma.schema`` (self-contained, with ``$defs``);
a provider applies its dialect transformer when it serializes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """A resolved model declaration (the ``.luma`` keys merged with config overrides)."""

    name: str                      # the declaration's name in the program, e.g. GPT54Mini
    provider: str                  # openai | azure | anthropic | gemini | test
    model: str | None = None       # the provider's model id (azure: the deployment)
    base_url: str | None = None
    api_key_env: str | None = None
    api_version: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    timeout_ms: int = 60000
    max_retries: int = 2
    strict: bool | None = None
    reasoning_effort: str | None = None   # openai / azure
    reasoning: bool | None = None         # openai / azure: overrides the model-id rule
    call_tools: str | list[str] = "all"
    responses: str | None = None   # test provider: scripted turns file (resolved path)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as declared to a model: name, description and the neutral input schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model asked for. ``arguments`` is the raw JSON text when the wire sends
    text (OpenAI), or the already-decoded object (Anthropic, Gemini)."""

    id: str
    name: str
    arguments: str | dict[str, Any] | Any


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None   # role "tool": the call this result answers
    tool_name: str | None = None      # role "tool": the tool's name (Gemini needs it)
    is_error: bool = False            # role "tool": the result reports a failure


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """The structured final answer wanted: a name, the neutral schema and whether to ask the
    provider for strict enforcement (None: strict when the dialect can express the schema)."""

    name: str
    schema: dict[str, Any]
    strict: bool | None = None


ToolChoice = Literal["auto", "none", "required"] | str  # any other string: force that tool


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: ModelSettings
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    response_format: ResponseFormat | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None   # the part of output_tokens spent reasoning


@dataclass(frozen=True, slots=True)
class ChatResponse:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    refusal: str | None = None
    # a cut-off answer: "max_tokens" (the output-token limit) or "context_window" (the model's
    # context filled up); None for a whole answer
    truncated: str | None = None
    model: str | None = None  # the model that answered, as the provider names it


class Provider(Protocol):
    """One provider adapter. ``complete`` raises ``LumaError`` with a ``MODEL_*`` code."""

    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...
