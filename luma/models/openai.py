"""OpenAI Chat Completions, for OpenAI itself, any OpenAI-compatible server, and Azure OpenAI.

Wire format (``POST {base}/chat/completions``; Azure:
``POST {base}/openai/deployments/{deployment}/chat/completions?api-version=…``):

- auth ``Authorization: Bearer <key>`` (Azure: ``api-key: <key>``);
- tools ``{"type": "function", "function": {name, description, parameters, strict}}``;
- the model's calls in ``choices[0].message.tool_calls[]`` (arguments are JSON text);
- results as ``{"role": "tool", "tool_call_id", "content"}`` messages;
- the structured answer as ``response_format: {"type": "json_schema", "json_schema":
  {name, schema, strict}}``; a refusal in ``message.refusal``;
- usage ``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.cached_tokens``,
  ``completion_tokens_details.reasoning_tokens``;
- ``finish_reason: "length"`` is a cut-off answer; ``"content_filter"``, and Azure's 400 with
  ``error.code: "content_filter"``, are refusals naming the filtered categories
  (``content_filter_results`` / ``innererror.content_filter_result``).

Reasoning models (``luma.models.reasoning``) get ``max_completion_tokens`` on every endpoint and
``reasoning_effort`` when it is set. With ``strict: true`` on the model, ``parallel_tool_calls:
false`` is sent (not to the o-series, which refuses it and makes one call a turn): OpenAI does
not hold parallel calls to the strict schemas.

Tool calls that come without an id, or with the id of another call of the same answer (Gemini's
OpenAI-compatible endpoint sends ``""``), get one (``luma-call-N``), and the results are paired
by it. ``extra_content`` on a call or on the assistant message (Gemini's thought signatures) is
kept and sent back with the call.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from luma.models.base import (ChatRequest, ChatResponse, Message, ModelSettings, ToolCall,
                              ToolSpec, Usage)
from luma.models.dialects import StrictSchemaError, drop_strict_nulls, openai_schema
from luma.models.http import ModelEndpoint, ModelHttp, api_key, bad_response, refusal
from luma.models.reasoning import reasoning_of, takes_parallel_tool_calls, tools_need_no_reasoning
from luma.models.wire import (JsonArray, SentMessages, arguments_text, as_int, as_text, encode_json,
                              require_model_id, schema_name)
from luma.runtime.errors import LumaError

OPENAI_BASE_URL = "https://api.openai.com/v1"
AZURE_API_VERSION = "2024-10-21"   # the current GA data-plane version with structured outputs
AZURE_REASONING_API_VERSION = "2025-04-01-preview"   # reasoning deployments need a preview one
OPENAI_KEY_ENV = "OPENAI_API_KEY"
AZURE_KEY_ENV = "AZURE_OPENAI_API_KEY"
SYNTHETIC_ID_PREFIX = "luma-call-"   # ids Luma gave to calls that came without a usable one


def tool_declaration(spec: ToolSpec, strict: bool | None, *, model: str = "") -> dict[str, Any]:
    """One tool as OpenAI receives it. ``strict`` None: strict when the schema allows it."""
    try:
        parameters, is_strict = openai_schema(spec.parameters, strict)
    except StrictSchemaError as exc:
        raise _not_strict(model, f"tool '{spec.name}'", exc) from None
    function: dict[str, Any] = {"name": spec.name}
    if spec.description:
        function["description"] = spec.description
    function["parameters"] = parameters
    if is_strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _not_strict(model: str, what: str, exc: StrictSchemaError) -> LumaError:
    return LumaError("MODEL_CONFIG",
                     f"Model '{model}' requires strict schemas (strict: true), but {what} cannot "
                     f"be made strict for OpenAI: {exc.reason}.")


class OpenAIProvider:
    """An OpenAI-compatible chat completions endpoint, or Azure OpenAI (``azure=True``)."""

    def __init__(self, settings: ModelSettings, http: ModelHttp, env: Mapping[str, str], *,
                 azure: bool = False) -> None:
        self.settings = settings
        self.http = http
        self.env = env
        self.azure = azure
        if azure and not settings.base_url:
            raise LumaError("MODEL_CONFIG",
                            f"Model '{settings.name}' (azure) needs a base_url, the resource "
                            "endpoint, e.g. https://<resource>.openai.azure.com.")
        require_model_id(settings, "deployment" if azure else "model id")
        self._calls = 0
        self._call_extra: dict[str, Any] = {}      # call id → the call's extra_content
        self._message_extra: dict[str, Any] = {}   # first call id → the message's extra_content
        self._sent = SentMessages()                # each message's JSON, as it was first sent

    @property
    def label(self) -> str:
        return "Azure OpenAI" if self.azure else "OpenAI"

    def url(self) -> str:
        base = (self.settings.base_url or OPENAI_BASE_URL).rstrip("/")
        if self.azure:
            reasoning = reasoning_of(self.settings.model, self.settings.reasoning) is not None
            version = self.settings.api_version or (AZURE_REASONING_API_VERSION if reasoning
                                                    else AZURE_API_VERSION)
            return (f"{base}/openai/deployments/{self.settings.model}/chat/completions"
                    f"?api-version={version}")
        return f"{base}/chat/completions"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        key, key_env = api_key(self.settings, self.env,
                               AZURE_KEY_ENV if self.azure else OPENAI_KEY_ENV)
        endpoint = ModelEndpoint(self.settings, self.label, key_env, (key,))
        headers = {"api-key": key} if self.azure else {"authorization": f"Bearer {key}"}
        body = self.request_body(request)
        answer = await self.http.post_json(endpoint, self.url(), headers, body,
                                           refused=self._filter_refusal)
        return _without_strict_nulls(self.parse_response(endpoint, answer), request, body)

    async def aclose(self) -> None:
        """Nothing to close: the HTTP client belongs to the run."""

    # ------------------------------------------------------------------------------ request
    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        s = self.settings
        body: dict[str, Any] = {}
        if not self.azure:
            body["model"] = s.model
        self._sent.start_request()
        body["messages"] = JsonArray(lambda redactor: [
            self._sent.get(m, redactor, lambda m: encode_json(self._message(m), redactor))
            for m in request.messages])
        if request.tools:
            body["tools"] = [tool_declaration(t, s.strict, model=s.name) for t in request.tools]
            body["tool_choice"] = _tool_choice(request.tool_choice)
            if s.strict is True and takes_parallel_tool_calls(s.model):
                # strict schemas do not hold for parallel calls; strict: true asks for the hold
                body["parallel_tool_calls"] = False
        fmt = request.response_format
        if fmt is not None:
            try:
                schema, strict = openai_schema(fmt.schema, s.strict if fmt.strict is None
                                               else fmt.strict)
            except StrictSchemaError as exc:
                raise _not_strict(s.name, "the answer's schema", exc) from None
            json_schema: dict[str, Any] = {"name": schema_name(fmt.name), "schema": schema}
            if strict:
                json_schema["strict"] = True
            body["response_format"] = {"type": "json_schema", "json_schema": json_schema}
        if s.temperature is not None:
            body["temperature"] = s.temperature
        if s.top_p is not None:
            body["top_p"] = s.top_p
        reasoning = reasoning_of(s.model, s.reasoning)
        if s.max_tokens is not None:
            # OpenAI's own endpoint and every reasoning model want max_completion_tokens
            # (reasoning models refuse max_tokens); other compatible servers know max_tokens.
            official = not self.azure and (s.base_url or OPENAI_BASE_URL).rstrip("/") \
                == OPENAI_BASE_URL
            wanted = official or reasoning is not None
            body["max_completion_tokens" if wanted else "max_tokens"] = s.max_tokens
        effort = s.reasoning_effort
        if request.tools and reasoning is not None and tools_need_no_reasoning(s.model):
            if effort is None and reasoning.by_default:
                effort = "none"    # the only way these models take tools on Chat Completions
            elif reasoning.active(effort):
                raise LumaError(
                    "MODEL_CONFIG",
                    f"Model '{s.name}' ({s.model}) cannot take tools while it reasons: OpenAI's "
                    f"Chat Completions refuses function tools next to reasoning_effort "
                    f"\"{effort}\" for this model; set reasoning_effort: \"none\" on a model "
                    "whose agent has tools.")
        if effort is not None:
            body["reasoning_effort"] = effort
        return body

    def _message(self, m: Message) -> dict[str, Any]:
        if m.role == "tool":
            return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content or ""}
        if m.role == "assistant" and m.tool_calls:
            calls = []
            for c in m.tool_calls:
                call: dict[str, Any] = {"id": c.id, "type": "function",
                                        "function": {"name": c.name,
                                                     "arguments": arguments_text(c)}}
                if c.id in self._call_extra:
                    call["extra_content"] = self._call_extra[c.id]
                calls.append(call)
            out: dict[str, Any] = {"role": "assistant", "content": m.content or None,
                                   "tool_calls": calls}
            extra = self._message_extra.get(m.tool_calls[0].id)
            if extra is not None:
                out["extra_content"] = extra
            return out
        return {"role": m.role, "content": m.content or ""}

    def _filter_refusal(self, status: int, content: bytes) -> str | None:
        """Azure's content filter answers 400 with ``error.code: "content_filter"``."""
        if status != 400:
            return None
        try:
            document = json.loads(content)
        except ValueError:
            return None
        error = document.get("error") if isinstance(document, dict) else None
        if not isinstance(error, dict) or error.get("code") != "content_filter":
            return None
        inner = error.get("innererror")
        result = inner.get("content_filter_result") if isinstance(inner, dict) else None
        return f"{self.label}'s content filter blocked the prompt" + _categories(result)

    def _call_id(self, raw_id: Any, taken: set[str]) -> str:
        if isinstance(raw_id, str) and raw_id and raw_id not in taken:
            return raw_id
        self._calls += 1
        return f"{SYNTHETIC_ID_PREFIX}{self._calls}"

    # ----------------------------------------------------------------------------- response
    def parse_response(self, endpoint: ModelEndpoint, body: Any) -> ChatResponse:
        if not isinstance(body, dict):
            raise bad_response(endpoint, "the body is not a JSON object")
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise bad_response(endpoint, "'choices' is missing or empty")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise bad_response(endpoint, "'choices[0].message' is missing")
        finish = choice.get("finish_reason")
        if isinstance(message.get("refusal"), str) and message["refusal"]:
            raise refusal(endpoint, message["refusal"])
        if finish == "content_filter":
            raise refusal(endpoint, f"{self.label}'s content filter stopped the answer"
                          + _categories(choice.get("content_filter_results")))
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise bad_response(endpoint, "'message.content' is not text")
        calls: list[ToolCall] = []
        taken: set[str] = set()
        for i, raw in enumerate(message.get("tool_calls") or []):
            function = raw.get("function") if isinstance(raw, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str) \
                    or (raw.get("id") is not None and not isinstance(raw.get("id"), str)):
                raise bad_response(endpoint, f"tool_calls[{i}] has no function or name")
            arguments = function.get("arguments", "")
            if not isinstance(arguments, str):
                raise bad_response(endpoint, f"tool_calls[{i}].function.arguments is not text")
            call_id = self._call_id(raw.get("id"), taken)
            taken.add(call_id)
            if isinstance(raw.get("extra_content"), dict):
                self._call_extra[call_id] = raw["extra_content"]
            calls.append(ToolCall(call_id, function["name"], arguments))
        if calls and isinstance(message.get("extra_content"), dict):
            self._message_extra[calls[0].id] = message["extra_content"]
        return ChatResponse(content=content, tool_calls=tuple(calls),
                            finish_reason=finish if isinstance(finish, str) else None,
                            usage=_usage(body.get("usage")),
                            truncated="max_tokens" if finish == "length" else None,
                            model=as_text(body.get("model")))


def _without_strict_nulls(response: ChatResponse, request: ChatRequest,
                          body: dict[str, Any]) -> ChatResponse:
    """Strict mode made every optional field required and nullable, so the model sends ``null``
    for "absent": take those out again, so that what leaves the adapter is neutral."""
    strict_tools = {t["function"]["name"] for t in body.get("tools", [])
                    if t["function"].get("strict")}
    schemas = {t.name: t.parameters for t in request.tools if t.name in strict_tools}
    calls = tuple(dataclasses.replace(c, arguments=_cleaned(schemas[c.name], c.arguments))
                  if c.name in schemas else c for c in response.tool_calls)
    content = response.content
    fmt = body.get("response_format", {}).get("json_schema", {})
    if fmt.get("strict") and request.response_format is not None and content is not None:
        content = _cleaned(request.response_format.schema, content)
    return dataclasses.replace(response, tool_calls=calls, content=content)


def _cleaned(schema: dict[str, Any], text: Any) -> Any:
    """JSON text with the strict-mode nulls removed; text that is not JSON stays as it is."""
    if not isinstance(text, str):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    cleaned = drop_strict_nulls(schema, value)
    if cleaned == value:
        return text
    return json.dumps(cleaned, ensure_ascii=False, separators=(",", ":"))


def _tool_choice(choice: str) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _categories(result: Any) -> str:
    """`` (hate: medium, jailbreak)``: the filtered categories of a content-filter result."""
    if not isinstance(result, dict):
        return ""
    names = []
    for name, verdict in result.items():
        if isinstance(verdict, dict) and verdict.get("filtered") is True:
            severity = verdict.get("severity")
            names.append(f"{name}: {severity}" if isinstance(severity, str)
                         and severity != "safe" else str(name))
    return f" ({', '.join(names)})" if names else ""


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    output = raw.get("completion_tokens_details")
    reasoning = output.get("reasoning_tokens") if isinstance(output, dict) else None
    return Usage(input_tokens=as_int(raw.get("prompt_tokens")),
                 output_tokens=as_int(raw.get("completion_tokens")),
                 cached_tokens=cached if isinstance(cached, int) else None,
                 reasoning_tokens=reasoning if isinstance(reasoning, int) else None)
