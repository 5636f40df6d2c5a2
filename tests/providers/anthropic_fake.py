"""A fake Anthropic Messages API server."""

from __future__ import annotations

import json
from typing import Any

from providers import sdk_types
from providers.server import Captured, FakeServer, Reply, WireError, require

KEY = "sk-ant-test-0123456789"
VERSION = "2023-06-01"


def validate(req: Captured) -> Reply | None:
    try:
        require(req.path == "/v1/messages", f"unexpected path {req.path}", 404)
        require(req.headers.get("x-api-key") == KEY, "invalid x-api-key", 401)
        require(req.headers.get("anthropic-version") == VERSION, "anthropic-version header")
        require("authorization" not in req.headers, "no bearer token expected")
        body = req.body
        require(isinstance(body, dict), "body must be a JSON object")
        sdk = sdk_types.anthropic_problems(body)
        require(not sdk, f"the request does not fit the anthropic SDK's types: {sdk}")
        require(isinstance(body.get("model"), str), "model: Field required")
        require(isinstance(body.get("max_tokens"), int), "max_tokens: Field required")
        require(isinstance(body.get("system", ""), str), "system must be text here")
        names = _check_tools(body)
        choice = body.get("tool_choice")
        if choice is not None:
            require(body.get("tools") is not None, "tool_choice requires tools")
            require(choice.get("type") in ("auto", "any", "tool", "none"), "tool_choice.type")
            if choice["type"] == "tool":
                require(choice.get("name") in names, "tool_choice.name is not a declared tool")
        _check_messages(body.get("messages"))
    except WireError as exc:
        kind = "authentication_error" if exc.status == 401 else "invalid_request_error"
        return Reply({"type": "error", "error": {"type": kind, "message": str(exc)}}, exc.status)
    return None


def _check_tools(body: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for t in body.get("tools") or []:
        require(isinstance(t.get("name"), str), "tools.name")
        schema = t.get("input_schema")
        require(isinstance(schema, dict) and schema.get("type") == "object",
                "tools.input_schema.type must be 'object'")
        require(not any(k in schema for k in ("oneOf", "anyOf", "allOf")),
                "input_schema does not support oneOf, allOf, or anyOf at the top level")
        require("title" not in schema and "$schema" not in schema, "unexpected title/$schema")
        require("x-luma-" not in json.dumps(schema),
                "x-luma keys must not reach the wire")
        names.add(t["name"])
    return names


def _check_messages(messages: Any) -> None:
    require(isinstance(messages, list) and messages, "messages: at least one message")
    expected = "user"
    pending: list[str] = []
    for i, m in enumerate(messages):
        require(m.get("role") == expected, f"messages: roles must alternate (at {i})")
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        require(isinstance(blocks, list) and blocks, f"messages.{i}.content")
        if pending:
            results = [b for b in blocks if b.get("type") == "tool_result"]
            require([b["tool_use_id"] for b in results] == pending,
                    f"messages.{i}: tool_use ids were found without tool_result blocks "
                    f"immediately after: {pending}")
            require(blocks[:len(results)] == results,
                    f"messages.{i}: tool_result blocks must come first")
            pending = []
        for b in blocks:
            if b.get("type") == "tool_use":
                require(m["role"] == "assistant", "tool_use only in assistant turns")
                require(isinstance(b.get("input"), dict), "tool_use.input must be an object")
                pending.append(b["id"])
            elif b.get("type") == "tool_result":
                require(isinstance(b.get("content"), str), "tool_result.content")
                require(b.get("is_error", False) in (True, False), "is_error must be a bool")
            else:
                require(b.get("type") == "text" and isinstance(b.get("text"), str),
                        f"messages.{i}: unknown block")
        expected = "assistant" if expected == "user" else "user"


def server() -> FakeServer:
    sdk_types.preload("anthropic")
    return FakeServer(validate)


def message(blocks: list[dict[str, Any]], stop: str = "end_turn",
            usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": blocks, "stop_reason": stop, "stop_sequence": None,
            "usage": usage or {"input_tokens": 10, "output_tokens": 5}}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def tool_use(cid: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": name, "input": arguments}
