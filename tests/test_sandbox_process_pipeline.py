"""The tool pipeline sees no difference between a module in Luma's process and one under
``"sandbox": "process"``: results, output validation, typed errors, failures, timeouts, retries,
the cache, ``needs`` and telemetry come out the same. Each test runs both ways."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from luma.runtime.config import parse_config
from luma.runtime.manifests import load_program_modules
from runtime.harness import call, call_error, program, runtime, tool_events

HERE = Path(__file__).parent

PROGRAM = """
schema Out { text: string, calls: int }
schema Failure { code: string, message: string, retryable: bool, details?: any, hint?: string }
tool echo(text: string) -> Out {
  description: "echo"
  cache: true
}
tool missing(text: string) -> Out {
  description: "missing"
}
tool typed(text: string) -> Out {
  description: "typed"
  error: Failure
}
tool fails(text: string) -> Out {
  description: "fails"
}
tool lookup(text: string) -> Out {
  description: "lookup"
}
tool not_json(text: string) -> Out {
  description: "not json"
}
tool slow(text: string) -> Out {
  description: "slow"
  timeout: 200
}
tool flaky(text: string) -> Out {
  description: "flaky"
  retries: 3
  retry_delay: 0
}
schema Creds { token: string }
tool secret(text: string) -> Out {
  description: "secret"
  needs creds: Creds
}
"""

CONTEXTS = {"creds": {"token": {"env": "PROBE_TOKEN"}}}


@pytest.fixture(params=["in-process", "process"])
def handlers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    folder = tmp_path / "app"
    folder.mkdir()
    shutil.copy(HERE / "sandbox" / "pipeline_tools.py", folder / "tools.py")
    data: dict[str, Any] = {"tool_modules": ["./tools.py"]}
    if request.param == "process":
        data["tool_module_policy"] = {"sandbox": "process"}
    loaded = load_program_modules(folder, parse_config(data))
    assert loaded.errors == []
    yield dict(loaded.registry.handlers)


def make(handlers: dict[str, Any]) -> Any:
    return runtime(program(PROGRAM), handlers, env={"PROBE_TOKEN": "tok-123"},
                   config={"tool_contexts": CONTEXTS})


def error_of(handlers: dict[str, Any], tool: str) -> tuple[str, str]:
    err = call_error(make(handlers), tool, {"text": "x"})
    return err.code, err.message


def test_a_result_and_the_cache(handlers: dict[str, Any]) -> None:
    rt = make(handlers)
    assert call(rt, "echo", {"text": "a"}) == {"text": "a", "calls": 1}
    assert call(rt, "echo", {"text": "a"}) == {"text": "a", "calls": 1}  # from the cache
    assert [e["cache"] for e in tool_events(rt, "echo")][-1] == "hit"


def test_output_validation(handlers: dict[str, Any]) -> None:
    assert error_of(handlers, "missing") == (
        "TOOL_OUTPUT_INVALID", "[TOOL_OUTPUT_INVALID] missing.output: missing required field 'text'")


def test_a_typed_error(handlers: dict[str, Any]) -> None:
    err = call_error(make(handlers), "typed", {"text": "x"})
    assert (err.code, err.message, err.details, err.extra) == (
        "NOT_FOUND", "no such thing", {"id": 7}, {"hint": "look again"})


def test_a_failure(handlers: dict[str, Any]) -> None:
    assert error_of(handlers, "fails") == ("TOOL_FAILED", "Tool 'fails' failed: bad input x")
    assert error_of(handlers, "lookup") == ("TOOL_FAILED",
                                            "Tool 'lookup' failed: KeyError: 'absent'")


def test_output_that_is_not_json(handlers: dict[str, Any]) -> None:
    assert error_of(handlers, "not_json") == (
        "TOOL_OUTPUT_INVALID",
        "[TOOL_OUTPUT_INVALID] not_json.output.text: a Python set is not a JSON value")


def test_a_timeout(handlers: dict[str, Any]) -> None:
    assert error_of(handlers, "slow") == ("TOOL_TIMEOUT", "Tool 'slow' timed out after 200 ms.")


def test_retries(handlers: dict[str, Any]) -> None:
    rt = make(handlers)
    assert call(rt, "flaky", {"text": "x"}) == {"text": "third time", "calls": 3}
    assert tool_events(rt, "flaky")[-1]["attempts"] == 3


def test_needs_reach_the_handler(handlers: dict[str, Any]) -> None:
    assert call(make(handlers), "secret", {"text": "x"}) == {"text": "tok-123", "calls": 1}
