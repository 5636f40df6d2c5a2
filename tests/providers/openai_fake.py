"""A fake OpenAI Chat Completions server (and Azure's deployment URL form)."""

from __future__ import annotations

import json
import re
from typing import Any

from providers import sdk_types
from providers.server import Captured, FakeServer, Reply, WireError, require

KEY = "sk-test-0123456789abcdef"
NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
STRICT_KEYS = {"type", "description", "title", "properties", "required", "additionalProperties",
               "items", "enum", "anyOf", "$ref", "$defs", "pattern", "format",
               "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
               "minItems", "maxItems"}
STRICT_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6",
                  "uuid"}


def strict_violations(schema: Any, path: str = "#", root: bool = True) -> list[str]:
    """What OpenAI strict mode would reject in a schema (its documented rules)."""
    problems: list[str] = []
    if not isinstance(schema, dict):
        return [f"{path}: not a schema object"]
    if root:
        if schema.get("type") != "object" or "anyOf" in schema:
            problems.append(f"{path}: the root must be an object, not a union")
    for key in schema:
        if key not in STRICT_KEYS:
            problems.append(f"{path}: keyword '{key}' is not supported in strict mode")
    if "$ref" in schema and len(schema) > 1:
        problems.append(f"{path}: $ref may not have sibling keywords")
    if "format" in schema and schema["format"] not in STRICT_FORMATS:
        problems.append(f"{path}: format '{schema['format']}' is not supported")
    if not any(k in schema for k in ("type", "anyOf", "$ref")):
        problems.append(f"{path}: schema must have a 'type' key")
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "object" in types:
        if schema.get("additionalProperties") is not False:
            problems.append(f"{path}: additionalProperties must be false")
        props = schema.get("properties", {})
        if sorted(schema.get("required", [])) != sorted(props):
            problems.append(f"{path}: every property must be required")
        for name, sub in props.items():
            problems += strict_violations(sub, f"{path}/properties/{name}", False)
    if "enum" in schema and "null" in types and None not in schema["enum"]:
        problems.append(f"{path}: a nullable enum must list null")
    if isinstance(schema.get("items"), dict):
        problems += strict_violations(schema["items"], f"{path}/items", False)
    if root:
        problems += _limit_violations(schema)
    for i, sub in enumerate(schema.get("anyOf", [])):
        problems += strict_violations(sub, f"{path}/anyOf/{i}", False)
    for name, sub in (schema.get("$defs") or {}).items():
        problems += strict_violations(sub, f"{path}/$defs/{name}", False)
    return problems


def _limit_violations(schema: dict[str, Any]) -> list[str]:
    """OpenAI's documented size limits of a strict schema: at most 10 levels of object nesting,
    5000 object properties and 1000 enum values in all."""
    defs = schema.get("$defs") or {}
    nodes: list[dict[str, Any]] = []

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            nodes.append(node)
            for key in ("properties", "$defs"):
                for sub in (node.get(key) or {}).values():
                    collect(sub)
            for sub in node.get("anyOf") or []:
                collect(sub)
            collect(node.get("items"))

    def depth(node: Any, expanding: tuple[str, ...]) -> int:
        if not isinstance(node, dict):
            return 0
        name = str(node.get("$ref", "")).removeprefix("#/$defs/")
        if "$ref" in node:
            return 0 if name in expanding else depth(defs.get(name), (*expanding, name))
        subs = [*(node.get("properties") or {}).values(), *(node.get("anyOf") or []),
                node.get("items")]
        return ("properties" in node) + max((depth(s, expanding) for s in subs), default=0)

    collect(schema)
    problems = []
    levels = depth(schema, ())
    if levels > 10:
        problems.append(f"#: {levels} levels of nesting exceeds the limit of 10")
    properties = sum(len(n.get("properties") or {}) for n in nodes)
    if properties > 5000:
        problems.append(f"#: {properties} object properties exceeds the limit of 5000")
    enums = sum(len(n.get("enum") or []) for n in nodes)
    if enums > 1000:
        problems.append(f"#: {enums} enum values exceeds the limit of 1000")
    return problems


def validate(req: Captured, *, azure: bool = False, deployment: str = "") -> Reply | None:
    try:
        if azure:
            require(req.path == f"/openai/deployments/{deployment}/chat/completions",
                    f"unexpected path {req.path}", 404)
            require(bool(req.query.get("api-version")), "api-version is required", 400)
            require(req.headers.get("api-key") == KEY, "Access denied due to invalid key", 401)
            require("authorization" not in req.headers, "azure takes api-key, not a bearer")
        else:
            require(req.path == "/v1/chat/completions", f"unexpected path {req.path}", 404)
            require(req.headers.get("authorization") == f"Bearer {KEY}",
                    "Incorrect API key provided: sk-te****cdef.", 401)
        require(req.headers.get("content-type", "").startswith("application/json"),
                "content-type must be application/json")
        body = req.body
        require(isinstance(body, dict), "body must be a JSON object")
        sdk = sdk_types.azure_problems(body) if azure else sdk_types.openai_problems(body)
        require(not sdk, f"the request does not fit the openai SDK's types: {sdk}")
        if not azure:
            require(isinstance(body.get("model"), str), "'model' is required")
        _check_messages(body.get("messages"))
        tools = body.get("tools")
        names: set[str] = set()
        if tools is not None:
            require(isinstance(tools, list) and tools, "'tools' must be a non-empty list")
            for t in tools:
                require(t.get("type") == "function", "tool type must be 'function'")
                f = t.get("function", {})
                require(NAME_RE.match(f.get("name", "")) is not None, "bad function name")
                require(isinstance(f.get("parameters"), dict), "parameters must be an object")
                if f.get("strict"):
                    problems = strict_violations(f["parameters"])
                    require(not problems, f"Invalid schema for function '{f['name']}': "
                                          f"{problems}")
                names.add(f["name"])
        choice = body.get("tool_choice")
        if choice is not None:
            require(tools is not None, "tool_choice is only allowed when tools are specified")
            if isinstance(choice, dict):
                require(choice.get("type") == "function", "tool_choice.type must be function")
                require(choice.get("function", {}).get("name") in names,
                        "tool_choice names a function that is not in tools")
            else:
                require(choice in ("auto", "none", "required"), f"bad tool_choice {choice!r}")
        fmt = body.get("response_format")
        if fmt is not None:
            require(fmt.get("type") == "json_schema", "response_format.type")
            js = fmt.get("json_schema", {})
            require(NAME_RE.match(js.get("name", "")) is not None, "json_schema.name")
            require(isinstance(js.get("schema"), dict), "json_schema.schema")
            if js.get("strict"):
                problems = strict_violations(js["schema"])
                require(not problems, f"Invalid schema for response_format: {problems}")
    except WireError as exc:
        return Reply({"error": {"message": str(exc), "type": "invalid_request_error"}},
                     exc.status)
    return None


def _check_messages(messages: Any) -> None:
    require(isinstance(messages, list) and messages, "'messages' must be a non-empty list")
    pending: list[str] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        require(role in ("system", "user", "assistant", "tool"), f"messages[{i}].role")
        if pending and role != "tool":
            raise WireError("An assistant message with 'tool_calls' must be followed by tool "
                            f"messages responding to each 'tool_call_id'. Missing: {pending}")
        if role == "tool":
            require(m.get("tool_call_id") in pending,
                    f"messages[{i}]: tool_call_id does not answer a preceding tool call")
            require(isinstance(m.get("content"), str), f"messages[{i}].content must be text")
            pending.remove(m["tool_call_id"])
        elif role == "assistant" and m.get("tool_calls"):
            for c in m["tool_calls"]:
                require(c.get("type") == "function" and isinstance(c.get("id"), str),
                        f"messages[{i}].tool_calls: id and type function required")
                require(isinstance(c["function"].get("arguments"), str),
                        f"messages[{i}]: arguments must be a JSON string")
                pending.append(c["id"])
        else:
            require(isinstance(m.get("content"), str), f"messages[{i}].content must be text")
    require(not pending, f"tool calls left unanswered: {pending}")


def server(*, azure: bool = False, deployment: str = "") -> FakeServer:
    sdk_types.preload("openai")
    return FakeServer(lambda req: validate(req, azure=azure, deployment=deployment))


# ------------------------------------------------------------------------------ replies
def completion(content: str | None = None, tool_calls: list[tuple[str, str, Any]] = (),
               *, finish: str | None = None, usage: dict[str, Any] | None = None,
               refusal: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function",
             "function": {"name": name, "arguments": args if isinstance(args, str)
                          else json.dumps(args)}}
            for cid, name, args in tool_calls]
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": finish or ("tool_calls" if tool_calls else "stop")}],
        "usage": usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
