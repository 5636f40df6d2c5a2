"""The language features as plain functions of one analysed document: hover text, completion
candidates, code-action fixes. Offsets in, neutral data out; the server converts."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from luma.lsp.index import Analysis, Key
from luma.syntax import ast

KEYWORDS = ("schema", "tool", "model", "agent", "fn", "if", "else", "for", "in", "return", "try",
            "catch", "throw", "ask", "using", "tagged", "by", "needs", "enum", "map", "true",
            "false", "null", "and", "or", "not", "datasource", "query", "command", "test",
            "mock", "returns", "throws", "assert", "check")
TYPES = ("string", "int", "float", "bool", "any")

ANNOTATION_MEANINGS = {
    "desc": "`@desc(\"text\")` — a description: in the JSON Schema's `description`, the model's "
            "tool declaration and the generated types' doc comments.",
    "default": "`@default(value)` — filled in when the value is absent; makes the field optional.",
    "range": "`@range(min, max)` — inclusive bounds of an `int` or `float`; `null` for an open end.",
    "length": "`@length(min, max)` — inclusive bounds on a string's characters or a list's items; "
              "`null` for an open end.",
    "pattern": "`@pattern(\"regex\")` — the whole string must match.",
    "format": "`@format(\"email\")` — one of `email`, `uri`, `date`, `date-time`, `uuid`.",
    "example": "`@example(value)` — an example value, shown to models in the JSON Schema's "
               "`examples`.",
    "severity": "`@severity(\"soft\")` — this field's rules only warn on an output; `\"hard\"` is "
                "the default.",
}


KEY_MEANINGS = {
    "tool": {
        "description": "what the tool does and when not to use it: all a model has to choose by",
        "side_effects": "the side-effect class, `\"none\"`, `\"read\"` or `\"write\"`; "
                        "`tool_policy` builds on it",
        "cache": "keep the result for the same input, in process (not for a write tool)",
        "scope": "the permission label; must be in the agent's `tool_scopes`",
        "credential": "an environment variable; while it is unset the tool never runs",
        "error": "the schema that errors raised by the handler are validated against",
        "retries": "extra attempts, on retryable errors only",
        "retry_backoff": "the wait between attempts: `\"none\"`, `\"fixed\"` or "
                         "`\"exponential\"`",
        "retry_delay": "the base wait between attempts, in milliseconds",
        "timeout": "this tool's timeout in milliseconds; overrides the agent's `tool_timeout`",
        "idempotent": "run only once for the same `idempotency_key`",
        "idempotency_key": "the input field whose value identifies a call",
        "idempotency_ttl_ms": "how long an idempotency record stays valid, in milliseconds",
    },
    "model": {
        "provider": "who answers: `openai`, `azure`, `anthropic`, `gemini` or the offline `test`",
        "name": "the provider's model id (azure: the deployment name)",
    },
    "agent": {
        "model": "the model of this agent's `ask`s (default: the program's default model)",
        "system": "the system prompt of every `ask` of this agent",
        "tools": "the tools this agent may call directly and that its model is offered",
        "tool_policy": "`\"allow\"`, `\"deny_write\"` or `\"approval\"`",
        "tool_scopes": "the scopes granted; not given: no scope check",
        "tool_contexts": "the contexts the tools may use; not given: all",
        "tool_rate_limit": "native tool calls allowed in one `ask` flow",
        "tool_concurrency": "read-only native calls run at once in one provider turn",
        "tool_failure_limit": "tool failures in one method call before the circuit opens",
        "tool_timeout": "the default tool timeout, in milliseconds",
        "tool_timeout_max": "the cap on any tool timeout, in milliseconds",
        "tool_result_max_chars": "longer native tool results reach the model truncated",
        "retries": "`ask` retries when the model's final answer fails validation",
    },
}


def _choices(*values: str) -> tuple[str, ...]:
    return tuple(f'"{v}"' for v in values)


def config_keys(owner: str) -> dict[str, tuple[str, ...]]:
    """The keys of a ``tool``, ``model`` or ``agent`` block, each with its allowed values (empty
    when any value of its type will do)."""
    from luma.check.agents import AGENT_KEYS, TOOL_POLICIES
    from luma.check.models import MODEL_KEYS, PROVIDERS
    from luma.check.tools import RETRY_BACKOFFS, SIDE_EFFECTS, TOOL_KEYS

    bools = ("true", "false")
    if owner == "tool":
        values = {"side_effects": _choices(*SIDE_EFFECTS), "cache": bools,
                  "retry_backoff": _choices(*RETRY_BACKOFFS), "idempotent": bools}
        return {k: values.get(k, ()) for k in (*TOOL_KEYS, "needs")}
    if owner == "model":
        values = {"provider": _choices(*PROVIDERS), "strict": bools}
        return {k: values.get(k, ()) for k in MODEL_KEYS}
    if owner == "agent":
        values = {"tool_policy": _choices(*TOOL_POLICIES)}
        return {k: values.get(k, ()) for k in AGENT_KEYS}
    return {}


# ----------------------------------------------------------------------------------- hover

def hover(analysis: Analysis, offset: int) -> str | None:
    """Markdown describing what is under ``offset``."""
    text = analysis.source.text
    annotation = _annotation_at(text, offset)
    if annotation is not None:
        return ANNOTATION_MEANINGS.get(annotation)
    occ = analysis.at(offset)
    if occ is None:
        return _key_hover(text, offset)
    node = analysis.declarations.get(occ.key)
    if node is None:
        return None
    kind = occ.key[0]
    if kind == "schema":
        return _code(_source_of(analysis, node))
    if kind == "tool":
        return _tool_hover(analysis, node)
    if kind == "model":
        provider = _constant(node.entry("provider"))
        name = _constant(node.entry("name"))
        lines = [f"**model {node.name}**", "",
                 f"provider: `{provider or 'not given'}`"]
        if name:
            lines.append(f"model id: `{name}`")
        return "\n".join(lines)
    if kind == "datasource":
        return _code(_source_of(analysis, node))
    if kind == "agent":
        fns = ", ".join(f"`{f.name}`" for f in node.fns) or "none"
        return f"**agent {node.name}**\n\nfunctions: {fns}"
    if kind == "fn":
        return _code(_signature_of(analysis, node))
    if kind == "field":
        return _code(_source_of(analysis, node))
    if kind == "var":
        if isinstance(node, ast.Field):
            return _code(_source_of(analysis, node)) + "\n\nparameter"
        if isinstance(node, ast.Assign) and node.type is not None:
            return _code(f"{node.target}: {_source_of(analysis, node.type)}")
        return _code(occ.key[2]) + "\n\nlocal variable"
    return None


def _key_hover(text: str, offset: int) -> str | None:
    """The meaning of the configuration key under ``offset`` in a tool, model or agent."""
    start = offset
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\s*:", text[start:])
    if m is None or offset > start + len(m.group(1)):
        return None
    owner = _enclosing_owner(text[:start])
    meaning = KEY_MEANINGS.get(owner or "", {}).get(m.group(1))
    return f"`{m.group(1)}` ({owner}): {meaning}" if meaning else None


def _tool_hover(analysis: Analysis, tool: ast.ToolDecl) -> str:
    from luma.models.export import tool_specs

    lines = [_code(_signature_of(analysis, tool)), ""]
    description = _constant(tool.entry("description"))
    if description:
        lines += [description, ""]
    side_effects = _constant(tool.entry("side_effects")) or "none"
    lines.append(f"- side effects: `{side_effects}`")
    lines.append(f"- cache: `{_constant(tool.entry('cache')) or 'false'}`")
    idempotent = _constant(tool.entry("idempotent")) == "true"
    key = _constant(tool.entry("idempotency_key"))
    lines.append(f"- idempotent: `{'true' if idempotent else 'false'}`"
                 + (f", key `{key}`" if key else ""))
    for name in ("retries", "timeout", "scope", "credential", "error"):
        value = _constant(tool.entry(name))
        if value:
            lines.append(f"- {name}: `{value}`")
    for needs in tool.needs:
        lines.append(f"- needs `{needs.name}`")
    try:
        spec = tool_specs(analysis.program, [tool])[0]  # type: ignore[arg-type]
        schema = json.dumps(spec.parameters, indent=2, ensure_ascii=False)
        lines += ["", "The JSON Schema a model sees:", "```json", schema, "```"]
    except Exception:  # a contract the checker refuses has no schema to show
        pass
    return "\n".join(lines)


def _annotation_at(text: str, offset: int) -> str | None:
    start = offset
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    end = offset
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    if start > 0 and text[start - 1] == "@" and end > start:
        return text[start:end]
    return None


def _constant(entry: ast.ConfigEntry | None) -> str | None:
    if entry is None:
        return None
    v = entry.value
    if isinstance(v, ast.StringLit):
        return v.value
    if isinstance(v, ast.Literal):
        return json.dumps(v.value)
    if isinstance(v, ast.Name):
        return v.id
    return None


def _source_of(analysis: Analysis, node: Any) -> str:
    return analysis.source.text[node.span.start:node.span.end]


def _signature_of(analysis: Analysis, node: ast.ToolDecl | ast.FnDecl) -> str:
    text = _source_of(analysis, node)
    brace = text.find("{", text.find(")"))
    return " ".join(text[:brace].split()) if brace > 0 else text


def _code(text: str) -> str:
    return f"```luma\n{text}\n```"


# ------------------------------------------------------------------------------ completion

@dataclass(frozen=True, slots=True)
class Candidate:
    label: str
    kind: str  # keyword, type, schema, tool, model, agent, key, value, annotation
    detail: str = ""
    insert: str | None = None


def complete(analysis: Analysis, program: ast.Program | None, offset: int) -> list[Candidate]:
    """What may be written at ``offset``. ``program`` is the last version that parsed (the
    document being typed often does not)."""
    text = analysis.source.text
    before = text[:offset]
    line = before[before.rfind("\n") + 1:]
    names = _declared(program)
    if re.search(r"@[A-Za-z_]*$", line):
        return [Candidate(n, "annotation", ANNOTATION_MEANINGS[n]) for n in ANNOTATION_MEANINGS]
    if re.search(r"\btool\s+[A-Za-z_]*$", line):
        return [Candidate(n, "tool") for n in names["tool"]]
    owner = _enclosing_owner(before)
    key_match = re.match(r"^\s*([A-Za-z_]+)\s*:\s*(.*)$", line)
    if owner in ("tool", "model", "agent") and key_match is not None:
        key, value = key_match.group(1), key_match.group(2)
        if owner == "agent" and key == "tools":
            return [Candidate(n, "tool") for n in names["tool"]]
        if owner == "agent" and key == "model":
            return [Candidate(n, "model") for n in names["model"]]
        if owner == "tool" and key == "error":
            return [Candidate(n, "schema") for n in names["schema"]]
        allowed = config_keys(owner).get(key)
        if allowed and not value.endswith((" ", ",")):
            return [Candidate(v, "value", f"{key} of a {owner}") for v in allowed]
        if owner == "tool" and key not in config_keys("tool"):
            return _types(names)  # a parameter of the tool's signature
    if owner != "object" and (re.search(r"(->|:)\s*[A-Za-z_]*$", line)
                              or re.search(r"\bmap\s*\[\s*[A-Za-z_]*$", line)):
        return _types(names)
    if owner in ("tool", "model", "agent") and re.match(r"^\s*[A-Za-z_]*$", line):
        keys = [Candidate(k, "key", f"a key of a {owner}", f"{k}: ")
                for k in config_keys(owner)]
        if owner == "agent":
            keys.append(Candidate("fn", "keyword"))
        return keys
    words = [Candidate(k, "keyword") for k in KEYWORDS]
    callable_names = [Candidate(n, "agent") for n in names["agent"]]
    return words + callable_names


def _types(names: dict[str, list[str]]) -> list[Candidate]:
    return ([Candidate(t, "type") for t in TYPES] + [Candidate("enum", "keyword", insert="enum[")]
            + [Candidate("map", "keyword", insert="map[")]
            + [Candidate(n, "schema") for n in names["schema"]])


def _declared(program: ast.Program | None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"schema": [], "tool": [], "model": [], "agent": []}
    if program is None:
        return out
    out["schema"] = sorted({d.name for d in program.schemas})
    out["tool"] = sorted({d.name for d in program.tools})
    out["model"] = sorted({d.name for d in program.models})
    out["agent"] = sorted({d.name for d in program.agents})
    return out


_OWNER = re.compile(r"\b(schema|tool|model|agent|fn|if|else|for|try|catch)\b")


def _enclosing_owner(before: str) -> str | None:
    """The keyword that owns the innermost ``{`` or ``(`` open at the end of ``before``:
    ``tool`` for a tool's body (and ``tool`` for its parameter list), ``object`` for an object
    literal, None at the top level."""
    from luma.syntax.format import tokenize

    stack: list[tuple[str, list[str]]] = []  # (owner + bracket, the entry it is part of)
    entry: list[str] = []
    for item in tokenize(before):
        if item.is_comment or item.kind in ("STRING", "LONG_STRING"):
            entry.append("x")
            continue
        t = item.text
        if item.nl and not (stack and stack[-1][0].endswith("(")):
            entry = []
        if t in ("{", "("):
            owner = next((w for w in entry if _OWNER.fullmatch(w)), None)
            if t == "{" and (not entry or entry[-1] in ("=", ":", ",", "(", "[")):
                owner = "object"
            if t == "(" and not (owner in ("tool", "fn") and len(entry) == 2):
                owner = "call"
            stack.append((f"{owner}{t}", entry + [t]))
            entry = []
        elif t in ("}", ")"):
            entry = stack.pop()[1] + [t] if stack else []
            if t == "}":
                entry = []
        elif t == ",":
            entry = [] if not stack or stack[-1][0].endswith("{") else entry
        else:
            entry.append(t)
    if not stack:
        return None
    top = stack[-1][0]
    return None if top.startswith("None") else top[:-1]


# ------------------------------------------------------------------------------ code actions

_DID_YOU_MEAN = re.compile(r"did you mean '([^']+)'\?")


def fix_of(hint: str | None) -> str | None:
    """The replacement a did-you-mean hint proposes, or None."""
    if not hint:
        return None
    m = _DID_YOU_MEAN.search(hint)
    return m.group(1) if m else None


def rename_target(analysis: Analysis, offset: int) -> Key | None:
    """What a rename at ``offset`` renames: a declaration, a parameter or a variable, whose every
    use the index knows. Not a schema's field: it is also read through values (``order.id``)
    and written in object literals, which are not resolved to it."""
    occ = analysis.at(offset)
    if occ is None or occ.key not in analysis.definitions or occ.key[0] == "field":
        return None
    return occ.key
