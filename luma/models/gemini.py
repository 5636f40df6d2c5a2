"""Gemini ``generateContent`` (Google AI, v1beta).

Wire format (``POST {base}/v1beta/models/{model}:generateContent``, header ``x-goog-api-key``):

- ``contents`` of ``{"role": "user" | "model", "parts": [...]}``; the system prompt in
  ``systemInstruction``; sampling in ``generationConfig``;
- tools ``[{"functionDeclarations": [{name, description, parametersJsonSchema}]}]``;
  ``toolConfig.functionCallingConfig`` mode ``AUTO`` / ``ANY`` / ``NONE``, with
  ``allowedFunctionNames`` to force one tool;
- the model's calls are ``functionCall`` parts (``name``, ``args``, sometimes ``id``); results go
  back as ``functionResponse`` parts (``name``, ``response: {"output" | "error": …}``, ``id``),
  in one user turn, in the model's order;
- the structured final answer is ``generationConfig.responseMimeType: application/json`` with
  ``responseJsonSchema`` when no tools are declared. Gemini 2.x refuses a JSON response type next
  to function declarations, so with tools the answer is asked for as a forced final-answer
  function;
- ``usageMetadata`` ``promptTokenCount``, ``candidatesTokenCount``, ``thoughtsTokenCount``,
  ``cachedContentTokenCount``; a blocked prompt or a safety stop is a refusal; ``finishReason:
  MAX_TOKENS`` (with or without parts) is a cut-off answer.

Gemini 3 attaches a ``thoughtSignature`` to function-call parts and wants it back with the call
in the next request: the provider remembers it by call id for the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from luma.models.base import (ChatRequest, ChatResponse, Message, ModelSettings, ToolCall,
                              ToolSpec, Usage)
from luma.models.dialects import gemini_schema
from luma.models.http import ModelEndpoint, ModelHttp, api_key, bad_response, refusal
from luma.models.wire import (FINAL_ANSWER_DESCRIPTION, FinalAnswerTool, JsonArray,
                              SentMessages, arguments_object, as_int, as_text, encode_json,
                              final_answer_tool, require_model_id, system_text)
from luma.runtime.errors import LumaError
from luma.runtime.secrets import SecretRedactor

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"
GEMINI_KEY_ENV = "GEMINI_API_KEY"
SYNTHETIC_ID_PREFIX = "luma-call-"   # ids Luma made up for calls that came without one
REFUSAL_FINISH = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
                            "IMAGE_SAFETY"})


def tool_declaration(spec: ToolSpec) -> dict[str, Any]:
    """One function declaration as Gemini receives it: the parameters in JSON Schema
    (``parametersJsonSchema``), none for a tool without parameters."""
    declaration: dict[str, Any] = {"name": spec.name}
    if spec.description:
        declaration["description"] = spec.description
    parameters = gemini_schema(spec.parameters)
    if parameters.get("properties"):
        declaration["parametersJsonSchema"] = parameters
    return declaration


class GeminiProvider:
    def __init__(self, settings: ModelSettings, http: ModelHttp, env: Mapping[str, str]) -> None:
        self.settings = settings
        self.http = http
        self.env = env
        require_model_id(settings)
        self._signatures: dict[str, str] = {}
        self._calls = 0
        self._sent = SentMessages()   # each message's parts as JSON, as they were first sent

    def url(self) -> str:
        base = (self.settings.base_url or GEMINI_BASE_URL).rstrip("/")
        model = (self.settings.model or "").removeprefix("models/")
        return f"{base}/v1beta/models/{model}:generateContent"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        key, key_env = api_key(self.settings, self.env, GEMINI_KEY_ENV)
        endpoint = ModelEndpoint(self.settings, "Gemini", key_env, (key,))
        body, final = self.request_body(request)
        answer = await self.http.post_json(endpoint, self.url(), {"x-goog-api-key": key}, body)
        return self.parse_response(endpoint, answer, final)

    async def aclose(self) -> None:
        """Nothing to close: the HTTP client belongs to the run."""

    # ------------------------------------------------------------------------------ request
    def request_body(self, request: ChatRequest) -> tuple[dict[str, Any], FinalAnswerTool | None]:
        s = self.settings
        self._sent.start_request()
        body: dict[str, Any] = {"contents": JsonArray(
            lambda redactor: self._contents(request.messages, redactor))}
        system = system_text(request.messages)
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        declarations = [tool_declaration(t) for t in request.tools]
        config: dict[str, Any] = _function_calling(request.tool_choice)
        generation: dict[str, Any] = {}
        final = None
        fmt = request.response_format
        if fmt is not None and declarations:
            final = final_answer_tool(request, fmt)
            declarations.append({"name": final.name, "description": FINAL_ANSWER_DESCRIPTION,
                                 "parametersJsonSchema": gemini_schema(final.schema)})
            if config.get("allowedFunctionNames") is None:
                config = {"mode": "ANY", "allowedFunctionNames": [final.name]}
        elif fmt is not None:
            generation["responseMimeType"] = "application/json"
            generation["responseJsonSchema"] = gemini_schema(fmt.schema)
        if declarations:
            body["tools"] = [{"functionDeclarations": declarations}]
            body["toolConfig"] = {"functionCallingConfig": config}
        if s.temperature is not None:
            generation["temperature"] = s.temperature
        if s.top_p is not None:
            generation["topP"] = s.top_p
        if s.max_tokens is not None:
            generation["maxOutputTokens"] = s.max_tokens
        if generation:
            body["generationConfig"] = generation
        return body, final

    def _parts(self, m: Message, names: Callable[[], dict[str, str]]) -> list[dict[str, Any]]:
        """The parts of one message (none for a system message: it goes apart). ``names``: the
        tool name of each call id of the conversation (a function response carries it)."""
        if m.role == "system":
            return []
        if m.role == "tool":
            response = _function_response(m, names().get(m.tool_call_id or ""))
            return [{"functionResponse": response}]
        parts: list[dict[str, Any]] = []
        if m.content:
            parts.append({"text": m.content})
        for call in m.tool_calls:
            function_call: dict[str, Any] = {"name": call.name, "args": arguments_object(call)}
            if not call.id.startswith(SYNTHETIC_ID_PREFIX):
                function_call["id"] = call.id
            part: dict[str, Any] = {"functionCall": function_call}
            if call.id in self._signatures:
                part["thoughtSignature"] = self._signatures[call.id]
            parts.append(part)
        return parts

    def _contents(self, messages: tuple[Message, ...], redactor: SecretRedactor) -> list[str]:
        """The conversation as Gemini's contents, each as its JSON text. Consecutive messages of
        one role are merged into one; their parts are encoded once, as the message is first
        sent, and joined."""
        found: dict[str, str] | None = None

        def names() -> dict[str, str]:  # made only when a new tool result needs it
            nonlocal found
            if found is None:
                found = {c.id: c.name for m in messages for c in m.tool_calls}
            return found

        def encoded(m: Message) -> list[str]:
            return [encode_json(p, redactor) for p in self._parts(m, names)]

        turns: list[tuple[str, list[str]]] = []
        for m in messages:
            parts = self._sent.get(m, redactor, encoded)
            if not parts:
                continue
            role = "model" if m.role == "assistant" else "user"
            if turns and turns[-1][0] == role:
                turns[-1][1].extend(parts)
            else:
                turns.append((role, list(parts)))
        head = {role: encode_json("role", redactor) + ":" + encode_json(role, redactor) + ","
                + encode_json("parts", redactor) + ":" for role in ("user", "model")}
        return ["{" + head[role] + "[" + ",".join(parts) + "]}" for role, parts in turns]

    # ----------------------------------------------------------------------------- response
    def parse_response(self, endpoint: ModelEndpoint, body: Any,
                       final: FinalAnswerTool | None = None) -> ChatResponse:
        if not isinstance(body, dict):
            raise bad_response(endpoint, "the body is not a JSON object")
        feedback = body.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            raise refusal(endpoint, f"the prompt was blocked ({feedback['blockReason']})")
        candidates = body.get("candidates")
        if not isinstance(candidates, list) or not candidates or \
                not isinstance(candidates[0], dict):
            raise bad_response(endpoint, "'candidates' is missing or empty")
        candidate = candidates[0]
        finish = candidate.get("finishReason")
        if finish in REFUSAL_FINISH:
            raise refusal(endpoint, f"the answer was stopped ({finish})")
        content = candidate.get("content")
        parts = content.get("parts", []) if isinstance(content, dict) else []
        if not isinstance(parts, list):
            raise bad_response(endpoint, "'candidates[0].content.parts' is not a list")
        texts: list[str] = []
        calls: list[ToolCall] = []
        answer: str | None = None
        for i, part in enumerate(parts):
            if not isinstance(part, dict):
                raise bad_response(endpoint, f"part {i} is not an object")
            if isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                if not isinstance(call.get("name"), str):
                    raise bad_response(endpoint, f"part {i} is a functionCall without a name")
                arguments = call.get("args", {})
                if final is not None and call["name"] == final.name:
                    answer = final.answer_text(arguments)
                    continue
                call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") \
                    else self._synthetic_id()
                if isinstance(part.get("thoughtSignature"), str):
                    self._signatures[call_id] = part["thoughtSignature"]
                calls.append(ToolCall(call_id, call["name"], arguments))
            elif isinstance(part.get("text"), str) and not part.get("thought"):
                texts.append(part["text"])
        text = answer if answer is not None else ("".join(texts) if texts else None)
        return ChatResponse(content=text, tool_calls=tuple(calls),
                            finish_reason=finish if isinstance(finish, str) else None,
                            usage=_usage(body.get("usageMetadata")),
                            truncated="max_tokens" if finish == "MAX_TOKENS" else None,
                            model=as_text(body.get("modelVersion")))

    def _synthetic_id(self) -> str:
        self._calls += 1
        return f"{SYNTHETIC_ID_PREFIX}{self._calls}"


def _function_response(m: Message, call_name: str | None) -> dict[str, Any]:
    text = m.content or ""
    try:
        value: Any = json.loads(text)
    except ValueError:
        value = text   # a string result, or one cut short by truncation
    response: dict[str, Any] = {"name": m.tool_name or call_name or "",
                                "response": {"error" if m.is_error else "output": value}}
    if m.tool_call_id and not m.tool_call_id.startswith(SYNTHETIC_ID_PREFIX):
        response["id"] = m.tool_call_id
    return response


def _function_calling(choice: str) -> dict[str, Any]:
    if choice == "auto":
        return {"mode": "AUTO"}
    if choice == "none":
        return {"mode": "NONE"}
    if choice == "required":
        return {"mode": "ANY"}
    return {"mode": "ANY", "allowedFunctionNames": [choice]}


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    cached = raw.get("cachedContentTokenCount")
    thoughts = raw.get("thoughtsTokenCount")
    return Usage(input_tokens=as_int(raw.get("promptTokenCount")),
                 output_tokens=as_int(raw.get("candidatesTokenCount")) + as_int(thoughts),
                 cached_tokens=cached if isinstance(cached, int) else None,
                 reasoning_tokens=thoughts if isinstance(thoughts, int) else None)
