"""A fake Gemini generateContent server (v1beta)."""

from __future__ import annotations

import json
from typing import Any

from providers import sdk_types
from providers.server import Captured, FakeServer, Reply, WireError, require

KEY = "AIzaTest0123456789"
SCHEMA_KEYS = {"type", "format", "title", "description", "nullable", "enum", "maxItems",
               "minItems", "properties", "required", "minProperties", "maxProperties",
               "minLength", "maxLength", "pattern", "example", "anyOf", "propertyOrdering",
               "default", "items", "minimum", "maximum"}


JSON_SCHEMA_KEYS = {"$id", "$defs", "$ref", "$anchor", "type", "format", "title", "description",
                    "enum", "items", "prefixItems", "minItems", "maxItems", "minimum",
                    "maximum", "anyOf", "oneOf", "properties", "additionalProperties",
                    "required", "propertyOrdering"}


def schema_violations(schema: Any, path: str) -> list[str]:
    """What Gemini's Schema object (``responseSchema``, ``parameters``: the OpenAPI subset)
    would reject: unknown fields, an OBJECT without properties, a schema without a type."""
    if not isinstance(schema, dict):
        return [f"{path}: not an object"]
    problems = [f'Invalid JSON payload received. Unknown name "{k}" at \'{path}\''
                for k in schema if k not in SCHEMA_KEYS]
    if "anyOf" not in schema and "type" not in schema:
        problems.append(f"{path}: * GenerateContentRequest.{path}.type: must be specified")
    if schema.get("type") == "object" and not schema.get("properties"):
        problems.append(f"{path}.properties: should be non-empty for OBJECT type")
    if "format" in schema and schema["format"] not in ("date-time", "enum"):
        problems.append(f"{path}.format: unsupported format {schema['format']}")
    for name, sub in (schema.get("properties") or {}).items():
        problems += schema_violations(sub, f"{path}.properties[{name}]")
    if "items" in schema:
        problems += schema_violations(schema["items"], f"{path}.items")
    for i, sub in enumerate(schema.get("anyOf") or []):
        problems += schema_violations(sub, f"{path}.any_of[{i}]")
    return problems


def json_schema_violations(schema: Any, path: str) -> list[str]:
    """What Gemini's JSON-Schema fields (``responseJsonSchema``, ``parametersJsonSchema``) would
    reject, by the rules the API documents: only the supported keywords, a ``$ref`` alone in its
    node (beside other ``$`` keywords), enums of strings and numbers, and a recursive reference
    only inside a property that is not required."""
    if not isinstance(schema, dict):
        return [f"{path}: not an object"]
    defs = schema.get("$defs") if isinstance(schema.get("$defs"), dict) else {}
    problems: list[str] = []

    def walk(node: Any, at: str) -> None:
        if not isinstance(node, dict):
            problems.append(f"{at}: not a schema")
            return
        problems.extend(f"{at}: keyword '{k}' is not supported" for k in node
                        if k not in JSON_SCHEMA_KEYS)
        if "$ref" in node and any(not k.startswith("$") for k in node) and at != path:
            problems.append(f"{at}: a $ref may not have sibling keywords")
        for v in node.get("enum") or []:
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                problems.append(f"{at}.enum: only strings and numbers")
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                walk(node[key], f"{at}.{key}")
        for key in ("anyOf", "oneOf", "prefixItems"):
            for i, sub in enumerate(node.get(key) or []):
                walk(sub, f"{at}.{key}[{i}]")
        for key in ("properties", "$defs"):
            for name, sub in (node.get(key) or {}).items():
                walk(sub, f"{at}.{key}.{name}")

    walk(schema, path)

    def refs(node: Any) -> set[str]:
        text = json.dumps(node)
        return {name for name in defs if f'"#/$defs/{name}"' in text}

    def reaches(start: str, goal: str, seen: frozenset[str]) -> bool:
        return start == goal or (start not in seen and any(
            reaches(n, goal, seen | {start}) for n in refs(defs.get(start))))

    for name, d in defs.items():
        for field in d.get("required", []):
            sub = (d.get("properties") or {}).get(field)
            if any(reaches(r, name, frozenset()) for r in refs(sub)):
                problems.append(f"{path}.$defs.{name}.properties.{field}: a cyclic reference "
                                "may only be used within a property that is not required")
    return problems


def validate(req: Captured, model: str = "m-1") -> Reply | None:
    try:
        require(req.path == f"/v1beta/models/{model}:generateContent",
                f"unexpected path {req.path}", 404)
        require(req.headers.get("x-goog-api-key") == KEY,
                "API key not valid. Please pass a valid API key.", 400)
        require("key" not in req.query, "the key goes in the header here")
        body = req.body
        require(isinstance(body, dict), "body must be a JSON object")
        sdk = sdk_types.gemini_problems(body)
        require(not sdk, f"the request does not fit google-genai's types: {sdk}")
        declared = _check_tools(body)
        config = (body.get("toolConfig") or {}).get("functionCallingConfig")
        if config is not None:
            require(config.get("mode") in ("AUTO", "ANY", "NONE"), "functionCallingConfig.mode")
            allowed = config.get("allowedFunctionNames")
            if allowed is not None:
                require(config["mode"] == "ANY", "allowedFunctionNames needs mode ANY")
                require(set(allowed) <= declared, "allowedFunctionNames names an undeclared "
                                                  "function")
        generation = body.get("generationConfig") or {}
        require(not ("responseSchema" in generation and "responseJsonSchema" in generation),
                "responseSchema and responseJsonSchema are mutually exclusive")
        if "responseJsonSchema" in generation:
            require(generation.get("responseMimeType") == "application/json",
                    "responseJsonSchema needs responseMimeType application/json")
            problems = json_schema_violations(generation["responseJsonSchema"],
                                              "generation_config.response_json_schema")
            require(not problems, "\n".join(problems))
        if "responseSchema" in generation:
            require(generation.get("responseMimeType") == "application/json",
                    "responseSchema needs responseMimeType application/json")
            problems = schema_violations(generation["responseSchema"],
                                         "generation_config.response_schema")
            require(not problems, "\n".join(problems))
        if generation.get("responseMimeType") == "application/json":
            require(not declared, "Function calling with a response mime type: "
                                  "'application/json' is unsupported")
        system = body.get("systemInstruction")
        if system is not None:
            require(all(isinstance(p.get("text"), str) for p in system["parts"]),
                    "systemInstruction.parts")
        _check_contents(body.get("contents"))
    except WireError as exc:
        details = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID"}] if "API key" in str(exc) else []
        return Reply({"error": {"code": exc.status, "message": str(exc),
                                "status": "INVALID_ARGUMENT", "details": details}}, exc.status)
    return None


def _check_tools(body: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for tool in body.get("tools") or []:
        for i, d in enumerate(tool.get("functionDeclarations") or []):
            require(isinstance(d.get("name"), str), "functionDeclarations.name")
            require(not ("parameters" in d and "parametersJsonSchema" in d),
                    "parameters and parametersJsonSchema are mutually exclusive")
            if "parametersJsonSchema" in d:
                problems = json_schema_violations(
                    d["parametersJsonSchema"],
                    f"tools[0].function_declarations[{i}].parameters_json_schema")
                require(not problems, "\n".join(problems))
            if "parameters" in d:
                problems = schema_violations(
                    d["parameters"], f"tools[0].function_declarations[{i}].parameters")
                require(not problems, "\n".join(problems))
            names.add(d["name"])
    return names


def _check_contents(contents: Any) -> None:
    require(isinstance(contents, list) and contents, "contents is not specified")
    calls: list[str] = []
    for i, c in enumerate(contents):
        require(c.get("role") in ("user", "model"), f"contents[{i}].role")
        parts = c.get("parts")
        require(isinstance(parts, list) and parts, f"contents[{i}].parts must not be empty")
        if calls:
            responses = [p["functionResponse"]["name"] for p in parts if "functionResponse" in p]
            require(c["role"] == "user" and responses == calls,
                    "Please ensure that the number of function response parts is equal to the "
                    "number of function call parts of the function call turn.")
            calls = []
        for p in parts:
            kinds = [k for k in ("text", "functionCall", "functionResponse") if k in p]
            require(len(kinds) == 1, f"contents[{i}]: a part holds exactly one kind of data")
            if "functionCall" in p:
                require(c["role"] == "model", "functionCall only in model turns")
                require(isinstance(p["functionCall"].get("args", {}), dict), "args")
                calls.append(p["functionCall"]["name"])
            if "functionResponse" in p:
                r = p["functionResponse"]
                require(isinstance(r.get("name"), str) and r["name"], "functionResponse.name")
                require(isinstance(r.get("response"), dict), "functionResponse.response: "
                                                             "must be an object")
    require(not calls, "function calls left without responses")


def server(model: str = "m-1") -> FakeServer:
    sdk_types.preload("gemini")
    return FakeServer(lambda req: validate(req, model))


def response(parts: list[dict[str, Any]], finish: str = "STOP",
             usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": finish, "index": 0}],
            "usageMetadata": usage or {"promptTokenCount": 10, "candidatesTokenCount": 5,
                                       "totalTokenCount": 15},
            "modelVersion": "gemini-test"}


def call(name: str, args: dict[str, Any], cid: str | None = None,
         signature: str | None = None) -> dict[str, Any]:
    fc: dict[str, Any] = {"name": name, "args": args}
    if cid:
        fc["id"] = cid
    part: dict[str, Any] = {"functionCall": fc}
    if signature:
        part["thoughtSignature"] = signature
    return part


def text(t: str) -> dict[str, Any]:
    return {"text": t}


def dumps(value: Any) -> str:
    return json.dumps(value)
