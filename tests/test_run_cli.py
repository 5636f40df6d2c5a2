"""Running programs from the command line: what runs, stdout/stderr discipline, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runner import luma

HERE = Path(__file__).parent / "run"
PROGRAM = str(HERE / "calc.luma")
TOOLS = str(HERE / "calc_tools.py")


def test_the_single_agent_runs_with_arguments_from_the_command_line() -> None:
    r = luma(PROGRAM, "--tool-module", TOOLS, "--arg", "text=one two three four five")
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout) == {"text": "5 words", "total": 10}
    assert r.stderr == "caught TOOL_INPUT_INVALID\n"


def test_input_json_and_defaults() -> None:
    r = luma(PROGRAM, "--tool-module", TOOLS, "--input", '{"text": "a b c d", "factor": 3}')
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout) == {"text": "4 words", "total": 12}
    assert r.stdout.startswith("{\n  ")  # indented by 2


def test_input_from_a_file(tmp_path: Path) -> None:
    args = tmp_path / "args.json"
    args.write_text('{"text": "x"}')
    r = luma(PROGRAM, "--tool-module", TOOLS, "--input", f"@{args}")
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout) == {"text": "1 words", "total": 0}


def test_a_run_time_error_exits_1_with_the_code_and_the_source_line() -> None:
    r = luma(PROGRAM, "--tool-module", TOOLS, "--agent", "Flow", "--fn", "broken")
    assert r.code == 1
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0] == ("error[RETURN_INVALID]: Flow.double.output: expected int, got object")
    assert lines[1].endswith("calc.luma:41:5")
    assert lines[2] == "   | x"
    assert "Traceback" not in r.stderr


def test_missing_handlers_stop_the_program_before_it_runs(tmp_path: Path) -> None:
    partial = tmp_path / "partial.py"
    partial.write_text("def text_stats(input):\n    raise SystemExit('must not run')\n")
    r = luma(PROGRAM, "--tool-module", str(partial), "--arg", "text=x")
    assert r.code == 2
    assert r.stdout == ""
    assert r.stderr == "error: 'calculate' is not registered in the tool registry.\n"


def test_unknown_agent_and_method_are_start_errors() -> None:
    r = luma(PROGRAM, "--tool-module", TOOLS, "--agent", "Flwo")
    assert (r.code, r.stderr) == (2, "error: unknown agent 'Flwo'; did you mean 'Flow'?\n")
    r = luma(PROGRAM, "--tool-module", TOOLS, "--agent", "Flow", "--fn", "nope")
    assert r.code == 2
    assert r.stderr == "error: agent 'Flow' has no method 'nope' (its methods: run, broken, double)\n"


def test_bad_arguments_are_validated_like_a_tool_input() -> None:
    r = luma(PROGRAM, "--tool-module", TOOLS, "--arg", "text=5")
    assert r.code == 2  # a bad command line: nothing ran
    assert r.stderr.startswith("error[ARGUMENT_INVALID]: Flow.run.input.text: expected string, got int")


def test_trace_file_has_one_event_per_tool_call(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    r = luma(PROGRAM, "--tool-module", TOOLS, "--arg", "text=a b c d", "--trace", str(trace))
    assert r.code == 0, r.stderr
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    calls = [e for e in events if e["event"] == "tool.call"]
    assert [(c["tool"], c["mode"], c["outcome"]) for c in calls] == [
        ("text_stats", "direct", "ok"), ("calculate", "direct", "ok"),
        ("calculate", "direct", "TOOL_INPUT_INVALID")]
    assert all(c["agent"] == "Flow" for c in calls)


def test_verbose_shows_each_call_on_stderr_and_keeps_stdout_clean() -> None:
    r = luma(PROGRAM, "--tool-module", TOOLS, "--arg", "text=a b c d", "-v")
    assert r.code == 0
    assert json.loads(r.stdout)["total"] == 8
    assert "tool text_stats [direct] -> ok" in r.stderr


def test_a_bad_config_names_the_key_path(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text('{"tool_modules": [{"path": "x.py", "integrty": "sha256-x"}]}')
    r = luma(PROGRAM, "--tool-module", TOOLS, "--config", str(config))
    assert r.code == 2
    assert r.stderr == (f"error: {config}: tool_modules[0].integrty: unknown key; "
                        "did you mean 'integrity'?\n")


def test_reading_a_field_of_null_names_null_once(tmp_path: Path) -> None:
    program = tmp_path / "fields.luma"
    program.write_text("agent A {\n  fn run(p: any) -> any {\n    return p.x.y\n  }\n}\n")
    r = luma(str(program), "--input", '{"p": {}}')
    assert (r.code, r.stderr.splitlines()[0]) == (
        1, "error[TYPE_INVALID]: cannot read field 'y' of null")
    r = luma(str(program), "--input", '{"p": {"x": 3}}')
    assert r.stderr.splitlines()[0] == "error[TYPE_INVALID]: cannot read field 'y' of int 3"
