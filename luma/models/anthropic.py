"""Anthropic Messages API.

Wire format (``POST {base}/v1/messages``, headers ``x-api-key`` and ``anthropic-version``):

- ``system`` apart from ``messages``; ``max_tokens`` always sent (4096 unless set);
- tools ``{name, description, input_schema}``; ``tool_choice`` ``{"type": "auto" | "any" |
  "none"}`` or ``{"type": "tool", "name": …}``;
- the model's calls are ``tool_use`` content blocks (``id``, ``name``, ``input``);
- results go back in one user message of ``tool_result`` blocks (``tool_use_id``, ``content``,
  ``is_error`` for failures), in the model's order; consecutive messages of one role are merged,
  as the API wants user and assistant turns to alternate;
- the structured final answer is a forced final-answer tool: it works on every Claude model and
  next to the program's own tools; its input is the answer;
- ``stop_reason`` ``refusal`` is a refusal; usage ``input_tokens``, ``output_tokens``,
  ``cache_read_input_tokens``, ``cache_creation_input_tokens``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from luma.models.base import (ChatRequest, ChatResponse, Message, ModelSettings, ToolCall,
                              ToolSpec, Usage)
from luma.models.dialects import anthropic_schema
from luma.models.http import ModelEndpoint, ModelHttp, api_key, bad_response, refusal
from luma.models.wire import (require_model_id, FINAL_ANSWER_DESCRIPTION, FinalAnswerTool, arguments_object,
                              as_int, final_answer_tool, system_text)
from luma.runtime.errors import LumaError

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_KEY_ENV = "ANTHROPIC_API_KEY"
DEFAULT_MAX_TOKENS = 4096


def tool_declaration(spec: ToolSpec) -> dict[str, Any]:
    """One tool as Anthropic receives it."""
    declaration: dict[str, Any] = {"name": spec.name}
    if spec.description:
        declaration["description"] = spec.description
    declaration["input_schema"] = anthropic_schema(spec.parameters)
    return declaration


class AnthropicProvider:
    def __init__(self, settings: ModelSettings, http: ModelHttp, env: Mapping[str, str]) -> None:
        self.settings = settings
        self.http = http
        self.env = env
        require_model_id(settings)

    def url(self) -> str:
        return f"{(self.settings.base_url or ANTHROPIC_BASE_URL).rstrip('/')}/v1/messages"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        key, key_env = api_key(self.settings, self.env, ANTHROPIC_KEY_ENV)
        endpoint = ModelEndpoint(self.settings, "Anthropic", key_env, (key,))
        body, final = self.request_body(request)
        headers = {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
        answer = await self.http.post_json(endpoint, self.url(), headers, body)
        return self.parse_response(endpoint, answer, final)

    async def aclose(self) -> None:
        """Nothing to close: the HTTP client belongs to the run."""

    # ------------------------------------------------------------------------------ request
    def request_body(self, request: ChatRequest) -> tuple[dict[str, Any], FinalAnswerTool | None]:
        """The request body, and the final-answer tool when one is asked for."""
        s = self.settings
        body: dict[str, Any] = {"model": s.model,
                                "max_tokens": s.max_tokens or DEFAULT_MAX_TOKENS}
        system = system_text(request.messages)
        if system:
            body["system"] = system
        body["messages"] = _messages(request.messages)
        tools = [tool_declaration(t) for t in request.tools]
        choice: dict[str, Any] | None = _tool_choice(request.tool_choice) if tools else None
        final = None
        fmt = request.response_format
        if fmt is not None:
            final = final_answer_tool(request, fmt)
            tools.append({"name": final.name, "description": FINAL_ANSWER_DESCRIPTION,
                          "input_schema": anthropic_schema(final.schema)})
            if choice is None or choice["type"] != "tool":
                choice = {"type": "tool", "name": final.name}
        if tools:
            body["tools"] = tools
            assert choice is not None
            body["tool_choice"] = choice
        if s.temperature is not None:
            body["temperature"] = s.temperature
        if s.top_p is not None:
            body["top_p"] = s.top_p
        return body, final

    # ----------------------------------------------------------------------------- response
    def parse_response(self, endpoint: ModelEndpoint, body: Any,
                       final: FinalAnswerTool | None = None) -> ChatResponse:
        if not isinstance(body, dict):
            raise bad_response(endpoint, "the body is not a JSON object")
        blocks = body.get("content")
        if not isinstance(blocks, list):
            raise bad_response(endpoint, "'content' is missing")
        stop = body.get("stop_reason")
        texts: list[str] = []
        calls: list[ToolCall] = []
        answer: str | None = None
        for i, block in enumerate(blocks):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                if not isinstance(block.get("text"), str):
                    raise bad_response(endpoint, f"content[{i}] is a text block without text")
                texts.append(block["text"])
            elif kind == "tool_use":
                if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                    raise bad_response(endpoint, f"content[{i}] is a tool_use block without "
                                                 "an id or a name")
                arguments = block.get("input", {})
                if final is not None and block["name"] == final.name:
                    answer = final.answer_text(arguments)
                else:
                    calls.append(ToolCall(block["id"], block["name"], arguments))
            elif kind is None:
                raise bad_response(endpoint, f"content[{i}] has no type")
            # other block types (thinking, server tools) carry nothing Luma reads
        if stop == "refusal":
            raise refusal(endpoint, "".join(texts) or None)
        content = answer if answer is not None else ("".join(texts) if texts else None)
        return ChatResponse(content=content, tool_calls=tuple(calls),
                            finish_reason=stop if isinstance(stop, str) else None,
                            usage=_usage(body.get("usage")))


def _messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks: list[dict[str, Any]] = []
        if m.role == "tool":
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id,
                                      "content": m.content or ""}
            if m.is_error:
                result["is_error"] = True
            blocks.append(result)
        else:
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            for call in m.tool_calls:
                blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                               "input": arguments_object(call)})
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            previous = out[-1]["content"]
            if role == "user" and blocks[0]["type"] == "tool_result":
                # tool results must open the user turn that follows the tool calls
                split = next((i for i, b in enumerate(previous) if b["type"] != "tool_result"),
                             len(previous))
                previous[split:split] = blocks
            else:
                previous.extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _tool_choice(choice: str) -> dict[str, Any]:
    if choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    return {"type": "tool", "name": choice}


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    read = raw.get("cache_read_input_tokens")
    created = as_int(raw.get("cache_creation_input_tokens"))
    # input_tokens counts only the uncached part; the neutral count is the whole prompt
    total_in = as_int(raw.get("input_tokens")) + as_int(read) + created
    return Usage(input_tokens=total_in, output_tokens=as_int(raw.get("output_tokens")),
                 cached_tokens=read if isinstance(read, int) else None)
