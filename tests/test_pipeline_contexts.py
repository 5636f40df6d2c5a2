"""``needs`` resolution (step 7): contexts from the environment with every ``parse`` kind, the
agent's ``tool_contexts``, the schema check, and the secrets they hold."""

from __future__ import annotations

import asyncio
import json

import pytest

from luma.runtime.errors import LumaToolError
from luma.runtime.interpreter import Interpreter
from runtime.harness import call, call_error, context, program, runtime, tool_events

PROGRAM = """
schema Database {
  user: string
  port: int
  ratio: float
  debug: bool
  options: Options
}
schema Options { pool: int }
schema Result { ok: bool }
tool db_query(table: string) -> Result {
  side_effects: "read"
  needs db: Database
}
agent Open { tools: [db_query] }
agent Closed { tools: [db_query], tool_contexts: [] }
agent Listed { tools: [db_query], tool_contexts: ["db"] }
"""

CONFIG = {"tool_contexts": {"db": {
    "user": {"env": "DB_USER"},
    "password": {"env": "DB_PASSWORD"},
    "port": {"env": "DB_PORT", "parse": "integer"},
    "ratio": {"env": "DB_RATIO", "parse": "number"},
    "debug": {"env": "DB_DEBUG", "parse": "boolean"},
    "options": {"env": "DB_OPTIONS", "parse": "json"},
}}}

ENV = {"DB_USER": "app-user", "DB_PASSWORD": "s3cret-pass", "DB_PORT": "5432",
       "DB_RATIO": "0.5", "DB_DEBUG": "false", "DB_OPTIONS": '{"pool": 4, "token": "tok-xyz"}'}


def capture():
    seen: list[dict] = []

    def db_query(input, needs):
        seen.append(needs)
        return {"ok": True}

    return db_query, seen


def make(env=None, config=CONFIG):
    handler, seen = capture()
    rt = runtime(program(PROGRAM), {"db_query": handler}, env=ENV if env is None else env,
                 config=config)
    return rt, seen


def test_every_parse_kind():
    rt, seen = make()
    assert call(rt, "db_query", {"table": "t"}) == {"ok": True}
    assert seen == [{"db": {"user": "app-user", "password": "s3cret-pass", "port": 5432,
                            "ratio": 0.5, "debug": False,
                            "options": {"pool": 4, "token": "tok-xyz"}}}]
    assert type(seen[0]["db"]["port"]) is int


@pytest.mark.parametrize("name, text, parsed", [
    ("DB_PORT", "5432.0", 5432), ("DB_PORT", "-1", -1), ("DB_PORT", "1e3", 1000),
    ("DB_RATIO", "3", 3), ("DB_RATIO", "-2.5e-3", -0.0025),
    ("DB_DEBUG", "true", True),
])
def test_parse_kinds_accept(name, text, parsed):
    rt, seen = make({**ENV, name: text})
    call(rt, "db_query", {"table": "t"})
    field = {"DB_PORT": "port", "DB_RATIO": "ratio", "DB_DEBUG": "debug"}[name]
    assert seen[0]["db"][field] == parsed


@pytest.mark.parametrize("name, text, reason", [
    ("DB_PORT", "54.5", "field 'port' from DB_PORT is not a whole number."),
    ("DB_PORT", "abc", "field 'port' from DB_PORT is not a whole number."),
    ("DB_PORT", "true", "field 'port' from DB_PORT is not a whole number."),
    ("DB_RATIO", "NaN", "field 'ratio' from DB_RATIO is not a finite number."),
    ("DB_RATIO", "Infinity", "field 'ratio' from DB_RATIO is not a finite number."),
    ("DB_RATIO", "1_000", "field 'ratio' from DB_RATIO is not a finite number."),
    ("DB_DEBUG", "yes", 'field \'debug\' from DB_DEBUG must be "true" or "false".'),
    ("DB_DEBUG", "True", 'field \'debug\' from DB_DEBUG must be "true" or "false".'),
    ("DB_OPTIONS", "{pool: 4}", "field 'options' from DB_OPTIONS is not valid JSON."),
])
def test_parse_failures(name, text, reason):
    rt, seen = make({**ENV, name: text})
    err = call_error(rt, "db_query", {"table": "t"})
    assert (err.code, err.message) == ("TOOL_CONTEXT_INVALID",
                                       f"Tool 'db_query' cannot use context 'db': {reason}")
    assert text not in err.message or text in ("true",)
    assert seen == []


def test_unset_environment_variable():
    env = dict(ENV)
    del env["DB_PASSWORD"]
    rt, _ = make(env)
    err = call_error(rt, "db_query", {"table": "t"})
    assert err.message == ("Tool 'db_query' cannot use context 'db': field 'password': "
                           "environment variable DB_PASSWORD is not set.")


def test_empty_text_is_a_string_value():
    rt, seen = make({**ENV, "DB_USER": ""})
    call(rt, "db_query", {"table": "t"})
    assert seen[0]["db"]["user"] == ""


def test_context_not_configured():
    rt, _ = make(config={})
    err = call_error(rt, "db_query", {"table": "t"})
    assert err.message == ("Tool 'db_query' cannot use context 'db': it is not configured in "
                           "tool_contexts of the config file.")


def test_agent_tool_contexts_narrow_what_may_be_used():
    rt, seen = make()
    err = call_error(rt, "db_query", {"table": "t"}, context(rt, "Closed"))
    assert (err.code, err.message) == (
        "TOOL_CONTEXT_INVALID",
        "Tool 'db_query' cannot use context 'db': agent 'Closed' does not allow it in "
        "tool_contexts.")
    assert call(rt, "db_query", {"table": "t"}, context(rt, "Listed")) == {"ok": True}
    assert call(rt, "db_query", {"table": "t"}, context(rt, "Open")) == {"ok": True}
    assert len(seen) == 2


def test_schema_check_names_the_field_not_the_value():
    config = json.loads(json.dumps(CONFIG))
    config["tool_contexts"]["db"]["port"] = {"env": "DB_PORT"}  # a string now
    rt, _ = make(config=config)
    err = call_error(rt, "db_query", {"table": "t"})
    assert err.message == ("Tool 'db_query' cannot use context 'db': field 'port': expected int, "
                           "got string.")
    assert "5432" not in err.message


def test_schema_check_missing_declared_field_and_nested_problems():
    config = json.loads(json.dumps(CONFIG))
    del config["tool_contexts"]["db"]["user"]
    rt, _ = make({**ENV, "DB_OPTIONS": '{"pool": "many"}'}, config=config)
    err = call_error(rt, "db_query", {"table": "t"})
    assert err.message == ("Tool 'db_query' cannot use context 'db': field 'options.pool': "
                           "expected int, got string; missing required field 'user'.")


def test_rule_violations_do_not_show_the_value():
    prog = program("""
schema Creds { token: string @length(20, null) }
schema Result { ok: bool }
tool t(x: int) -> Result { needs creds: Creds }
""")
    rt = runtime(prog, {"t": lambda input, signal, needs: {"ok": True}},
                 env={"TOKEN": "short-secret"},
                 config={"tool_contexts": {"creds": {"token": {"env": "TOKEN"}}}})
    err = call_error(rt, "t", {"x": 1})
    assert err.message == ("Tool 't' cannot use context 'creds': field 'token' breaks its "
                           "@length rule.")


def test_context_failures_count_for_the_circuit():
    prog = program(PROGRAM.replace("agent Open { tools: [db_query] }",
                                   "agent Open { tools: [db_query], tool_failure_limit: 1 }"))
    handler, _ = capture()
    rt = runtime(prog, {"db_query": handler}, env={}, config=CONFIG)
    err = call_error(rt, "db_query", {"table": "t"}, context(rt, "Open"))
    assert err.code == "TOOL_CIRCUIT_OPEN"
    assert err.details["code"] == "TOOL_CONTEXT_INVALID"


# secrets ------------------------------------------------------------------------------------------

SECRET_PROGRAM = """
schema Database { user: string, port: int }
schema Result { ok: bool, echo: string @length(0, 5) }
tool db_write(table: string) -> Result {
  side_effects: "write"
  credential: "DB_TOKEN"
  needs db: Database
}
tool reveal(table: string) -> Result {
  credential: "DB_TOKEN"
  needs db: Database
  error: ToolError
}
schema ToolError { code: string, message: string, retryable: bool, details?: any }
agent Writer { tools: [db_write, reveal], tool_policy: "approval" }
"""

CREDENTIAL_VALUE = "cred-7f3a9c21-unique"
PASSWORD_VALUE = "pass-b81e44d0-unique"
JSON_SECRET = "inner-c0ffee-unique"


def test_secrets_never_reach_stderr_errors_events_or_the_trace(tmp_path):
    def db_write(input, signal, needs):
        return {"ok": True, "echo": input["table"]}

    def reveal(input, signal, needs):
        db = needs["db"]
        if input["table"] == "typed":
            raise LumaToolError(code="LEAK", message=f"bad password {db['password']}",
                                details={"extra": db["opts"]["key"]})
        if input["table"] == "plain":
            raise RuntimeError(f"cannot log in as {db['user']} with {db['password']} "
                               f"and {db['opts']['key']} using {CREDENTIAL_VALUE}")
        return {"ok": False, "echo": db["password"]}  # too long for echo: TOOL_OUTPUT_INVALID

    trace = tmp_path / "trace.jsonl"
    env = {"DB_TOKEN": CREDENTIAL_VALUE, "DB_USER": "app", "DB_PASSWORD": PASSWORD_VALUE,
           "DB_PORT": "5432", "DB_OPTS": json.dumps({"key": JSON_SECRET})}
    config = {"tool_contexts": {"db": {"user": {"env": "DB_USER"},
                                       "password": {"env": "DB_PASSWORD"},
                                       "port": {"env": "DB_PORT", "parse": "integer"},
                                       "opts": {"env": "DB_OPTS", "parse": "json"}}}}
    rt = runtime(program(SECRET_PROGRAM), {"db_write": db_write, "reveal": reveal}, env=env,
                 config=config, trace=str(trace))
    messages = []
    errors = []
    ctx = context(rt, "Writer")
    # refused at the approval step (non-interactive), then approved and run
    messages.append(call_error(rt, "db_write", {"table": "t"}, ctx).message)
    env_approved = {**env, "LUMA_APPROVED_TOOLS": "db_write"}
    rt.env = env_approved
    call(rt, "db_write", {"table": "t"}, ctx)
    for table in ("typed", "plain", "ok"):
        errors.append(call_error(rt, "reveal", {"table": table}, ctx))
    messages.extend(e.message for e in errors)
    assert [e.code for e in errors] == ["LEAK", "TOOL_FAILED", "TOOL_OUTPUT_INVALID"]
    # a context that fails its schema check after the secret was read
    rt.env = {**env_approved, "DB_PORT": "not-a-port"}
    messages.append(call_error(rt, "reveal", {"table": "t"}, ctx).message)
    # an interactive prompt shows the input but no secret, even when the input holds one
    rt.env = env
    rt.interactive = True
    import io
    rt.pipeline.stdin = io.StringIO("n\n")
    messages.append(call_error(rt, "db_write", {"table": PASSWORD_VALUE}, ctx).message)
    rt.telemetry.close()

    texts = {
        "stderr": rt.stderr.getvalue(),
        "messages": "\n".join(messages),
        "error values": json.dumps([e.to_value() for e in errors]),
        "events": json.dumps(rt.telemetry.events),
        "trace": trace.read_text(),
    }
    for where, text in texts.items():
        for secret in (CREDENTIAL_VALUE, PASSWORD_VALUE, JSON_SECRET):
            assert secret not in text, f"{secret} leaked into {where}"
    assert "[secret]" in texts["messages"]  # the handler's message was scrubbed, not dropped
    assert "Tool 'db_write' wants to run" in texts["stderr"]
    assert len(tool_events(rt)) == 7


def test_secrets_are_registered_with_telemetry(tmp_path):
    trace = tmp_path / "trace.jsonl"
    handler, _ = capture()
    rt = runtime(program(PROGRAM), {"db_query": handler}, env=ENV, config=CONFIG,
                 trace=str(trace))
    call(rt, "db_query", {"table": "t"})
    rt.telemetry.emit("probe", text=f"{ENV['DB_PASSWORD']} and tok-xyz and {ENV['DB_USER']}")
    rt.telemetry.close()
    probe = json.loads(trace.read_text().splitlines()[-1])
    assert probe["text"] == "[secret] and [secret] and [secret]"


def test_context_reaches_the_handler_through_the_interpreter():
    prog = program(PROGRAM + """
result = tool db_query({ table: "orders" })
""")
    handler, seen = capture()
    rt = runtime(prog, {"db_query": handler}, env=ENV, config=CONFIG)
    assert asyncio.run(Interpreter(rt).run_top_level()) == {"ok": True}
    assert seen[0]["db"]["port"] == 5432
