"""``luma export``'s library function: the declarations a provider receives, from one place."""

from __future__ import annotations

import json

import pytest

from luma.models.base import ChatRequest
from luma.models.export import export_tool_declarations, tool_specs, visible_tools
from luma.models.http import ModelHttp
from luma.models.providers import make_provider
from luma.runtime.errors import LumaError
from luma.syntax.parse import parse_text
from providers import anthropic_fake, gemini_fake, openai_fake
from providers.harness import run, settings, user

PROGRAM = """
schema Ok { ok: bool }
schema Database { url: string }

tool zeta_lookup(id: string @desc("Record id")) -> Ok {
  description: "Look a record up."
  side_effects: "read"
  needs db: Database
}
tool alpha_write(id: string, value?: string) -> Ok {
  description: "Write a record."
  side_effects: "write"
  idempotent: true
  idempotency_key: id
}
tool billing(amount: float @range(0, 100)) -> Ok {
  description: "Charge."
  scope: "billing:write"
}
tool secret_thing(q: string) -> Ok {
  description: "Needs a credential."
  credential: "SECRET_THING_TOKEN"
}
tool mid_tags(tags: map[string]) -> Ok { description: "Tags." }

agent Reader {
  tools: [zeta_lookup, alpha_write, billing, secret_thing, mid_tags]
  tool_policy: "deny_write"
  tool_scopes: ["orders:read"]
}
agent Writer {
  tools: [alpha_write, zeta_lookup]
}
"""


def program():
    parsed, diagnostics = parse_text(PROGRAM, "export.luma")
    assert parsed is not None and not diagnostics, diagnostics
    return parsed


def names(declarations, provider):
    if provider in ("openai", "azure"):
        return [d["function"]["name"] for d in declarations]
    return [d["name"] for d in declarations]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_all_tools_sorted_by_name_and_needs_never_appear(provider):
    out = export_tool_declarations(program(), provider, None)
    assert names(out, provider) == ["alpha_write", "billing", "mid_tags", "secret_thing",
                                    "zeta_lookup"]
    text = json.dumps(out)
    assert '"db"' not in text and "Database" not in text and "x-luma" not in text


def test_agent_sees_only_its_visible_tools():
    p = program()
    reader = export_tool_declarations(p, "anthropic", "Reader", env={})
    # alpha_write: deny_write; billing: scope not granted; secret_thing: credential unset
    assert names(reader, "anthropic") == ["mid_tags", "zeta_lookup"]
    with_token = export_tool_declarations(p, "anthropic", "Reader",
                                          env={"SECRET_THING_TOKEN": "t"})
    assert names(with_token, "anthropic") == ["mid_tags", "secret_thing", "zeta_lookup"]
    writer = export_tool_declarations(p, "gemini", "Writer", env={})
    assert names(writer, "gemini") == ["alpha_write", "zeta_lookup"]
    assert [t.name for t in visible_tools(p, p.agents[1], {})] == ["alpha_write", "zeta_lookup"]


def test_openai_declarations_are_strict_where_the_schema_allows():
    out = {d["function"]["name"]: d["function"]
           for d in export_tool_declarations(program(), "openai")}
    assert out["zeta_lookup"] == {
        "name": "zeta_lookup", "description": "Look a record up.",
        "parameters": {"type": "object",
                       "properties": {"id": {"type": "string", "description": "Record id"}},
                       "required": ["id"], "additionalProperties": False},
        "strict": True}
    assert out["alpha_write"]["parameters"]["properties"]["value"]["type"] == ["string", "null"]
    assert "strict" not in out["mid_tags"]  # a map has no strict form
    assert out["mid_tags"]["parameters"]["properties"]["tags"]["additionalProperties"] == \
        {"type": "string"}
    assert export_tool_declarations(program(), "azure") == \
        export_tool_declarations(program(), "openai")


def test_gemini_and_anthropic_shapes():
    gemini = {d["name"]: d for d in export_tool_declarations(program(), "gemini")}
    assert gemini["billing"] == {"name": "billing", "description": "Charge.",
                                 "parametersJsonSchema": {"type": "object", "properties": {
                                     "amount": {"type": "number", "minimum": 0,
                                                "maximum": 100}},
                                     "required": ["amount"], "additionalProperties": False}}
    anthropic = {d["name"]: d for d in export_tool_declarations(program(), "anthropic")}
    assert anthropic["billing"]["input_schema"] == {
        "type": "object", "properties": {"amount": {"type": "number", "minimum": 0,
                                                    "maximum": 100}},
        "required": ["amount"], "additionalProperties": False}


@pytest.mark.parametrize("provider, fake, key_env, suffix, reply", [
    ("openai", openai_fake, "OPENAI_API_KEY", "/v1", openai_fake.completion("ok")),
    ("anthropic", anthropic_fake, "ANTHROPIC_API_KEY", "",
     anthropic_fake.message([anthropic_fake.text("ok")])),
    ("gemini", gemini_fake, "GEMINI_API_KEY", "", gemini_fake.response([gemini_fake.text("ok")])),
])
def test_export_is_exactly_what_the_adapter_sends(provider, fake, key_env, suffix, reply):
    p = program()
    reader = p.agents[0]
    specs = tuple(tool_specs(p, visible_tools(p, reader, {})))
    with fake.server() as server:
        server.reply(reply)
        s = settings(provider, server.base_url + suffix)

        async def go():
            http = ModelHttp()
            try:
                await make_provider(s, client=http, env={key_env: fake.KEY}).complete(
                    ChatRequest(s, (user("x"),), specs))
            finally:
                await http.aclose()

        run(go())
    body = server.requests[0].body
    sent = body["tools"][0]["functionDeclarations"] if provider == "gemini" else body["tools"]
    assert sent == export_tool_declarations(p, provider, "Reader", env={})


def test_unknown_agent_and_provider_are_reported():
    with pytest.raises(LumaError) as agent:
        export_tool_declarations(program(), "openai", "Nobody")
    assert agent.value.message == ("There is no agent named 'Nobody'. Agents in this program: "
                                   "Reader, Writer.")
    with pytest.raises(LumaError) as provider:
        export_tool_declarations(program(), "mistral")
    assert provider.value.message == ("Unknown provider 'mistral'; choose one of openai, azure, "
                                      "anthropic, gemini.")
