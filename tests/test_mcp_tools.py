"""MCP servers as tool implementations: contracts in tests/mcp_serve/clock.luma, their
implementation on tests/mcp_serve/clock_server.py (written with the official SDK, started over
stdio by Luma), every call through the tool pipeline."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest

import luma

HERE = Path(__file__).parent / "mcp_serve"
SERVER = {"mcp": {"command": [sys.executable, str(HERE / "clock_server.py")]}}


def load(source: str | None = None, **server: Any) -> luma.Program:
    config = {"tool_modules": [{"mcp": {**SERVER["mcp"], **server}}]}
    if source is None:
        return luma.load(HERE / "clock.luma", config=config)
    return luma.loads(source, path=str(HERE / "inline.luma"), config=config)


def call(program: luma.Program, tool: str, arguments: dict[str, Any]) -> Any:
    contract = next(c for c in program.contracts("Clock") if c.name == tool)
    return program._sync(program.call_contract(contract, arguments, agent="Clock"))


def test_structured_content_and_json_text_come_back_validated() -> None:
    with load() as program:
        assert call(program, "get_current_time", {"timezone": "UTC"}) == {
            "timezone": "UTC", "datetime": "2026-12-01T12:00:00+00:00"}
        assert call(program, "add", {"a": 2, "b": 3}) == {"sum": 5}


def test_a_server_error_is_tool_failed_with_its_text() -> None:
    with load() as program, pytest.raises(luma.RunError) as failed:
        call(program, "get_current_time", {"timezone": "Mars/Olympus"})
    assert failed.value.code == "TOOL_FAILED"
    assert failed.value.message == ("Tool 'get_current_time' failed: Invalid timezone: "
                                    "Mars/Olympus")


def test_output_that_breaks_the_contract_is_tool_output_invalid() -> None:
    with load() as program, pytest.raises(luma.RunError) as invalid:
        call(program, "wrong", {"x": "y"})
    assert invalid.value.code == "TOOL_OUTPUT_INVALID"
    assert "sum" in invalid.value.message


def test_input_is_validated_before_the_server_sees_it() -> None:
    with load() as program, pytest.raises(luma.RunError) as invalid:
        call(program, "add", {"a": "two", "b": 3})
    assert invalid.value.code == "TOOL_INPUT_INVALID"


def test_a_crashed_server_is_started_again_once(tmp_path: Path) -> None:
    mark = tmp_path / "crashed"
    with load() as program:
        assert call(program, "crash", {"mark": str(mark)}) == {"sum": 1}
    assert mark.read_text() == "crashed once\n"


def test_the_contracts_timeout_cancels_the_request() -> None:
    with load() as program:
        with pytest.raises(luma.RunError) as late:
            call(program, "nap", {"ms": 2000})
        assert late.value.code == "TOOL_TIMEOUT"
        assert late.value.message == "Tool 'nap' timed out after 300 ms."
        assert call(program, "nap", {"ms": 10}) == {"sum": 10}  # the server goes on


def test_a_tool_the_server_lacks_is_unregistered_with_a_did_you_mean() -> None:
    source = ('schema T {\n  timezone: string\n  datetime: string\n}\n'
              'tool get_time(timezone: string) -> T {\n  side_effects: "read"\n}\n'
              'agent Clock {\n  tools: [get_time]\n}\n')
    with pytest.raises(luma.LoadError) as missing:
        load(source)
    assert missing.value.problems == [
        "'get_time' is not registered in the tool registry. (did you mean "
        "'get_current_time'?)"]
    with load(source, names={"get_time": "get_current_time"}) as program:
        assert program.call_sync is not None
        contract = program.contracts("Clock")[0]
        assert program._sync(program.call_contract(contract, {"timezone": "UTC"}))[
            "timezone"] == "UTC"


def test_parameters_that_disagree_are_start_errors_naming_tool_field_and_types() -> None:
    source = ('schema S {\n  sum: int\n}\n'
              'tool add(a: string, c: int) -> S {\n  side_effects: "none"\n}\n'
              'agent Clock {\n  tools: [add]\n}\n')
    with pytest.raises(luma.LoadError) as bad:
        load(source)
    assert bad.value.problems == [
        "Tool 'add': parameter 'a' is string in the contract and integer on the MCP server",
        "Tool 'add': the MCP server does not accept the parameter 'c' (integer)",
        "Tool 'add': the MCP server requires the parameter 'b' (integer), which the contract "
        "does not declare"]


def test_a_server_that_does_not_start_is_a_start_error(tmp_path: Path) -> None:
    with pytest.raises(luma.LoadError) as bad:
        luma.load(HERE / "clock.luma",
                  config={"tool_modules": [{"mcp": {"command": [str(tmp_path / "nothing")]}}]})
    assert bad.value.problems[0].startswith(
        f"tool_modules[0]: the MCP server {tmp_path / 'nothing'} did not answer: ")


def test_a_write_call_the_server_died_under_is_not_sent_again(tmp_path: Path) -> None:
    source = ('schema Sum {\n  sum: int\n}\n'
              'tool record(mark: string) -> Sum {\n  side_effects: "write"\n}\n'
              'agent Clock {\n  tools: [record]\n}\n')
    mark = tmp_path / "crashed"
    with load(source, names={"record": "crash"}) as program:
        with pytest.raises(luma.RunError) as failed:
            call(program, "record", {"mark": str(mark)})
        assert failed.value.code == "TOOL_FAILED"
        assert failed.value.message == (
            f"Tool 'record' failed: the MCP server {sys.executable} "
            f"{HERE / 'clock_server.py'} stopped during the call (it is started again for "
            "the next call)")
        assert call(program, "record", {"mark": str(mark)}) == {"sum": 1}


def check(tmp_path: Path, source: str, config: dict[str, Any],
          *options: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "p.luma").write_text(source)
    (tmp_path / "luma.config.json").write_text(json.dumps(config))
    return subprocess.run([sys.executable, "-m", "luma", "check", "p.luma", *options],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)


SUM = ('schema Sum {\n  sum: int\n}\n'
       'tool add(a: int, b: int) -> Sum {\n  side_effects: "none"\n}\n'
       'r = tool add({ a: 2, b: 40 })\nr.sum\n')


def test_luma_check_lists_the_servers_tools_and_a_run_calls_them(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("def other(input):\n    return {}\n")
    checked = check(tmp_path, SUM, {"tool_modules": ["t.py", SERVER]})
    assert (checked.returncode, checked.stderr) == (0, "checked 1 file: no problems\n")
    ran = subprocess.run([sys.executable, "-m", "luma", "p.luma"], capture_output=True,
                         text=True, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "42\n", "")


def test_luma_check_reports_disagreements_at_the_tool_without_calling_it(
        tmp_path: Path) -> None:
    mark = tmp_path / "crashed"
    source = ('schema Sum {\n  sum: int\n}\n'
              'tool add(a: string, b: int) -> Sum {\n  side_effects: "none"\n}\n'
              'tool get_time(timezone: string) -> Sum {\n  side_effects: "read"\n}\n'
              'tool crash(mark: string) -> Sum {\n  side_effects: "none"\n}\n'
              f'r = tool crash({{ mark: {json.dumps(str(mark))} }})\n')
    checked = check(tmp_path, source, {"tool_modules": [SERVER]}, "--format", "json")
    assert checked.returncode == 1
    found = [(d["code"], d["message"], d["line"], d.get("hint"))
             for d in json.loads(checked.stdout) if d["code"] != "W003"]
    label = f"the MCP server {sys.executable} {HERE / 'clock_server.py'}"
    assert found == [
        ("E057", "Tool 'add': parameter 'a' is string in the contract and integer on the MCP "
         "server", 4, f"its implementation is on {label} (tool_modules[0])"),
        ("E040", "'get_time' is not registered in the tool registry.", 7,
         "did you mean 'get_current_time'?")]
    assert not mark.exists()  # listed, never called


def test_luma_check_reports_a_server_that_does_not_answer_at_its_entry(
        tmp_path: Path) -> None:
    port = _free_port()
    config = {"tool_modules": [{"mcp": {"url": f"http://127.0.0.1:{port}/mcp?token=tok-99812"}}]}
    checked = check(tmp_path, SUM, config)
    assert checked.returncode == 1
    assert (f"luma.config.json:1:20: error[E041]: tool_modules[0]: the MCP server at "
            f"http://127.0.0.1:{port}/mcp did not answer: ConnectError: All connection "
            "attempts failed") in checked.stdout + checked.stderr
    assert "tok-99812" not in checked.stdout + checked.stderr  # nor in the line shown
    assert '?token=[secret]"' in checked.stderr
    assert "E040" not in checked.stdout + checked.stderr

LINGER = ('schema Sum {\n  sum: int\n}\n'
          'tool linger(ms: int, mark: string) -> Sum {\n  side_effects: "none"\n'
          '  timeout: 300\n}\n'
          'agent Clock {\n  tools: [linger]\n}\n')


def test_a_timeout_sends_the_server_a_cancellation(tmp_path: Path) -> None:
    mark = tmp_path / "linger"
    with load(LINGER) as program:
        with pytest.raises(luma.RunError) as late:
            call(program, "linger", {"ms": 5000, "mark": str(mark)})
        assert late.value.code == "TOOL_TIMEOUT"
        for _ in range(100):  # the server's handler is cancelled a moment later
            if mark.exists():
                break
            time.sleep(0.05)
    assert mark.read_text() == "cancelled\n"


# --- a server that runs on its own, reached by URL (Streamable HTTP) ---

TOKEN = "s3cret-clock-token-7f3a"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_clock() -> Iterator[str]:
    """clock_server.py over Streamable HTTP on a loopback port, behind a bearer token."""
    import os

    port = _free_port()
    process = subprocess.Popen([sys.executable, str(HERE / "clock_server.py"), "--http",
                                str(port)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "CLOCK_TOKEN": TOKEN})
    try:
        assert process.stderr is not None
        assert process.stderr.readline() == "ready\n"
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def clock_url() -> Iterator[str]:
    with http_clock() as url:
        yield url


def load_url(url: str, source: str | None = None, env: dict[str, str] | None = None,
             **server: Any) -> luma.Program:
    entry = {"url": url, "headers": {"Authorization": {"env": "CLOCK_AUTH"}}, **server}
    config = {"tool_modules": [{"mcp": entry}]}
    env = {"CLOCK_AUTH": f"Bearer {TOKEN}"} if env is None else env
    if source is None:
        return luma.load(HERE / "clock.luma", config=config, env=env)
    return luma.loads(source, path=str(HERE / "inline.luma"), config=config, env=env)


def test_a_url_server_answers_through_the_pipeline(clock_url: str, tmp_path: Path) -> None:
    with load_url(clock_url) as program:
        assert call(program, "get_current_time", {"timezone": "UTC"}) == {
            "timezone": "UTC", "datetime": "2026-12-01T12:00:00+00:00"}
        assert call(program, "add", {"a": 2, "b": 3}) == {"sum": 5}
        with pytest.raises(luma.RunError) as failed:
            call(program, "get_current_time", {"timezone": "Mars/Olympus"})
        assert (failed.value.code, failed.value.message) == (
            "TOOL_FAILED", "Tool 'get_current_time' failed: Invalid timezone: Mars/Olympus")
        with pytest.raises(luma.RunError) as invalid:
            call(program, "wrong", {"x": "y"})
        assert invalid.value.code == "TOOL_OUTPUT_INVALID"
        with pytest.raises(luma.RunError) as late:
            call(program, "nap", {"ms": 2000})
        assert late.value.message == "Tool 'nap' timed out after 300 ms."
    mark = tmp_path / "linger"
    with load_url(clock_url, LINGER) as program:
        with pytest.raises(luma.RunError) as late:
            call(program, "linger", {"ms": 5000, "mark": str(mark)})
        assert late.value.code == "TOOL_TIMEOUT"
        for _ in range(100):
            if mark.exists():
                break
            time.sleep(0.05)
    assert mark.read_text() == "cancelled\n"


def test_a_url_server_is_matched_and_checked_like_a_started_one(clock_url: str) -> None:
    source = ('schema S {\n  sum: int\n}\n'
              'tool add(a: string, c: int) -> S {\n  side_effects: "none"\n}\n'
              'tool get_time(timezone: string) -> S {\n  side_effects: "read"\n}\n'
              'agent Clock {\n  tools: [add, get_time]\n}\n')
    with pytest.raises(luma.LoadError) as bad:
        load_url(clock_url, source)
    assert bad.value.problems == [
        "Tool 'add': parameter 'a' is string in the contract and integer on the MCP server",
        "Tool 'add': the MCP server does not accept the parameter 'c' (integer)",
        "Tool 'add': the MCP server requires the parameter 'b' (integer), which the contract "
        "does not declare"]
    renamed = source.replace("a: string, c: int", "a: int, b: int")
    with pytest.raises(luma.LoadError) as missing:
        load_url(clock_url, renamed)
    assert missing.value.problems == [
        "'get_time' is not registered in the tool registry. (did you mean "
        "'get_current_time'?)"]
    with load_url(clock_url, renamed, names={"get_time": "get_current_time"}) as program:
        contract = next(c for c in program.contracts("Clock") if c.name == "get_time")
        with pytest.raises(luma.RunError) as invalid:  # the server's answer has no 'sum'
            program._sync(program.call_contract(contract, {"timezone": "UTC"}, agent="Clock"))
        assert invalid.value.code == "TOOL_OUTPUT_INVALID"


def test_a_url_server_that_went_away_fails_the_call(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with http_clock() as url, load_url(url) as program:
        with pytest.raises(luma.RunError) as failed:
            call(program, "crash", {"mark": str(tmp_path / "crashed")})  # the server exits
        assert failed.value.code == "TOOL_FAILED"
        assert failed.value.message == (f"Tool 'crash' failed: the MCP server at {url} "
                                        "stopped: ConnectError: All connection attempts failed")
    assert capsys.readouterr() == ("", "")  # nothing of the SDK's own on the streams


def test_a_refused_token_is_a_start_error_without_the_token(clock_url: str) -> None:
    wrong = "Bearer not-the-clock-token-91"
    with pytest.raises(luma.LoadError) as refused:
        load_url(clock_url, env={"CLOCK_AUTH": wrong})
    assert refused.value.problems == [
        f"tool_modules[0]: the MCP server at {clock_url} did not answer: HTTP 401 Unauthorized"]
    with pytest.raises(luma.LoadError) as unset:
        load_url(clock_url, env={})
    assert unset.value.problems == [
        "tool_modules[0].mcp.headers.Authorization: the environment variable CLOCK_AUTH is not "
        "set"]


def test_an_unreachable_url_is_one_line_without_its_secrets(tmp_path: Path) -> None:
    import json
    import subprocess

    port = _free_port()  # nothing listens there
    url = f"http://user:pa55word-x1@127.0.0.1:{port}/mcp?key=url-token-5521"
    (tmp_path / "luma.config.json").write_text(json.dumps({"tool_modules": [
        {"mcp": {"url": url, "headers": {"X-Api-Key": "header-secret-8812"}}}]}))
    (tmp_path / "p.luma").write_text(
        'schema Sum {\n  sum: int\n}\n'
        'tool add(a: int, b: int) -> Sum {\n  side_effects: "none"\n}\n'
        'r = tool add({ a: 2, b: 40 })\nr.sum\n')
    ran = subprocess.run([sys.executable, "-m", "luma", "p.luma"], capture_output=True,
                         text=True, cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=120)
    assert (ran.returncode, ran.stdout) == (2, "")
    assert ran.stderr == (f"error: tool_modules[0]: the MCP server at http://127.0.0.1:{port}"
                          "/mcp did not answer: ConnectError: All connection attempts failed\n")
    for secret in ("pa55word-x1", "url-token-5521", "header-secret-8812", "Traceback"):
        assert secret not in ran.stderr


PIPELINE = '''schema Sum {
  sum: int
}

tool cached_tick(n: int) -> Sum {
  side_effects: "none"
  cache: true
}

tool once_tick(id: string) -> Sum {
  side_effects: "write"
  idempotent: true
  idempotency_key: id
}

tool slow_once(n: int) -> Sum {
  side_effects: "none"
  timeout: 300
  retries: 1
}

tool doom(n: int) -> Sum {
  side_effects: "none"
}

agent Clock {
  tools: [cached_tick, once_tick, slow_once, doom]
}

agent Careful {
  tools: [once_tick]
  tool_policy: "deny_write"
}
'''


def test_cache_idempotency_retries_and_policies_apply_to_server_tools() -> None:
    names = {"cached_tick": "tick", "once_tick": "tick"}
    with load(PIPELINE, names=names) as program:
        # the server counts its calls: a cached or idempotent call does not reach it again
        assert call(program, "cached_tick", {"n": 1}) == {"sum": 1}
        assert call(program, "cached_tick", {"n": 1}) == {"sum": 1}
        assert call(program, "once_tick", {"id": "r-1"}) == {"sum": 2}
        assert call(program, "once_tick", {"id": "r-1"}) == {"sum": 2}
        assert call(program, "cached_tick", {"n": 2}) == {"sum": 3}
        assert program.contracts("Careful") == []  # not even offered
        once = next(c for c in program.contracts("Clock") if c.name == "once_tick")
        with pytest.raises(luma.RunError) as denied:
            program._sync(program.call_contract(once, {"id": "r-2"}, agent="Careful"))
        assert denied.value.code == "TOOL_PERMISSION_DENIED"
        assert call(program, "cached_tick", {"n": 4}) == {"sum": 4}  # the refusal sent nothing
        # the first attempt times out (its request cancelled), the retry answers
        assert call(program, "slow_once", {"n": 1}) == {"sum": 2}


def test_a_server_that_dies_again_after_its_restart_fails_the_call() -> None:
    with load(PIPELINE, names={"cached_tick": "tick", "once_tick": "tick"}) as program:
        with pytest.raises(luma.RunError) as failed:
            call(program, "doom", {"n": 1})
        assert failed.value.code == "TOOL_FAILED"
        assert failed.value.message == (
            f"Tool 'doom' failed: the MCP server {sys.executable} {HERE / 'clock_server.py'} "
            "stopped during the call again after a restart")
        assert call(program, "cached_tick", {"n": 1}) == {"sum": 1}  # started for the next call


def test_a_wrong_mcp_entry_is_a_located_config_error_without_its_secrets() -> None:
    source = 'tool add(a: int, b: int) -> Sum {\n  side_effects: "none"\n}\nschema Sum {\n  sum: int\n}\n'
    secret_url = "http://127.0.0.1:1/mcp?key=entry-secret-4471"
    cases = [
        ({"url": secret_url, "command": ["x"]},
         'tool_modules[0].mcp: an MCP server needs either "command" (a server Luma starts) or '
         '"url" (a server that runs on its own), not both'),
        ({"url": "ftp://127.0.0.1/entry-secret-4471"},
         "tool_modules[0].mcp.url: must be an http:// or https:// URL (the server's MCP "
         "endpoint)"),
        ({"url": secret_url, "env": {"A": "entry-secret-4471"}},
         'tool_modules[0].mcp: "env" is for a server Luma starts ("command"); a "url" server '
         'takes "headers"'),
        ({"url": secret_url, "headers": {"X-Key": 4471}},
         'tool_modules[0].mcp.headers.X-Key: must be a string or {"env": "NAME"}'),
        ({"url": secret_url, "headers": {"X-Key": {"evn": "KEY"}}},
         "tool_modules[0].mcp.headers.X-Key.evn: unknown key; did you mean 'env'?"),
    ]
    for entry, message in cases:
        with pytest.raises(luma.LoadError) as bad:
            luma.loads(source, config={"tool_modules": [{"mcp": entry}]})
        assert f"<config>: {message}" in bad.value.problems, entry
        assert "entry-secret-4471" not in " ".join(bad.value.problems)
