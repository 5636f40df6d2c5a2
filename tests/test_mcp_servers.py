"""Real third-party MCP servers behind contracts: mcp-server-time and mcp-server-git from
PyPI (the test extra), started by Luma from this Python as ``python -m ...`` over stdio."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import luma

TIME = {"mcp": {"command": [sys.executable, "-m", "mcp_server_time",
                            "--local-timezone", "UTC"]}}

TIME_CONTRACTS = '''schema Time {
  timezone: string
  datetime: string
  day_of_week: string
  is_dst: bool
}

schema Conversion {
  source: Time
  target: Time
  time_difference: string
}

tool get_current_time(timezone: string) -> Time {
  description: "The time now in an IANA zone."
  side_effects: "read"
}

tool convert(source_timezone: string, time: string, target_timezone: string) -> Conversion {
  description: "A wall-clock time in another zone."
  side_effects: "none"
  cache: true
}

agent Clock {
  tools: [get_current_time, convert]
}
'''


def load(source: str, tmp_path: Path, server: dict[str, Any]) -> luma.Program:
    return luma.loads(source, path=str(tmp_path / "p.luma"),
                      config={"tool_modules": [server]})


def call(program: luma.Program, tool: str, arguments: dict[str, Any]) -> Any:
    contract = next(c for c in program.contracts("Clock") if c.name == tool)
    return program._sync(program.call_contract(contract, arguments, agent="Clock"))


def test_the_time_servers_results_come_back_validated(tmp_path: Path) -> None:
    server = {"mcp": {**TIME["mcp"], "names": {"convert": "convert_time"}}}
    with load(TIME_CONTRACTS, tmp_path, server) as program:
        now = call(program, "get_current_time", {"timezone": "Asia/Tokyo"})
        assert now["timezone"] == "Asia/Tokyo"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+09:00", now["datetime"])
        assert now["is_dst"] is False
        converted = call(program, "convert", {"source_timezone": "UTC", "time": "12:00",
                                              "target_timezone": "Asia/Tokyo"})
        assert converted["time_difference"] == "+9.0h"
        assert converted["target"]["datetime"].endswith("T21:00:00+09:00")


def test_a_time_server_error_is_tool_failed_with_its_text(tmp_path: Path) -> None:
    server = {"mcp": {**TIME["mcp"], "names": {"convert": "convert_time"}}}
    with load(TIME_CONTRACTS, tmp_path, server) as program, \
            pytest.raises(luma.RunError) as failed:
        call(program, "get_current_time", {"timezone": "Mars/Olympus"})
    assert failed.value.code == "TOOL_FAILED"
    assert failed.value.message == (
        "Tool 'get_current_time' failed: Error executing tool get_current_time: Invalid "
        "timezone: 'No time zone found with key Mars/Olympus'")


def test_a_contract_that_disagrees_with_the_time_server_is_a_start_error(
        tmp_path: Path) -> None:
    source = TIME_CONTRACTS.replace(
        "tool convert(source_timezone: string, time: string, target_timezone: string)",
        "tool convert_time(source_timezone: string, time: int, target: string)").replace(
        "[get_current_time, convert]", "[get_current_time, convert_time]")
    with pytest.raises(luma.LoadError) as bad:
        load(source, tmp_path, TIME)
    assert bad.value.problems == [
        "Tool 'convert_time': parameter 'time' is integer in the contract and string on the "
        "MCP server",
        "Tool 'convert_time': the MCP server does not accept the parameter 'target' (string)",
        "Tool 'convert_time': the MCP server requires the parameter 'target_timezone' "
        "(string), which the contract does not declare"]


def test_a_tool_the_time_server_lacks_is_unregistered_with_its_names(tmp_path: Path) -> None:
    with pytest.raises(luma.LoadError) as missing:
        load(TIME_CONTRACTS, tmp_path, TIME)
    assert missing.value.problems == [
        "'convert' is not registered in the tool registry. (did you mean 'convert_time'?)"]


GIT_CONTRACTS = '''schema Text {
  text: string
}

tool git_status(repo_path: string) -> Text {
  description: "The working tree's status."
  side_effects: "read"
}

tool git_log(repo_path: string, max_count: int @default(10)) -> Text {
  description: "The latest commits."
  side_effects: "read"
}

tool git_checkout(repo_path: string, branch_name: string) -> Text {
  description: "Switch branches."
  side_effects: "write"
}

agent Clock {
  tools: [git_status, git_log, git_checkout]
}
'''


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "notes.txt").write_text("one\n")
    subprocess.run(["git", "-C", str(path), "add", "notes.txt"], check=True)
    subprocess.run(["git", "-C", str(path), "-c", "user.name=Ada", "-c", "user.email=ada@x",
                    "commit", "-q", "-m", "the first note"], check=True)
    (path / "notes.txt").write_text("one\ntwo\n")
    return path


def git_server(repo: Path) -> dict[str, Any]:
    return {"mcp": {"command": [sys.executable, "-m", "mcp_server_git", "--repository",
                                str(repo)]}}


def test_the_git_servers_text_comes_back_as_text(tmp_path: Path, repo: Path) -> None:
    with load(GIT_CONTRACTS, tmp_path, git_server(repo)) as program:
        status = call(program, "git_status", {"repo_path": str(repo)})
        assert status["text"].startswith("Repository status:\nOn branch main\n")
        assert "modified:   notes.txt" in status["text"]
        log = call(program, "git_log", {"repo_path": str(repo)})  # max_count's default
        assert "Author: Ada\n" in log["text"]
        assert "Message: the first note\n" in log["text"]


def test_a_git_server_error_is_tool_failed_with_its_text(tmp_path: Path, repo: Path) -> None:
    with load(GIT_CONTRACTS, tmp_path, git_server(repo)) as program:
        with pytest.raises(luma.RunError) as outside:
            call(program, "git_status", {"repo_path": str(tmp_path)})
        assert outside.value.code == "TOOL_FAILED"
        assert outside.value.message == (
            f"Tool 'git_status' failed: Error executing tool git_status: Repository path "
            f"'{tmp_path}' is outside the allowed repository '{repo}'")
        with pytest.raises(luma.RunError) as unknown:
            call(program, "git_checkout", {"repo_path": str(repo), "branch_name": "nope"})
        assert unknown.value.message == (
            "Tool 'git_checkout' failed: Error executing tool git_checkout: Ref 'nope' did "
            "not resolve to an object")


def test_a_contract_that_disagrees_with_the_git_server_is_a_start_error(
        tmp_path: Path, repo: Path) -> None:
    source = GIT_CONTRACTS.replace("max_count: int @default(10)", "max_count: string")
    with pytest.raises(luma.LoadError) as bad:
        load(source, tmp_path, git_server(repo))
    assert bad.value.problems == [
        "Tool 'git_log': parameter 'max_count' is string in the contract and integer on the "
        "MCP server"]
