"""``luma mcp serve`` end to end: the official MCP SDK's client, over stdio, against the real
``luma`` process serving tests/mcp_serve/desk.luma."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest


import mcp_types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

HERE = Path(__file__).parent / "mcp_serve"
PROGRAM = str(HERE / "desk.luma")
TOOLS = str(HERE / "desk_tools.py")
NOT_PERMITTED = ("You are not permitted to use that tool in this context. Continue with the "
                 "tools you have been given.")


@asynccontextmanager
async def served(*options: str, env: dict[str, str] | None = None, errlog: Any = None,
                 elicitation: Any = None) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "luma", "mcp", "serve", PROGRAM, "--tool-module", TOOLS, *options],
        env={"PYTHONPATH": os.pathsep.join(sys.path), **(env or {})}, cwd=str(HERE))
    with open(os.devnull, "w") if errlog is None else errlog as log:
        async with stdio_client(params, errlog=log) as (read, write):
            async with ClientSession(read, write,
                                     elicitation_callback=elicitation) as session:
                await session.initialize()
                yield session


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_tools_are_listed_sorted_with_their_schemas_and_annotations() -> None:
    async def go() -> Any:
        async with served() as session:
            return (await session.list_tools()).tools

    tools = {t.name: t for t in run(go())}
    assert list(tools) == ["audit", "broken", "close_ticket", "count_words", "echo", "lookup",
                           "open_ticket", "slow"]
    count = tools["count_words"]
    assert count.description == "Count the words of a text."
    assert count.input_schema["properties"] == {"text": {"type": "string"}}
    assert count.input_schema["required"] == ["text"]
    assert count.output_schema is not None
    assert count.output_schema["properties"]["words"] == {"type": "integer"}
    hints = {name: (t.annotations.read_only_hint, t.annotations.destructive_hint,
                    t.annotations.idempotent_hint) for name, t in tools.items()
             if t.annotations is not None}
    assert hints["count_words"] == (True, None, True)
    assert hints["lookup"] == (True, None, None)
    assert hints["open_ticket"] == (False, True, True)
    assert hints["close_ticket"] == (False, True, False)


def test_a_call_runs_the_pipeline_and_returns_validated_structured_content() -> None:
    async def go() -> Any:
        async with served() as session:
            ok = await session.call_tool("count_words", {"text": "one two three"})
            bad = await session.call_tool("count_words", {"text": 3})
            return ok, bad

    ok, bad = run(go())
    assert not ok.is_error
    assert ok.structured_content == {"words": 3}
    assert ok.content[0].text == '{"words": 3}'
    assert bad.is_error
    assert bad.content[0].text.startswith("The arguments for 'count_words' do not fit its "
                                          "input schema:\n- ")
    assert bad.content[0].text.endswith("Fix those fields and call the tool again.")


def test_a_failing_handler_is_an_error_result_without_traceback_or_secret() -> None:
    async def go() -> Any:
        async with served(env={"DESK_TOKEN": "sk-desk-secret-0123456789"}) as session:
            return await session.call_tool("broken", {"text": "x"})

    result = run(go())
    assert result.is_error
    text = result.content[0].text
    assert "Traceback" not in text
    assert "sk-desk-secret-0123456789" not in text
    assert text == "Tool 'broken' failed: the database is down, token [secret]"


def test_a_known_secret_in_a_result_reaches_the_client_as_secret() -> None:
    async def go() -> Any:
        async with served(env={"DESK_TOKEN": "sk-desk-secret-0123456789"}) as session:
            return await session.call_tool("echo", {"text": "key sk-desk-secret-0123456789"})

    result = run(go())
    assert not result.is_error
    assert result.structured_content == {"text": "key [secret]"}
    assert result.content[0].text == '{"text": "key [secret]"}'


def test_unknown_tool_and_bad_params_are_protocol_errors() -> None:
    async def go() -> Any:
        async with served() as session:
            with pytest.raises(MCPError) as unknown:
                await session.call_tool("count_word", {"text": "x"})
            return unknown.value

    error = run(go())
    assert error.code == -32602
    assert error.message == "Unknown tool: count_word"


def test_an_agent_lists_only_its_tools_less_deny_write_and_scopes_and_its_methods() -> None:
    async def go() -> Any:
        async with served("--agent", "Reader") as session:
            names = [t.name for t in (await session.list_tools()).tools]
            words = await session.call_tool("Reader.words", {"text": "a b c d"})
            return names, words

    names, words = run(go())
    assert names == ["Reader.words", "count_words", "lookup"]
    assert not words.is_error
    assert words.structured_content == {"result": 4}


def test_approval_tools_run_only_when_approved_and_a_refusal_names_nothing() -> None:
    async def go() -> Any:
        async with served("--agent", "Careful",
                          env={"LUMA_APPROVED_TOOLS": "open_ticket"}) as session:
            opened = await session.call_tool("open_ticket", {"request_id": "7", "team": "ops"})
            closed = await session.call_tool("close_ticket", {"id": "T-7"})
            return opened, closed

    opened, closed = run(go())
    assert opened.structured_content == {"id": "T-7", "team": "ops"}
    assert closed.is_error
    assert closed.content[0].text == NOT_PERMITTED


def test_a_client_with_elicitation_is_asked_to_approve() -> None:
    asked: list[str] = []

    async def answer(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return types.ElicitResult(action="accept",
                                  content={"approve": "T-1" in params.message})

    async def go() -> Any:
        async with served("--agent", "Careful", elicitation=answer) as session:
            yes = await session.call_tool("close_ticket", {"id": "T-1"})
            no = await session.call_tool("close_ticket", {"id": "T-2"})
            return yes, no

    yes, no = run(go())
    assert yes.structured_content == {"id": "T-1", "team": "ops"}
    assert no.is_error and no.content[0].text == NOT_PERMITTED
    assert asked == ["Allow the write tool 'close_ticket' to run with {\"id\": \"T-1\"}?",
                     "Allow the write tool 'close_ticket' to run with {\"id\": \"T-2\"}?"]


def test_concurrent_calls_run_at_once() -> None:
    async def go() -> Any:
        async with served() as session:
            loop = asyncio.get_running_loop()
            started = loop.time()
            results = await asyncio.gather(*(session.call_tool("slow", {"ms": 400})
                                             for _ in range(4)))
            return results, loop.time() - started

    results, took = run(go())
    assert [r.structured_content for r in results] == [{"words": 400}] * 4
    assert took < 1.4  # four 0.4 s calls, not one after another


def test_a_cancelled_call_stops_its_handler_and_the_server_goes_on(tmp_path: Path) -> None:
    mark = tmp_path / "mark"

    async def go() -> Any:
        async with served(env={"DESK_MARK": str(mark)}) as session:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(session.call_tool("slow", {"ms": 1500}), 0.3)
            after = await session.call_tool("count_words", {"text": "still here"})
            await asyncio.sleep(1.6)  # the cancelled handler would have finished by now
            return after

    after = run(go())
    assert after.structured_content == {"words": 2}
    assert not mark.exists()


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # the client's, on purpose
def test_arguments_that_are_not_an_object_are_a_protocol_error() -> None:
    async def go() -> Any:
        async with served() as session:
            with pytest.raises(MCPError) as shape:
                await session.send_request(
                    types.CallToolRequest(params=types.CallToolRequestParams.model_construct(
                        name="count_words", arguments=["one"])), types.CallToolResult)
            return shape.value

    error = run(go())
    assert error.code == -32602


def test_a_program_that_does_not_load_is_a_located_error(tmp_path: Path) -> None:
    import subprocess

    broken = tmp_path / "broken.luma"
    broken.write_text("tool t(x: strin) -> string {\n  side_effects: \"none\"\n}\n")
    done = subprocess.run([sys.executable, "-m", "luma", "mcp", "serve", str(broken)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert f"{broken}:1:" in done.stderr
    assert "Traceback" not in done.stderr
    missing = subprocess.run([sys.executable, "-m", "luma", "mcp", "serve", PROGRAM],
                             capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert missing.returncode == 1
    assert "error: 'count_words' is not registered in the tool registry." in missing.stderr
    agent = subprocess.run([sys.executable, "-m", "luma", "mcp", "serve", PROGRAM,
                            "--tool-module", TOOLS, "--agent", "Reeder"],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert agent.returncode == 1
    assert agent.stderr == ("luma mcp: error: Unknown agent 'Reeder'; did you mean "
                            "'Reader'?.\n")


def test_without_the_sdk_the_command_names_the_extra() -> None:
    import subprocess

    code = ("import sys; sys.modules['mcp'] = None; from luma.cli import main; "
            f"sys.exit(main(['mcp', 'serve', {PROGRAM!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert done.stderr == "luma mcp: error: luma mcp needs the MCP extra: pip install 'luma[mcp]'\n"


def test_luma_help_mcp_shows_the_serve_command() -> None:
    import subprocess

    done = subprocess.run([sys.executable, "-m", "luma", "help", "mcp"], capture_output=True,
                          text=True)
    assert done.returncode == 0
    assert done.stdout.startswith("usage: luma mcp")
    assert "serve" in done.stdout


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_streamable_http_lists_and_calls_and_refuses() -> None:
    import subprocess

    from mcp.client.streamable_http import streamable_http_client

    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "luma", "mcp", "serve", PROGRAM, "--tool-module", TOOLS,
         "--agent", "Careful", "--http", f"127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line == f"luma mcp: serving http://127.0.0.1:{port}/mcp\n"

        async def go() -> Any:
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    names = [t.name for t in (await session.list_tools()).tools]
                    refused = await session.call_tool("open_ticket",
                                                      {"request_id": "1", "team": "ops"})
                    both = await asyncio.gather(
                        session.call_tool("close_ticket", {"id": "a"}),
                        session.call_tool("close_ticket", {"id": "b"}))
                    return names, refused, both

        names, refused, both = run(go())
        assert names == ["close_ticket", "open_ticket"]
        assert refused.is_error
        assert refused.content[0].text == NOT_PERMITTED
        assert [r.content[0].text for r in both] == [NOT_PERMITTED, NOT_PERMITTED]
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert process.stdout is not None
    assert process.stdout.read() == ""


def test_a_bad_http_address_is_a_usage_error() -> None:
    import subprocess

    done = subprocess.run([sys.executable, "-m", "luma", "mcp", "serve", PROGRAM, "--http",
                           "8765"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.endswith("luma mcp serve: error: argument --http: expected HOST:PORT "
                                "(like 127.0.0.1:8765), got '8765'\n")


def test_a_port_in_use_is_a_clear_error() -> None:
    import socket
    import subprocess

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "luma", "mcp", "serve", PROGRAM,
                               "--tool-module", TOOLS, "--http", f"127.0.0.1:{port}"],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=60)
    assert done.returncode == 1
    assert done.stderr == (f"luma mcp: error: cannot listen on 127.0.0.1:{port}: "
                           "Address already in use\n")
