"""The ``luma`` command as a user runs it: stdout, stderr and exit codes of real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_runner import CONSOLE_SCRIPT, ROOT, luma, on_a_terminal

SYNTAX = "tests/cases/syntax"
FIELD_ERROR = f"{SYNTAX}/field_without_colon.luma"
UNCLOSED = f"{SYNTAX}/unclosed_string.luma"
CLEAN = "total = 1 + 2\n"


@pytest.fixture(params=["python -m luma", "console script"])
def run(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Each test runs through ``python -m luma`` and through the installed ``luma`` script."""
    script = request.param == "console script"
    if script and not CONSOLE_SCRIPT.exists():
        pytest.fail(f"the console script is not installed at {CONSOLE_SCRIPT}")

    def runner(*args: str, **kw):  # type: ignore[no-untyped-def]
        return luma(*args, script=script, **kw)

    return runner


def _write(folder: Path, name: str, text: str | bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------- check


def test_clean_file_exits_0_with_a_summary_on_stderr(run, tmp_path: Path) -> None:
    _write(tmp_path, "ok.luma", CLEAN)
    r = run("check", "ok.luma", cwd=tmp_path)
    assert r.code == 0
    assert r.stdout == ""
    assert r.stderr == "checked 1 file: no problems\n"


def test_text_report_goes_to_stderr_in_the_rustc_style(run) -> None:
    r = run("check", FIELD_ERROR)
    assert r.code == 1
    assert r.stdout == ""
    assert r.stderr == (
        f"{FIELD_ERROR}:2:6: error[E001]: expected ':' after the field name 'ok'\n"
        "  |\n"
        "2 |   ok bool   // error[E001]: expected ':' after the field name 'ok'\n"
        "  |      ^^^^\n"
        "\n"
        "checked 1 file: 1 error\n")


def test_a_folder_is_searched_recursively_and_every_file_is_reported(run) -> None:
    r = run("check", SYNTAX)
    assert r.code == 1
    headlines = [line for line in r.stderr.splitlines() if ": error[" in line]
    assert headlines == [
        f"{SYNTAX}/field_without_colon.luma:2:6: error[E001]: expected ':' after the field name 'ok'",
        f"{SYNTAX}/param_without_colon.luma:2:10: error[E001]: expected ':' after the parameter name 'a'",
        f"{SYNTAX}/unclosed_string.luma:2:5: error[E001]: this string is never closed",
    ]
    assert r.stderr.endswith("checked 3 files: 3 errors\n")


def test_the_default_path_is_the_current_folder_without_hidden_folders(run, tmp_path: Path) -> None:
    _write(tmp_path, "a/b/deep.luma", "schema A {\n  x int\n}\n")
    _write(tmp_path, ".hidden/skipped.luma", "schema {{{")
    _write(tmp_path, "notes.txt", "schema {{{")
    r = run("check", cwd=tmp_path)
    assert r.code == 1
    assert "a/b/deep.luma:2:5: error[E001]: expected ':' after the field name 'x'" in r.stderr
    assert "skipped" not in r.stderr
    assert r.stderr.endswith("checked 1 file: 1 error\n")


def test_hint_is_shown_under_the_snippet(run) -> None:
    r = run("check", UNCLOSED)
    assert '  = hint: a "..." string ends on its own line; use """...""" for text over several lines\n' \
        in r.stderr


def test_json_format_is_a_list_on_stdout(run) -> None:
    r = run("check", SYNTAX, "--format", "json")
    assert r.code == 1
    items = json.loads(r.stdout)
    assert [(d["file"], d["line"], d["column"], d["end_line"], d["end_column"]) for d in items] == [
        (f"{SYNTAX}/field_without_colon.luma", 2, 6, 2, 10),
        (f"{SYNTAX}/param_without_colon.luma", 2, 10, 2, 13),
        (f"{SYNTAX}/unclosed_string.luma", 2, 5, 2, 6),
    ]
    assert items[0] == {
        "file": f"{SYNTAX}/field_without_colon.luma", "line": 2, "column": 6, "end_line": 2,
        "end_column": 10, "severity": "error", "code": "E001",
        "message": "expected ':' after the field name 'ok'", "hint": None, "related": [],
    }
    assert r.stderr == "checked 3 files: 3 errors\n"


def test_github_format_prints_workflow_commands(run) -> None:
    r = run("check", FIELD_ERROR, UNCLOSED, "--format", "github")
    assert r.code == 1
    assert r.stdout.splitlines() == [
        f"::error file={FIELD_ERROR},line=2,col=6,endLine=2,endColumn=10,title=E001::"
        "expected ':' after the field name 'ok'",
        f"::error file={UNCLOSED},line=2,col=5,endLine=2,endColumn=6,title=E001::"
        "this string is never closed%0Ahint: a \"...\" string ends on its own line; "
        "use \"\"\"...\"\"\" for text over several lines",
    ]


def test_sarif_format_is_a_sarif_log_on_stdout(run) -> None:
    r = run("check", FIELD_ERROR, "--format", "sarif")
    assert r.code == 1
    log = json.loads(r.stdout)
    assert log["version"] == "2.1.0"
    (result,) = log["runs"][0]["results"]
    assert result["ruleId"] == "E001"
    assert result["message"]["text"] == "expected ':' after the field name 'ok'"
    assert result["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": FIELD_ERROR, "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 2, "startColumn": 6, "endLine": 2, "endColumn": 10},
    }


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_machine_formats_of_a_clean_run_are_still_valid(run, tmp_path: Path, fmt: str) -> None:
    _write(tmp_path, "ok.luma", CLEAN)
    r = run("check", "ok.luma", "--format", fmt, cwd=tmp_path)
    assert r.code == 0
    if fmt == "json":
        assert json.loads(r.stdout) == []
    elif fmt == "sarif":
        assert json.loads(r.stdout)["runs"][0]["results"] == []
    else:
        assert r.stdout == ""
    assert r.stderr == "checked 1 file: no problems\n"


def test_machine_output_is_utf8_whatever_the_locale(tmp_path: Path) -> None:
    _write(tmp_path, "wide.luma", "schema 名前 {\n}\n")
    r = luma("check", "wide.luma", "--format", "json", cwd=tmp_path,
             env={"PYTHONIOENCODING": "ascii", "LC_ALL": "C", "LANG": "C"})
    assert r.code == 1
    (item,) = json.loads(r.stdout_bytes.decode("utf-8"))
    assert item["message"] == "unexpected character '名'"
    assert "Traceback" not in r.stderr


# --------------------------------------------------------------------------------- exit codes


def test_a_path_that_does_not_exist_is_a_usage_error(run) -> None:
    r = run("check", "no/such/file.luma")
    assert r.code == 2
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0].startswith("usage: luma check")
    assert lines[-1] == "luma check: error: path does not exist: no/such/file.luma"


@pytest.mark.parametrize("args, message", [
    (["check", "--bogus"], "luma check: error: unknown option '--bogus'"),
    (["check", "--strct"], "luma check: error: unknown option '--strct' (did you mean '--strict'?)"),
    (["check", "--format", "xml"], "luma check: error: argument --format: invalid choice: 'xml' "
                                   "(choose from 'text', 'json', 'github', 'sarif')"),
    (["check", "--color", "sometimes"], "luma check: error: argument --color: invalid choice: "
                                        "'sometimes' (choose from 'never', 'always', 'auto')"),
    (["check", "--tool-module", "missing_tools.py", SYNTAX],
     "luma check: error: path does not exist: missing_tools.py"),
    (["check", "--tool-module", SYNTAX, SYNTAX],
     f"luma check: error: tool module is not a file: {SYNTAX}"),
])
def test_bad_command_lines_exit_2_with_one_clean_line_and_the_usage(
        run, args: list[str], message: str) -> None:
    r = run(*args)
    assert r.code == 2
    assert r.stdout == ""
    assert r.stderr.startswith("usage: luma check")
    assert r.stderr.splitlines()[-1] == message
    assert "Traceback" not in r.stderr


def test_a_file_named_twice_is_checked_once(run) -> None:
    r = run("check", FIELD_ERROR, SYNTAX, "./" + FIELD_ERROR, "--format", "json")
    assert [d["file"] for d in json.loads(r.stdout)] == [
        FIELD_ERROR, f"{SYNTAX}/param_without_colon.luma", f"{SYNTAX}/unclosed_string.luma"]
    assert r.stderr == "checked 3 files: 3 errors\n"


def test_options_may_come_between_paths(run) -> None:
    r = run("check", FIELD_ERROR, "--format", "json", UNCLOSED)
    assert r.code == 1
    assert [d["file"] for d in json.loads(r.stdout)] == [FIELD_ERROR, UNCLOSED]


def test_a_folder_without_luma_files_is_not_an_error(run, tmp_path: Path) -> None:
    _write(tmp_path, "readme.txt", "nothing here")
    r = run("check", str(tmp_path))
    assert r.code == 0
    assert r.stdout == ""
    assert r.stderr == f"luma check: warning: no .luma files found in {tmp_path}\n"


def test_strict_turns_warnings_into_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Exit codes for warnings, with the front end answering one warning for any file."""
    import luma.compile
    from luma.cli import main
    from luma.syntax.diagnostics import Diagnostic
    from luma.syntax.source import SourceFile, Span

    text = "schema Result {\n  ok: bool\n}\n"
    path = _write(tmp_path, "w.luma", text)

    def one_warning(p: str | Path) -> luma.compile.CheckedFile:
        source = SourceFile(str(p), text)
        return luma.compile.CheckedFile(source, None, [
            Diagnostic("warning", "W003", "Schema 'Result' is declared but never used.",
                       Span(str(p), 7, 13))])

    monkeypatch.setattr(luma.compile, "check_file", one_warning)
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr()
    assert f"{path}:1:8: warning[W003]: Schema 'Result' is declared but never used." in out.err
    assert out.err.endswith("checked 1 file: 1 warning\n")
    assert main(["check", str(path), "--strict"]) == 1


# ------------------------------------------------------------------------------------- colour


def test_no_colour_when_piped_and_colour_on_request(run) -> None:
    assert "\x1b[" not in run("check", FIELD_ERROR).stderr
    coloured = run("check", FIELD_ERROR, "--color", "always").stderr
    assert "\x1b[1;31merror[E001]\x1b[0m" in coloured
    assert "\x1b[1;31m^^^^\x1b[0m" in coloured
    # An explicit --color always wins over NO_COLOR; --color never wins over a terminal.
    assert "\x1b[" in run("check", FIELD_ERROR, "--color", "always", env={"NO_COLOR": "1"}).stderr


def _stderr_on_a_terminal(*args: str, env: dict[str, str]) -> str:
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    environ.update(env)
    received, child = on_a_terminal(list(args), environ)
    child.wait(timeout=30)
    return received.decode("utf-8", errors="replace")


def test_colour_on_a_terminal_unless_no_color_or_never() -> None:
    assert "\x1b[1;31m" in _stderr_on_a_terminal("check", FIELD_ERROR, env={})
    assert "\x1b[" not in _stderr_on_a_terminal("check", FIELD_ERROR, env={"NO_COLOR": "1"})
    assert "\x1b[" not in _stderr_on_a_terminal("check", FIELD_ERROR, "--color", "never", env={})
    assert "\x1b[" not in _stderr_on_a_terminal("check", FIELD_ERROR, env={"TERM": "dumb"})


# ------------------------------------------------------------------------------- bad inputs

BAD_INPUTS = {
    "garbage.luma": bytes(range(256)) * 3 + b"\x00\xff\xfe schema {",
    "empty.luma": b"",
    "latin1.luma": "schema Caf\u00e9 {\n  x: int\n}\n".encode("latin-1"),
    "nul.luma": b"schema A {\x00}\n",
    "only_brace.luma": b"}",
    "deep.luma": b"x = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n",
}


@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif"])
def test_no_traceback_for_bad_inputs(tmp_path: Path, fmt: str) -> None:
    for name, data in BAD_INPUTS.items():
        _write(tmp_path, name, data)
    _write(tmp_path, "no_luma_here/readme.md", "# nothing")
    for target in ["garbage.luma", "no_luma_here", "."]:  # "." holds every bad input
        r = luma("check", target, "--format", fmt, cwd=tmp_path)
        assert "Traceback" not in r.stdout + r.stderr, (target, r.stderr)
        assert "internal error" not in r.stderr, (target, r.stderr)
        assert r.code in (0, 1), (target, r.code, r.stderr)
        if fmt in ("json", "sarif"):
            json.loads(r.stdout)


def test_bad_inputs_get_worded_diagnostics(tmp_path: Path) -> None:
    _write(tmp_path, "latin1.luma", BAD_INPUTS["latin1.luma"])
    _write(tmp_path, "garbage.luma", BAD_INPUTS["garbage.luma"])
    _write(tmp_path, "empty.luma", b"")
    r = luma("check", "latin1.luma", cwd=tmp_path)
    assert r.code == 1
    assert "latin1.luma:1:11: error[E001]: the file is not valid UTF-8 text" in r.stderr
    r = luma("check", "garbage.luma", cwd=tmp_path)
    assert r.code == 1
    assert "error[E001]" in r.stderr
    # Control characters of a binary file are shown as symbols, never sent to the terminal.
    snippet = r.stderr.split("\n", 1)[1]
    assert not any(ch in snippet for ch in "\x00\x07\x1b\x08\r")
    assert luma("check", "empty.luma", cwd=tmp_path).code == 0


# ----------------------------------------------------------------------------------- running


def test_running_a_program_prints_its_result_as_json(run, tmp_path: Path) -> None:
    _write(tmp_path, "prog.luma", CLEAN)
    for args in (["prog.luma"], ["run", "prog.luma"]):
        r = run(*args, cwd=tmp_path)
        assert (r.code, r.stdout, r.stderr) == (0, "3\n", "")


def test_arguments_for_top_level_statements_are_refused(run, tmp_path: Path) -> None:
    _write(tmp_path, "prog.luma", CLEAN)
    r = run("prog.luma", "--arg", "x=1", cwd=tmp_path)
    assert r.code == 2 and r.stdout == ""
    assert r.stderr == ("error: --input/--arg give arguments to an agent method, but this program "
                        "runs its top-level statements; add --agent NAME\n")


def test_a_program_that_does_not_compile_exits_2_with_its_diagnostics(run) -> None:
    r = run("run", FIELD_ERROR)
    assert r.code == 2
    assert r.stdout == ""
    assert f"{FIELD_ERROR}:2:6: error[E001]: expected ':' after the field name 'ok'" in r.stderr
    assert r.stderr.endswith(f"error: {FIELD_ERROR} did not compile: 1 error\n")


@pytest.mark.parametrize("args, message", [
    (["prog.luma", "--arg", "novalue"],
     "luma: error: argument --arg: expected KEY=VALUE, got 'novalue'"),
    (["prog.luma", "--record", "a.json", "--replay", "b.json"],
     "luma: error: argument --replay: not allowed with argument --record"),
    (["missing.luma"], "luma: error: program does not exist: missing.luma"),
    (["chekc"], "luma: error: unknown command 'chekc' (did you mean 'luma check'?)"),
    (["run"], "luma run: error: the following arguments are required: PROGRAM.luma"),
])
def test_run_command_line_errors(run, tmp_path: Path, args: list[str], message: str) -> None:
    _write(tmp_path, "prog.luma", CLEAN)
    r = run(*args, cwd=tmp_path)
    assert r.code == 2
    assert r.stderr.startswith("usage: luma")
    assert r.stderr.splitlines()[-1] == message


def test_run_accepts_every_documented_option(tmp_path: Path) -> None:
    _write(tmp_path, "prog.luma", CLEAN)
    r = luma("prog.luma", "--tool-module", "t.py", "--tool-module", "u.py", "--config", "c.json",
             "--agent", "A", "--fn", "go", "--input", "{}", "--arg", "k=v", "--model", "M",
             "--trace", "t.jsonl", "--record", "r.json", "-v", "-q",
             "--generate-tool-types", "types.py", "--color", "never", cwd=tmp_path)
    # --generate-tool-types writes the types and exits before anything else is looked at
    assert (r.code, r.stdout, r.stderr) == (0, "", "wrote types.py\n")
    assert (tmp_path / "types.py").read_text().startswith("# Generated by luma from prog.luma.")


def test_help_version_and_no_arguments(run) -> None:
    r = run()
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.startswith("usage: luma check [PATH ...] | luma PROGRAM.luma")
    r = run("--help")
    assert r.code == 0 and "luma check [PATH ...]" in r.stdout
    r = run("check", "--help")
    assert r.code == 0 and "--tool-module PATH" in r.stdout
    r = run("--version")
    assert r.code == 0 and r.stdout == "luma 0.1.0\n"


def test_check_path_does_not_import_heavy_libraries() -> None:
    code = ("import sys\nfrom luma.cli import main\n"
            f"main(['check', {FIELD_ERROR!r}])\n"
            "print(' '.join(m for m in ('rich', 'httpx', 'jsonschema', 'pydantic', "
            "'luma.runtime.modules')"
            " if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "\n"


def test_checking_a_program_without_patterns_does_not_load_the_pattern_analysis() -> None:
    code = ("import sys\nfrom luma.cli import main\n"
            "main(['check', 'examples/quickstart.luma'])\n"
            "print('luma.schema.patterns' in sys.modules, 'luma.schema.validate' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "False True\n"
