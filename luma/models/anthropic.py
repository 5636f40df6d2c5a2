"""Anthropic Messages API.

Wire format (``POST {base}/v1/messages``, headers ``x-api-key`` and ``anthropic-version``):

- ``system`` apart from ``messages``; ``max_tokens`` always sent (4096 unless set);
- tools ``{name, description, input_schema}``; ``tool_choice`` ``{"type": "auto" | "any" |
  "none"}`` or ``{"type": "tool", "name": …}``;
- the model's calls are ``tool_use`` content blocks (``id``, ``name``, ``input``);
- results go back in one user message of ``tool_result`` blocks (``tool_use_id``, ``content``,
  ``is_error`` for failures), in the model's order; consecutive messages of one role are merged,
  as the API wants user and assistant turns to alternate;
- the structured final answer is ``output_config.format`` (``{"type": "json_schema", schema}``,
  the answer as the text) on the models that have structured outputs (Claude Haiku 4.5, Sonnet
  4.5 and later, Opus 4.1 and later, the 5 family), when the schema fits its limits; else a
  forced final-answer tool, whose input is the answer;
- when the endpoint refuses ``output_config`` (a gateway without structured outputs), the
  request is sent once more with the forced final-answer tool, and so are the later ones;
- a forced ``tool_choice`` is not sent to the models that refuse it (Claude Fable and Mythos);
  when the API refuses one (``Thinking may not be enabled when tool_choice forces tool use.``,
  or a model that never takes one), the request is sent once more with ``auto``, and this model
  gets ``auto`` from then on;
- ``stop_reason`` ``refusal`` is a refusal, its reason from ``stop_details`` (never the partial
  text); ``max_tokens`` and ``model_context_window_exceeded`` are a cut-off answer; usage
  ``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``.

Which models have structured outputs and refuse forcing: facts from pydantic-ai
``pydantic_ai_slim/pydantic_ai/profiles/anthropic.py`` at commit
4fda38988f2939fa6ea9cdefcf120693e10ef491.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from luma.models.base import (ChatRequest, ChatResponse, Message, ModelSettings, ToolCall,
                              ToolSpec, Usage)
from luma.models.dialects import anthropic_schema
from luma.models.http import ModelEndpoint, ModelHttp, api_key, bad_response, refusal
from luma.models.wire import (FINAL_ANSWER_DESCRIPTION, FinalAnswerTool, JsonArray,
                              SentMessages, arguments_object, as_int, as_text, encode_json,
                              final_answer_tool, require_model_id, system_text)
from luma.runtime.errors import LumaError
from luma.runtime.secrets import SecretRedactor

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_KEY_ENV = "ANTHROPIC_API_KEY"
DEFAULT_MAX_TOKENS = 4096
TRUNCATED_STOPS = {"max_tokens": "max_tokens", "model_context_window_exceeded": "context_window"}
_CLAUDE_ID = re.compile(r"claude-([a-z]+)-([0-9]+)(?:-([0-9]{1,2})(?![0-9]))?")
_NEVER_FORCED = ("claude-fable", "claude-mythos")
# keywords structured outputs does not take; said in the description instead
_UNSUPPORTED = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                "minLength", "maxLength", "maxItems", "minProperties", "maxProperties",
                "uniqueItems")


def has_structured_outputs(model_id: str | None) -> bool:
    """Whether the Claude model takes ``output_config.format`` (Haiku 4.5, Sonnet 4.5+, Opus
    4.1+, every 5-family model and later)."""
    found = _CLAUDE_ID.match((model_id or "").lower())
    if found is None:
        return False
    family, major, minor = found.group(1), int(found.group(2)), int(found.group(3) or 0)
    if major != 4:
        return major > 4
    return minor >= 5 or (family == "opus" and minor >= 1)


def takes_forced_tool(model_id: str | None) -> bool:
    """Claude Fable and Mythos refuse a forced ``tool_choice`` outright."""
    return not (model_id or "").lower().startswith(_NEVER_FORCED)


def output_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The answer schema as structured outputs takes it, or None when it cannot (a recursive
    schema, or an object open to more properties). Every object is closed; the keywords it
    does not take are said in the description, and local validation still enforces them."""
    source = anthropic_schema(schema)
    defs = source.get("$defs")
    if isinstance(defs, dict) and _recursive(defs):
        return None
    try:
        closed: dict[str, Any] = _closed(source)
    except ValueError:
        return None
    return closed


def _closed(node: Any) -> Any:
    if isinstance(node, list):
        return [_closed(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    words: list[str] = []
    for key, value in node.items():
        if key in _UNSUPPORTED or (key == "minItems" and value not in (0, 1)):
            words.append(f"{key}: {json.dumps(value)}")
        elif key in ("properties", "$defs"):
            out[key] = {name: _closed(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf", "oneOf", "allOf", "not"):
            out[key] = _closed(value)
        else:
            out[key] = value
    if "oneOf" in out:
        out["anyOf"] = out.pop("oneOf")   # structured outputs takes anyOf
    if out.get("type") == "object" or "properties" in out:
        extra = out.get("additionalProperties")
        if extra is not False and (extra is not None or "properties" not in out):
            raise ValueError("an open object")   # a map, `any` or a free-form object
        out["additionalProperties"] = False
    if words:
        base = out.get("description")
        said = "; ".join(words)
        out["description"] = f"{base} ({said})" if isinstance(base, str) and base else said
    return out


def _recursive(defs: dict[str, Any]) -> bool:
    refs = {name: set(re.findall(r'"#/\$defs/([^"]+)"', json.dumps(body)))
            for name, body in defs.items()}

    def reaches(start: str, seen: set[str]) -> bool:
        for nxt in refs.get(start, ()):
            if nxt == start or nxt in seen:
                return True
            if reaches(nxt, seen | {nxt}):
                return True
        return False

    return any(reaches(name, {name}) for name in refs)


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
        # what this model takes, until the API says otherwise
        self._forcing = takes_forced_tool(settings.model)
        self._structured = has_structured_outputs(settings.model)
        self._sent = SentMessages()   # each message's blocks as JSON, as they were first sent

    def url(self) -> str:
        return f"{(self.settings.base_url or ANTHROPIC_BASE_URL).rstrip('/')}/v1/messages"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        key, key_env = api_key(self.settings, self.env, ANTHROPIC_KEY_ENV)
        endpoint = ModelEndpoint(self.settings, "Anthropic", key_env, (key,))
        headers = {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
        while True:
            body, final = self.request_body(request)
            try:
                answer = await self.http.post_json(endpoint, self.url(), headers, body)
                break
            except LumaError as err:
                if self._forcing and _forcing_refused(err, body):
                    self._forcing = False   # thinking is on, or the model never takes one
                elif self._structured and _structured_refused(err, body):
                    self._structured = False    # an endpoint without structured outputs
                else:
                    raise
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
        self._sent.start_request()
        body["messages"] = JsonArray(
            lambda redactor: _messages(request.messages, self._sent, redactor))
        tools = [tool_declaration(t) for t in request.tools]
        choice: dict[str, Any] | None = _tool_choice(request.tool_choice) if tools else None
        final = None
        fmt = request.response_format
        native = output_schema(fmt.schema) if fmt is not None and self._structured else None
        if native is not None:
            body["output_config"] = {"format": {"type": "json_schema", "schema": native}}
        elif fmt is not None:
            final = final_answer_tool(request, fmt)
            tools.append({"name": final.name, "description": FINAL_ANSWER_DESCRIPTION,
                          "input_schema": anthropic_schema(final.schema)})
            if choice is None or choice["type"] != "tool":
                choice = {"type": "tool", "name": final.name}
        if tools:
            body["tools"] = tools
            assert choice is not None
            if not self._forcing and choice["type"] in ("tool", "any"):
                choice = {"type": "auto"}
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
            # the text streamed before the stop is partial output, not the reason
            raise refusal(endpoint, _refusal_reason(body.get("stop_details")))
        content = answer if answer is not None else ("".join(texts) if texts else None)
        return ChatResponse(content=content, tool_calls=tuple(calls),
                            finish_reason=stop if isinstance(stop, str) else None,
                            usage=_usage(body.get("usage")),
                            truncated=TRUNCATED_STOPS.get(stop) if isinstance(stop, str) else None,
                            model=as_text(body.get("model")))


def _refusal_reason(details: Any) -> str:
    """The refusal's reason from ``stop_details`` (``{"type": "refusal", "category",
    "explanation"}``)."""
    explanation = details.get("explanation") if isinstance(details, dict) else None
    category = details.get("category") if isinstance(details, dict) else None
    reason = explanation if isinstance(explanation, str) and explanation.strip() else \
        "Anthropic stopped the answer (stop_reason: refusal)"
    if isinstance(category, str) and category:
        reason = f"{reason.rstrip('.')} (category: {category})"
    return reason


def _forcing_refused(err: LumaError, body: dict[str, Any]) -> bool:
    """The API refused the forced ``tool_choice`` this request sent."""
    choice = body.get("tool_choice")
    return (err.code == "MODEL_HTTP_ERROR" and (err.details or {}).get("status") == 400
            and isinstance(choice, dict) and choice.get("type") in ("tool", "any")
            and "forces tool use" in err.message)


def _structured_refused(err: LumaError, body: dict[str, Any]) -> bool:
    """The endpoint refused the ``output_config.format`` this request sent (a gateway or a
    platform that does not have structured outputs for the model)."""
    text = err.message.lower()
    return (err.code == "MODEL_HTTP_ERROR" and (err.details or {}).get("status") == 400
            and "output_config" in body
            and any(w in text for w in ("output_config", "output format", "structured output")))


def _blocks(m: Message) -> list[dict[str, Any]]:
    """The content blocks of one message (none for a system message: it goes apart)."""
    if m.role == "system":
        return []
    if m.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id,
                                  "content": m.content or ""}
        if m.is_error:
            result["is_error"] = True
        return [result]
    blocks: list[dict[str, Any]] = []
    if m.content:
        blocks.append({"type": "text", "text": m.content})
    for call in m.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                       "input": arguments_object(call)})
    return blocks


def _encoded_blocks(m: Message, redactor: SecretRedactor) -> list[tuple[bool, str]]:
    """Each block of a message as (is a tool result, its JSON text)."""
    return [(b["type"] == "tool_result", encode_json(b, redactor)) for b in _blocks(m)]


def _messages(messages: tuple[Message, ...], sent: SentMessages,
              redactor: SecretRedactor) -> list[str]:
    """The conversation as Anthropic's messages, each as its JSON text. Consecutive messages of
    one role are merged into one; their blocks are encoded once, as the message is first
    sent, and joined."""
    turns: list[tuple[str, list[tuple[bool, str]]]] = []
    for m in messages:
        blocks = sent.get(m, redactor, lambda m: _encoded_blocks(m, redactor))
        if not blocks:
            continue
        role = "assistant" if m.role == "assistant" else "user"
        if turns and turns[-1][0] == role:
            previous = turns[-1][1]
            if role == "user" and blocks[0][0]:
                # tool results must open the user turn that follows the tool calls
                split = next((i for i, b in enumerate(previous) if not b[0]), len(previous))
                previous[split:split] = blocks
            else:
                previous.extend(blocks)
        else:
            turns.append((role, list(blocks)))
    head = {role: encode_json("role", redactor) + ":" + encode_json(role, redactor) + ","
            + encode_json("content", redactor) + ":" for role in ("user", "assistant")}
    return ["{" + head[role] + "[" + ",".join(text for _, text in blocks) + "]}"
            for role, blocks in turns]


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
