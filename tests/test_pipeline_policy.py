"""Pieces of the pipeline that work alone: the static policy checks the ask engine uses to pick
the tools a model may see, how a handler's signature decides what it receives, the
configuration the runtime reads, and the consistency rules it enforces again."""

from __future__ import annotations

import asyncio
import io

import pytest

from luma.runtime import policy
from luma.runtime.handlers import HandlerInvoker
from luma.runtime.settings import agent_settings, effective_timeout_ms, tool_settings
from luma.runtime.signal import Signal
from runtime.harness import call, call_error, fixture_program, program, runtime

PROG = fixture_program()
TOOLS = {t.name: t for t in PROG.tools}
AGENTS = {a.name: a for a in PROG.agents}
CREDENTIAL = {"DB_PASSWORD": "pw-123456"}


# policy without running anything ----------------------------------------------------------------


def refusal(tool, agent, env):
    err = policy.static_refusal(TOOLS[tool], AGENTS.get(agent), env)
    return None if err is None else (err.code, err.message)


def test_static_refusal_credential_first():
    assert refusal("db_write", "Unscoped", {}) == (
        "TOOL_PERMISSION_DENIED", "Tool 'db_write' is missing credential: DB_PASSWORD.")


def test_static_refusal_scope_and_deny_write():
    assert refusal("db_write", "Unscoped", CREDENTIAL) == (
        "TOOL_PERMISSION_DENIED", "Tool 'db_write' scope access was denied: db:write.")
    assert refusal("db_write", "ReadOnly", CREDENTIAL) == (
        "TOOL_PERMISSION_DENIED",
        "Tool 'db_write' is a write tool and agent 'ReadOnly' has tool_policy deny_write.")


def test_static_refusal_allows():
    assert refusal("db_write", "Writer", CREDENTIAL) is None
    assert refusal("db_write", "Free", CREDENTIAL) is None
    assert refusal("db_write", None, CREDENTIAL) is None
    assert refusal("calculate", "ReadOnly", {}) is None


def test_approval_refusal_without_prompting():
    tool, writer = TOOLS["db_write"], AGENTS["Writer"]
    err = policy.approval_refusal(tool, writer, {}, interactive=False)
    assert err is not None and err.message == (
        "Tool 'db_write' requires approval: it is not in LUMA_APPROVED_TOOLS.")
    assert policy.approval_refusal(tool, writer, {"LUMA_APPROVED_TOOLS": "db_write"},
                                   interactive=False) is None
    assert policy.approval_refusal(tool, writer, {}, interactive=True) is None  # asks later
    assert policy.approval_refusal(tool, AGENTS["Free"], {}, interactive=False) is None
    assert policy.approval_refusal(TOOLS["calculate"], writer, {}, interactive=False) is None


def test_offer_refusal_combines_both():
    writer = AGENTS["Writer"]
    assert policy.offer_refusal(TOOLS["db_write"], writer, {}, interactive=True).message == \
        "Tool 'db_write' is missing credential: DB_PASSWORD."
    assert policy.offer_refusal(TOOLS["db_write"], writer, CREDENTIAL,
                                interactive=False).message.endswith("LUMA_APPROVED_TOOLS.")
    assert policy.offer_refusal(TOOLS["calculate"], writer, {}, interactive=False) is None


def test_approved_tools_parsing():
    assert policy.approved_tools({"LUMA_APPROVED_TOOLS": " a, b ,,c "}) == {"a", "b", "c"}
    assert policy.approved_tools({}) == frozenset()


def test_ask_approval_prompt_text():
    err = io.StringIO()
    ok = policy.ask_approval(tool_settings(TOOLS["db_write"]), {"table": "t", "value": "hunter22"},
                             stdin=io.StringIO("yes\n"), stderr=err,
                             redact=lambda text: text.replace("hunter22", "[secret]"))
    assert ok is True
    assert err.getvalue() == ("Tool 'db_write' wants to run (side effects: write).\n"
                              '  input: {"table":"t","value":"[secret]"}\n'
                              "Approve this call? [y/N] ")


# settings read from the AST ---------------------------------------------------------------------


def test_tool_settings_defaults_and_values():
    calc = tool_settings(TOOLS["calculate"])
    assert (calc.side_effects, calc.cache, calc.retries, calc.retry_backoff, calc.retry_delay_ms,
            calc.timeout_ms, calc.idempotent, calc.idempotency_ttl_ms) == (
        "none", False, 0, "none", 100, None, False, 300000)
    write = tool_settings(TOOLS["db_write"])
    assert (write.side_effects, write.scope, write.credential) == ("write", "db:write",
                                                                  "DB_PASSWORD")
    assert tool_settings(TOOLS["typed_error"]).error_schema == "ToolError"


def test_agent_settings():
    writer = agent_settings(AGENTS["Writer"])
    assert (writer.tool_policy, writer.tool_scopes, writer.tool_contexts) == (
        "approval", ("db:write",), None)
    assert agent_settings(AGENTS["Narrow"]).tool_contexts == ()


def test_effective_timeout_rules():
    prog = program("""
schema R { ok: bool }
tool a(x: int) -> R { timeout: 300 }
tool b(x: int) -> R {}
agent Both { tools: [a, b], tool_timeout: 1000, tool_timeout_max: 200 }
agent Default { tools: [a, b], tool_timeout: 1000 }
agent None { tools: [a, b] }
""")
    tools = {t.name: tool_settings(t) for t in prog.tools}
    agents = {a.name: agent_settings(a) for a in prog.agents}
    assert effective_timeout_ms(tools["a"], agents["Both"]) == 200
    assert effective_timeout_ms(tools["b"], agents["Both"]) == 200
    assert effective_timeout_ms(tools["a"], agents["Default"]) == 300
    assert effective_timeout_ms(tools["b"], agents["Default"]) == 1000
    assert effective_timeout_ms(tools["a"], agents["None"]) == 300
    assert effective_timeout_ms(tools["b"], agents["None"]) is None
    assert effective_timeout_ms(tools["b"], None) is None


# the handler's signature ----------------------------------------------------------------------


def invoke(handler, needs=None):
    invoker = HandlerInvoker(handler, "t")
    return asyncio.run(invoker.run({"x": 1}, needs, None)), invoker


def test_input_only():
    result, invoker = invoke(lambda input: input)
    assert result == {"x": 1} and not invoker.wants_signal and not invoker.wants_needs


def test_all_three_by_position_with_other_names():
    def handler(data, sig, deps):
        return [data, isinstance(sig, Signal), deps]

    result, invoker = invoke(handler, {"db": 1})
    assert result == [{"x": 1}, True, {"db": 1}]
    assert invoker.wants_signal and invoker.wants_needs


def test_by_name_skipping_signal():
    def handler(input, needs):
        return [input, needs]

    assert invoke(handler, {"db": 1})[0] == [{"x": 1}, {"db": 1}]


def test_keyword_only_signal_on_an_async_handler():
    async def handler(input, *, signal):
        return [input, signal.aborted]

    result, invoker = invoke(handler)
    assert result == [{"x": 1}, False] and invoker.is_async


def test_star_args_and_kwargs():
    assert invoke(lambda *args: len(args))[0] == 3
    result, _ = invoke(lambda **kw: sorted(kw), {"db": 1})
    assert result == ["input", "needs", "signal"]


def test_callable_object_and_a_sync_function_returning_a_coroutine():
    class Handler:
        async def __call__(self, input, signal=None):
            return {"called": True}

    async def inner():
        return {"late": True}

    assert invoke(Handler())[0] == {"called": True}
    assert invoke(lambda input: inner())[0] == {"late": True}


def test_signature_is_read_once_per_tool():
    handler_calls = []

    def handler(input, signal=None, needs=None):
        handler_calls.append(signal)
        return {"result": 1.0}

    prog = program("schema R { result: float }\ntool t(x: int) -> R {}")
    rt = runtime(prog, {"t": handler})
    call(rt, "t", {"x": 1})
    invoker = rt.pipeline._tools["t"].invoker
    call(rt, "t", {"x": 2})
    assert rt.pipeline._tools["t"].invoker is invoker
    assert len(handler_calls) == 2 and all(isinstance(s, Signal) for s in handler_calls)
    assert handler_calls[0] is not handler_calls[1]  # a fresh Signal per call


# consistency rules enforced again -----------------------------------------------------------------


@pytest.mark.parametrize("body, message", [
    ('side_effects: "write", cache: true', "Write tool 't' cannot use cache."),
    ("idempotent: true", "Idempotent tool 't' must specify an idempotency_key."),
    ('side_effects: "write", retries: 2',
     "A write tool 't' must be idempotent and specify an idempotency_key to be retried."),
    ("timeout: 0", "Tool 't' timeout must be greater than zero."),
])
def test_runtime_refuses_inconsistent_tools(body, message):
    prog = program(f"schema R {{ ok: bool }}\ntool t(x: int) -> R {{ {body} }}")
    rt = runtime(prog, {"t": lambda input: {"ok": True}})
    err = call_error(rt, "t", {"x": 1})
    assert (err.code, err.message) == ("TOOL_CONFIG_INVALID", message)


def test_runtime_refuses_cache_with_needs():
    prog = program("""
schema R { ok: bool }
schema Db { url: string }
tool t(x: int) -> R {
  cache: true
  needs db: Db
}
""")
    rt = runtime(prog, {"t": lambda input: {"ok": True}})
    assert call_error(rt, "t", {"x": 1}).message == \
        "Cache cannot be used on a tool that uses needs: t"
