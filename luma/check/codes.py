"""Every diagnostic code the checker emits, with a one-line title (shown in docs and SARIF)."""

from __future__ import annotations

CODES: dict[str, str] = {
    # syntax
    "E001": "syntax error",
    "E002": "invalid interpolation placeholder",
    # names and declarations
    "E003": "reserved keyword used as a name",
    "E004": "duplicate declaration",
    "E005": "duplicate field, parameter or needs",
    "E006": "duplicate configuration key",
    "E007": "unknown type",
    "E008": "unknown configuration key",
    "E009": "invalid configuration value",
    # tool consistency (LANGUAGE.md §4)
    "E010": "idempotent tool without an idempotency_key",
    "E011": "retried write tool that is not idempotent",
    "E012": "cached write tool",
    "E013": "tool timeout not greater than zero",
    "E014": "cached tool that uses needs",
    "E015": "idempotency key is not an input field",
    "E016": "tool return type is not a declared schema",
    # tagged unions
    "E017": "tagged-union member is not a declared object schema",
    "E018": "tagged-union member declares the tag field",
    "E019": "duplicate tagged-union member",
    # annotations
    "E020": "unknown annotation",
    "E021": "annotation does not fit the type",
    "E022": "invalid bounds",
    "E023": "@default or @example is not a valid value of the type",
    "E024": "invalid regular expression",
    "E025": "invalid annotation arguments",
    # references
    "E026": "unknown tool",
    "E027": "unknown model",
    "E028": "unknown agent",
    "E029": "unknown context",
    # agents, calls and bodies
    "E030": "direct call of a tool the agent does not allow",
    "E031": "using tool that the agent does not allow",
    "E032": "unknown key in a tool call's argument",
    "E033": "missing required parameter",
    "E034": "argument of the wrong type",
    "E035": "unknown field",
    "E036": "unknown function",
    "E037": "wrong number of arguments",
    "E038": "unknown name",
    "E039": "invalid statement or expression",
    # host tool modules (checked when tool modules are given)
    "E040": "tool without a registered handler",
    "E041": "tool module that cannot be loaded",
    "E042": "invalid luma.config.json",
    # more declaration checks
    "E043": "invalid enum type",
    "E044": "annotation given more than once",
    "E045": "schema with no finite value",
    "E046": "needs context the config cannot provide",
    # limits (luma/limits.py)
    "E047": "nesting too deep",
    "E048": "number literal out of range",
    "E049": "pattern that can take exponential time",
    # datasources, queries and commands (DATA.md §5)
    "E050": "unknown datasource",
    "E051": "query or command without datasource or sql",
    "E052": "SQL placeholder that is not a parameter",
    "E053": "side_effects or needs in a query or command",
    "E054": "query or command rows that are not a schema or a list of one",
    "E055": "more than one SQL statement",
    "E056": "datasources config entry for an undeclared datasource",
    # MCP servers behind contracts (checked when the config names them)
    "E057": "tool contract that disagrees with its MCP server",
    # warnings
    "W001": "tool offered to a model without a description",
    "W002": "variable may be unassigned",
    "W003": "unused declaration",
    "W004": "ask uses the default model",
    "W005": "unreachable or suspicious code",
    "W006": "ask uses a type the model's provider cannot express",
    "W007": "query or command parameter that its SQL never uses",
}
