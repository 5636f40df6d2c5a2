"""The Python API (docs/python.md): loading, running, typed outputs, errors, options, events,
cancellation, threads and closing."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
import pytest
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

import luma

HERE = Path(__file__).parent / "api"
TRIAGE = HERE / "triage.luma"
TOOLS = HERE / "triage_tools.py"


def _handlers(**overrides: Any) -> dict[str, Any]:
    handlers: dict[str, Any] = {
        "count_words": lambda input: {"words": len(input["text"].split())},
        "open_ticket": lambda input: {"id": "T-" + input["request_id"], "team": input["team"]},
        "lookup": lambda input: {"id": "T-0", "team": input["team"]},
    }
    handlers.update(overrides)
    return handlers


def _load(**options: Any) -> luma.Program:
    options.setdefault("stderr", io.StringIO())
    options.setdefault("tools", _handlers())
    return luma.load(TRIAGE, **options)


# ------------------------------------------------------------------------------------ loading

def test_load_with_a_tool_module_runs_an_agent() -> None:
    with luma.load(TRIAGE, tool_modules=[TOOLS], stderr=io.StringIO()) as program:
        assert program.run_sync("Triage", text="one two three") == {"team": "support",
                                                                    "words": 3}
        assert program.agents["Triage"] == ["run", "summarize", "check", "bad"]


def test_loads_takes_the_source_and_handlers_as_callables() -> None:
    source = TRIAGE.read_text(encoding="utf-8")
    program = luma.loads(source, path=str(HERE / "inline.luma"), tools=_handlers(),
                         stderr=io.StringIO())
    try:
        assert asyncio.run(program.call("Triage", "summarize", text="a b")) == "2 words"
    finally:
        program.close()


def test_a_program_that_does_not_compile_raises_compile_error_with_located_diagnostics() -> None:
    with pytest.raises(luma.CompileError) as caught:
        luma.loads("schema A {\n  x: strin\n}\n", path="broken.luma")
    error = caught.value
    (diagnostic,) = [d for d in error.diagnostics if d.severity == "error"]
    assert (diagnostic.file, diagnostic.line, diagnostic.column) == ("broken.luma", 2, 6)
    assert diagnostic.code.startswith("E")
    assert "strin" in diagnostic.message
    assert "broken.luma:2:6" in diagnostic.rendered
    assert diagnostic.rendered in error.rendered
    assert str(error).startswith("broken.luma did not compile (1 error):\nbroken.luma:2:6: error[")
    assert isinstance(error, luma.LoadError)


def test_a_tool_without_a_handler_stops_the_load() -> None:
    handlers = _handlers()
    del handlers["lookup"]
    with pytest.raises(luma.LoadError) as caught:
        luma.load(TRIAGE, tools=handlers)
    assert caught.value.problems == ["'lookup' is not registered in the tool registry."]


def test_handlers_given_as_callables_are_checked_at_load() -> None:
    with pytest.raises(luma.LoadError) as caught:
        luma.load(TRIAGE, tools=_handlers(lookup="not a function", count_word=len))
    assert caught.value.problems == [
        "tools['lookup'] is not callable (it is a str)",
        "tools['count_word']: the program declares no tool 'count_word'; did you mean "
        "'count_words'?"]


def test_a_handler_both_in_a_module_and_in_tools_is_a_conflict() -> None:
    with pytest.raises(luma.LoadError) as caught:
        luma.load(TRIAGE, tool_modules=[TOOLS], tools={"lookup": lambda input: input})
    (problem,) = caught.value.problems
    assert problem.startswith("Tool registry conflict: lookup (a handler in ")
    assert problem.endswith("triage_tools.py and in tools=)")


def test_a_bad_config_stops_the_load_with_its_messages() -> None:
    with pytest.raises(luma.LoadError) as caught:
        luma.load(TRIAGE, tools=_handlers(), config={"tool_modules": 3})
    assert caught.value.problems[0].startswith("<config>: tool_modules")


def test_a_missing_program_file_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(luma.LoadError) as caught:
        luma.load(tmp_path / "nope.luma")
    assert caught.value.problems == [f"cannot read {tmp_path / 'nope.luma'}: "
                                     "No such file or directory"]


# ------------------------------------------------------------------------------ typed outputs

class AnswerModel(pydantic.BaseModel):
    team: str
    words: int


class AnswerDict(TypedDict):
    team: str
    words: int


@dataclass
class AnswerData:
    team: str
    words: int


@pytest.mark.parametrize("output_type", [AnswerModel, AnswerDict, AnswerData])
def test_output_type_converts_the_result(output_type: Any) -> None:
    with _load() as program:
        answer = program.run_sync("Triage", text="a b c", output_type=output_type)
    if output_type is AnswerDict:
        assert answer == {"team": "support", "words": 3}
    else:
        assert isinstance(answer, output_type)
        assert (answer.team, answer.words) == ("support", 3)


def test_a_result_that_does_not_fit_output_type_is_a_run_error() -> None:
    class Other(pydantic.BaseModel):
        priority: int

    with _load() as program, pytest.raises(luma.RunError) as caught:
        program.run_sync("Triage", text="a", output_type=Other)
    assert caught.value.code == "OUTPUT_TYPE_INVALID"
    assert caught.value.message == ("The result of Triage.run does not fit Other: "
                                    "priority: Field required")


# ------------------------------------------------------------------------------------- errors

def test_a_run_error_carries_code_message_tool_details_and_location() -> None:
    def fails(input: Any) -> Any:
        raise luma.LumaToolError("NOT_FOUND", "no such team", retryable=True,
                                 details={"team": input["team"]})

    with _load(tools=_handlers(lookup=fails), env={"TRIAGE_TOKEN": "tok-123456"}) as program:
        with pytest.raises(luma.RunError) as caught:
            program.call_sync("Triage", "check", team="red")
    error = caught.value
    assert (error.code, error.message, error.retryable, error.tool, error.details) == (
        "NOT_FOUND", "no such team", True, "lookup", {"team": "red"})
    assert error.location == luma.Location(str(TRIAGE), 51, 5,
                                           "return tool lookup({ team: team })")


def test_a_handler_that_raises_is_tool_failed() -> None:
    def boom(input: Any) -> Any:
        raise ValueError("database is down")

    with _load(tools=_handlers(count_words=boom)) as program:
        with pytest.raises(luma.RunError) as caught:
            program.run_sync("Triage", text="x")
    assert caught.value.code == "TOOL_FAILED"
    assert caught.value.message == "Tool 'count_words' failed: database is down"
    assert caught.value.location is not None and caught.value.location.line == 40


def test_run_error_catches_luma_errors_only() -> None:
    with _load() as program:
        with pytest.raises(luma.RunError) as caught:
            program.run_sync("Triage", text=3)
        assert caught.value.code == "ARGUMENT_INVALID"
        assert caught.value.message.startswith("Triage.run.input.text: ")
        assert caught.value.location is None
        with pytest.raises(luma.RunError) as unknown:
            program.run_sync("Triag", text="x")
        assert (unknown.value.code, unknown.value.message) == (
            "AGENT_NOT_FOUND", "Unknown agent 'Triag'; did you mean 'Triage'?.")
        with pytest.raises(luma.RunError) as no_fn:
            program.call_sync("Triage", "sumarize", text="x")
        assert no_fn.value.message == ("Agent 'Triage' has no method 'sumarize' (its methods: "
                                       "run, summarize, check, bad).")
        # a mistake in the caller's own code is not a Luma error, and stops the run first
        with pytest.raises(TypeError, match=r"^output_type <object object at .*> is not a "
                           "type pydantic can validate: Unable to generate"):
            program.run_sync("Triage", text="x", output_type=object())


def test_a_return_value_that_breaks_the_declared_type_is_return_invalid() -> None:
    with _load() as program, pytest.raises(luma.RunError) as caught:
        program.call_sync("Triage", "bad", text="a")
    assert caught.value.code == "RETURN_INVALID"
    assert caught.value.location is not None
    assert caught.value.location.text == "return { team: 7, words: stats.words }"


# -------------------------------------------------------------------------------- env, approve

def test_env_replaces_the_process_environment_for_credentials(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIAGE_TOKEN", "process-token")
    seen: list[Any] = []

    def lookup(input: Any) -> Any:
        seen.append(input)
        return {"id": "T-1", "team": input["team"]}

    with _load(tools=_handlers(lookup=lookup), env={}) as program:
        with pytest.raises(luma.RunError) as caught:
            program.call_sync("Triage", "check", team="a")
        assert caught.value.message == "Tool 'lookup' is missing credential: TRIAGE_TOKEN."
        assert seen == []
        # one run with its own environment (a tenant's secrets)
        assert program.call_sync("Triage", "check", team="b",
                                 env={"TRIAGE_TOKEN": "tenant-token"})["team"] == "b"


def test_approve_decides_approval_calls() -> None:
    asked: list[tuple[str, Any]] = []

    def approve(tool: str, input: Any) -> bool:
        asked.append((tool, input))
        return input["request_id"] == "yes"

    with _load(approve=approve, env={}) as program:
        assert program.run_sync("Careful", request_id="yes") == {"id": "T-yes", "team": "ops"}
        with pytest.raises(luma.RunError) as caught:
            program.run_sync("Careful", request_id="no")
    assert caught.value.message == "Tool 'open_ticket' was not approved."
    assert asked == [("open_ticket", {"request_id": "yes", "team": "ops"}),
                     ("open_ticket", {"request_id": "no", "team": "ops"})]


def test_approve_may_be_async_and_replaces_the_approved_list() -> None:
    async def approve(tool: str, input: Any) -> bool:
        await asyncio.sleep(0)
        return False

    with _load(approve=approve, env={"LUMA_APPROVED_TOOLS": "open_ticket"}) as program:
        with pytest.raises(luma.RunError) as caught:
            program.run_sync("Careful", request_id="x")
    assert caught.value.message == "Tool 'open_ticket' was not approved."


def test_an_approval_callback_that_raises_approves_nothing() -> None:
    def approve(tool: str, input: Any) -> bool:
        raise KeyError("who")

    with _load(approve=approve) as program, pytest.raises(luma.RunError) as caught:
        program.run_sync("Careful", request_id="x")
    assert caught.value.message == ("Tool 'open_ticket' was not approved: the approval "
                                    "callback raised KeyError: 'who'")


def test_without_approve_a_run_that_cannot_prompt_uses_the_approved_list() -> None:
    with _load(env={}) as program, pytest.raises(luma.RunError) as caught:
        program.run_sync("Careful", request_id="x")
    assert caught.value.message == ("Tool 'open_ticket' requires approval: it is not in "
                                    "LUMA_APPROVED_TOOLS.")
    with _load(env={"LUMA_APPROVED_TOOLS": "open_ticket"}) as program:
        assert program.run_sync("Careful", request_id="x")["id"] == "T-x"


# ------------------------------------------------------------------------------------- events

def test_on_event_receives_the_trace_events_as_they_happen_with_secrets_redacted() -> None:
    secret = "s3cr3t-token-value"
    events: list[dict[str, Any]] = []
    order: list[str] = []

    def lookup(input: Any) -> Any:
        order.append(f"handler, {len(events)} events before")
        return {"id": secret, "team": input["team"]}

    def seen(event: dict[str, Any]) -> None:
        events.append(event)

    with _load(tools=_handlers(lookup=lookup), env={"TRIAGE_TOKEN": secret}) as program:
        result = program.call_sync("Triage", "check", team="t", on_event=seen)
    assert result["id"] == secret  # the caller's own result is not redacted
    assert [e["event"] for e in events] == ["agent.call", "tool.call"]
    assert order == ["handler, 1 events before"]
    call = events[1]
    assert (call["tool"], call["outcome"], call["mode"]) == ("lookup", "ok", "direct")
    assert isinstance(call["duration_ms"], float)
    assert secret not in json.dumps(events)


def test_an_async_on_event_is_awaited_before_the_run_returns() -> None:
    events: list[str] = []

    async def seen(event: dict[str, Any]) -> None:
        await asyncio.sleep(0.01)
        events.append(event["event"])

    async def main() -> Any:
        async with _load() as program:
            result = await program.run("Triage", text="a b", on_event=seen)
            return result, list(events)

    result, during = asyncio.run(main())
    assert result["words"] == 2
    assert during == ["agent.call", "tool.call", "tool.call"]


def test_an_on_event_callback_that_raises_is_reported_once_and_the_run_goes_on() -> None:
    calls: list[str] = []

    def seen(event: dict[str, Any]) -> None:
        calls.append(event["event"])
        raise RuntimeError("ui gone")

    stderr = io.StringIO()
    with _load(stderr=stderr) as program:
        assert program.run_sync("Triage", text="a", on_event=seen)["words"] == 1
    assert calls == ["agent.call"]
    assert stderr.getvalue() == ("warning[EVENT_CALLBACK] the on_event callback raised "
                                 "RuntimeError: ui gone; it gets no more events of this run\n")


def test_a_trace_collects_the_events_of_every_run(tmp_path: Path) -> None:
    trace = tmp_path / "runs.jsonl"
    with _load(trace=trace) as program:
        program.run_sync("Triage", text="a")
        program.run_sync("Triage", text="a b")
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [e["event"] for e in events] == ["agent.call", "tool.start", "tool.call",
                                            "tool.start", "tool.call"] * 2
    assert [e["cache"] for e in events if e["event"] == "tool.call"
            and e["tool"] == "count_words"] == ["miss", "miss"]


def test_a_trace_that_would_replace_a_file_luma_did_not_write_stops_the_load(
        tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    with pytest.raises(luma.LoadError) as caught:
        _load(trace=notes)
    assert "notes.txt" in caught.value.problems[0]
    assert notes.read_text() == "mine\n"


# ----------------------------------------------------------------------- cancellation, threads

def test_cancelling_the_awaiting_task_fires_the_signal_and_stores_nothing() -> None:
    started = asyncio.Event()
    signals: list[luma.Signal] = []
    ran: list[str] = []

    async def open_ticket(input: Any, signal: luma.Signal) -> Any:
        ran.append(input["request_id"])
        signals.append(signal)
        started.set()
        await asyncio.sleep(30)
        return {"id": "never", "team": input["team"]}

    async def cancel_one(program: luma.Program) -> None:
        started.clear()
        task = asyncio.create_task(program.run("Triage", text="a", request_id="k"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def main() -> None:
        async with _load(tools=_handlers(open_ticket=open_ticket)) as program:
            await cancel_one(program)
            assert (signals[0].aborted, signals[0].reason) == (True, "cancelled")
            # the idempotency store kept nothing: the same key runs the handler again
            await cancel_one(program)

    asyncio.run(main())
    assert ran == ["k", "k"]
    assert [s.reason for s in signals] == ["cancelled", "cancelled"]


def test_run_sync_from_a_thread_pool_shares_the_idempotency_store() -> None:
    calls: list[str] = []
    lock = threading.Lock()

    def open_ticket(input: Any) -> Any:
        with lock:
            calls.append(input["request_id"])
        return {"id": "T-" + input["request_id"], "team": input["team"]}

    with _load(tools=_handlers(open_ticket=open_ticket)) as program:
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(
                lambda i: program.run_sync("Triage", text="w " * i, request_id=f"r{i % 4}"),
                range(32)))
    assert [r["words"] for r in results] == list(range(32))
    assert sorted(calls) == ["r0", "r1", "r2", "r3"]


def test_run_sync_inside_an_event_loop_says_what_to_use() -> None:
    program = _load()

    async def main() -> None:
        program.run_sync("Triage", text="a")

    with pytest.raises(RuntimeError, match=r"use 'await program.run\(...\)' there"):
        asyncio.run(main())

    async def close() -> None:
        program.close()

    with pytest.raises(RuntimeError, match=r"use 'await program.aclose\(\)' there"):
        asyncio.run(close())
    program.close()


def test_a_closed_program_does_not_run() -> None:
    program = _load()
    program.close()
    program.close()  # closing twice is harmless
    with pytest.raises(RuntimeError, match="is closed"):
        program.run_sync("Triage", text="a")


def test_run_top_level(tmp_path: Path) -> None:
    source = 'schema N { n: int }\ntool one() -> N { description: "one" }\n' \
             'x = tool one({})\nx.n + 1\n'
    with luma.loads(source, tools={"one": lambda: {"n": 41}}) as program:
        assert asyncio.run(program.run_top_level()) == 42
        assert program.run_top_level_sync(output_type=int) == 42


def test_runs_of_a_loaded_program_compile_import_and_build_nothing_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import luma.compile
    from luma.schema.validate import SchemaValidator

    with _load(tools=_handlers(), env={"TRIAGE_TOKEN": "t0k3n-value"}) as program:
        program.run_sync("Triage", text="a b")
        program.call_sync("Triage", "check", team="x")
        built: list[Any] = []
        original = SchemaValidator.__init__

        def counting(self: Any, *args: Any, **kwargs: Any) -> None:
            built.append(args)
            original(self, *args, **kwargs)

        def no_compiling(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a run compiled the program again")

        monkeypatch.setattr(SchemaValidator, "__init__", counting)
        monkeypatch.setattr(luma.compile, "check_source", no_compiling)
        monkeypatch.setattr(luma.compile, "check_file", no_compiling)
        modules = set(sys.modules)
        for i in range(20):
            assert program.run_sync("Triage", text="a " * i, request_id=f"k{i}")["words"] == i
            program.call_sync("Triage", "check", team="x")
        assert built == []
        assert set(sys.modules) - modules == set()


def test_an_env_that_is_not_strings_is_the_callers_type_error() -> None:
    with pytest.raises(TypeError, match=r"^env must map names to strings; 'TRIAGE_TOKEN' is "
                                        r"an int$"):
        _load(env={"TRIAGE_TOKEN": 5})
    with _load() as program, pytest.raises(TypeError, match=r"the name 3 is an int$"):
        program.run_sync("Triage", text="x", env={3: "x"})
