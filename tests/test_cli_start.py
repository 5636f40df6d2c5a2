"""What the ``luma`` command checks before a program runs: the command line, the config file,
the models' API keys; and what ``luma export`` offers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runner import luma

KEY_ENV = "LUMA_TEST_KEY_THAT_IS_NOT_SET"

MODELS = f"""\
schema Saved {{ ok: bool }}

model Remote {{ provider: "openai", name: "gpt-test", api_key_env: "{KEY_ENV}",
               base_url: "http://127.0.0.1:9/v1" }}
model Other {{ provider: "anthropic", name: "claude-test", api_key_env: "{KEY_ENV}_2" }}

tool save(x: string) -> Saved {{
  description: "Save x. Writes a file."
  side_effects: "write"
}}

agent Writer {{
  model: Remote
  tools: [save]
  fn run() -> string {{
    tool save({{ x: "before the ask" }})
    ask "Say hi." -> string
  }}
}}

agent Caller {{
  model: Other
  fn run() -> string {{
    Helper.go()
  }}
}}

agent Helper {{
  model: Remote
  fn go() -> string {{
    ask "Say hi." -> string
  }}
}}

agent Offline {{
  tools: [save]
  fn run() -> string {{
    tool save({{ x: "offline" }})
    "done"
  }}
}}

agent Gate {{
  model: Other
  tools: [save]
  tool_policy: "approval"
  fn run() -> string {{
    "nothing"
  }}
}}
"""

SAVE_TOOLS = """\
from pathlib import Path

def save(input):
    Path("saved.txt").write_text(input["x"])
    return {"ok": True}
"""

AGENT = """\
schema Out { text: string }

agent Flow {
  fn run(text: string, extra?: any) -> Out {
    { text: text }
  }
}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models.luma").write_text(MODELS, encoding="utf-8")
    (tmp_path / "tools.py").write_text(SAVE_TOOLS, encoding="utf-8")
    (tmp_path / "agent.luma").write_text(AGENT, encoding="utf-8")
    return tmp_path


# ------------------------------------------------------------------------------ API keys


def test_a_missing_api_key_stops_the_run_before_any_tool_runs(project: Path) -> None:
    r = luma("models.luma", "--tool-module", "tools.py", "--agent", "Writer", cwd=project)
    assert (r.code, r.stdout) == (2, "")
    assert r.stderr == f"error[MODEL_AUTH]: Model 'Remote' needs an API key in {KEY_ENV}.\n"
    assert not (project / "saved.txt").exists()


def test_models_reached_through_agent_calls_are_checked_too(project: Path) -> None:
    r = luma("models.luma", "--tool-module", "tools.py", "--agent", "Caller", cwd=project)
    assert r.code == 2
    assert r.stderr == f"error[MODEL_AUTH]: Model 'Remote' needs an API key in {KEY_ENV}.\n"


def test_models_the_run_cannot_reach_need_no_key(project: Path) -> None:
    r = luma("models.luma", "--tool-module", "tools.py", "--agent", "Offline", cwd=project)
    assert (r.code, r.stderr) == (0, "")
    assert json.loads(r.stdout) == "done"
    assert (project / "saved.txt").read_text() == "offline"


def test_a_replay_needs_no_key(project: Path) -> None:
    (project / "empty.json").write_text('{"luma_recording": 1, "exchanges": []}\n')
    r = luma("models.luma", "--tool-module", "tools.py", "--agent", "Helper", "--fn", "go",
             "--replay", "empty.json", cwd=project)
    assert r.code == 1
    assert r.stderr.startswith("error[REPLAY_MISMATCH]: ")


# --------------------------------------------------------------------------- config file


def test_a_models_entry_naming_no_model_is_a_config_error(project: Path) -> None:
    (project / "conf.json").write_text(
        '{"models": {"Remtoe": {"base_url": "http://127.0.0.1:8000/v1"}}}')
    r = luma("models.luma", "--tool-module", "tools.py", "--agent", "Offline",
             "--config", "conf.json", cwd=project)
    assert (r.code, r.stdout) == (2, "")
    assert r.stderr == "error: conf.json: models.Remtoe: unknown model; did you mean 'Remote'?\n"
    assert not (project / "saved.txt").exists()
    (project / "sub").mkdir()
    (project / "sub" / "models.luma").write_text(MODELS)
    (project / "sub" / "luma.config.json").write_text('{"models": {"tset": {}}}')
    r = luma("sub/models.luma", "--tool-module", "tools.py", "--agent", "Offline", cwd=project)
    assert r.code == 2
    assert r.stderr == ("error: sub/luma.config.json: models.tset: unknown model; did you mean "
                        "'test'?\n")


def test_model_errors_name_the_config_file_given(project: Path) -> None:
    (project / "conf.json").write_text(
        '{"default_model": "Nope", "models": {"test": {"temprature": 1}}}')
    r = luma("models.luma", "--tool-module", "tools.py", "--agent", "Offline",
             "--config", "conf.json", cwd=project)
    assert r.code == 2
    assert r.stderr == (
        "error: conf.json: models.test.temprature: unknown key; did you mean 'temperature'?\n"
        "error: conf.json: default_model: there is no model named 'Nope' "
        "(models: Other, Remote, test)\n")


def test_a_config_error_never_names_a_class(project: Path) -> None:
    (project / "conf.json").write_text(
        '{"tool_contexts": {"db": {"user": "DB_USER"}, "cache": 5}}')
    r = luma("agent.luma", "--arg", "text=x", "--config", "conf.json", cwd=project)
    assert r.code == 2
    assert r.stderr == ('error: conf.json: tool_contexts.db.user: must be an object '
                        '(got "DB_USER")\n'
                        "error: conf.json: tool_contexts.cache: must be an object (got 5)\n")


def test_duplicate_keys_in_the_config_are_errors_naming_the_key(project: Path) -> None:
    (project / "conf.json").write_text(
        '{"default_model": "test",\n "models": {"test": {"temperature": 1, "temperature": 2}},'
        '\n "default_model": "Remote"}')
    r = luma("agent.luma", "--arg", "text=x", "--config", "conf.json", cwd=project)
    assert r.code == 2
    assert r.stderr == ("error: conf.json: models.test.temperature: duplicate key\n"
                        "error: conf.json: default_model: duplicate key\n")


# -------------------------------------------------------------------------- --input, --arg


def test_bad_arguments_are_a_bad_command_line(project: Path) -> None:
    r = luma("agent.luma", "--arg", "text=5", cwd=project)
    assert (r.code, r.stdout) == (2, "")
    assert r.stderr == "error[ARGUMENT_INVALID]: Flow.run.input.text: expected string, got int\n"
    r = luma("agent.luma", "--input", '{"text": "a", "nope": 1}', cwd=project)
    assert r.code == 2
    assert r.stderr == "error[ARGUMENT_INVALID]: Flow.run.input.nope: unknown argument\n"


def test_duplicate_keys_in_arguments_are_errors_naming_the_key(project: Path) -> None:
    r = luma("agent.luma", "--input", '{"text": "a", "text": "b"}', cwd=project)
    assert (r.code, r.stdout) == (2, "")
    assert r.stderr == "error: --input: duplicate key 'text'\n"
    r = luma("agent.luma", "--arg", "text=a", "--arg", 'extra={"k": [{"z": 1, "z": 2}]}',
             cwd=project)
    assert r.code == 2
    assert r.stderr == "error: --arg extra: duplicate key 'k[0].z'\n"


# ------------------------------------------------------------------------------ export


def test_export_leaves_out_a_write_tool_that_needs_approval(project: Path) -> None:
    r = luma("export", "models.luma", "--provider", "openai", "--agent", "Gate", cwd=project)
    assert (r.code, r.stderr) == (0, "")
    assert json.loads(r.stdout) == []
    r = luma("export", "models.luma", "--provider", "openai", "--agent", "Gate", cwd=project,
             env={"LUMA_APPROVED_TOOLS": "save"})
    assert r.code == 0
    assert [d["function"]["name"] for d in json.loads(r.stdout)] == ["save"]


def test_export_an_unknown_provider_is_export_invalid(project: Path) -> None:
    r = luma("export", "models.luma", "--provider", "openia", cwd=project)
    assert (r.code, r.stdout) == (2, "")
    assert r.stderr == ("error[EXPORT_INVALID]: Unknown provider 'openia'; choose one of "
                        "openai, azure, anthropic, gemini.\n")


# ----------------------------------------------------------------------- the command line


@pytest.mark.parametrize("args, last_line", [
    (["chek", "agent.luma"],
     "luma: error: unknown command 'chek' (did you mean 'luma check'?)"),
    (["--verison"], "luma: error: unknown option '--verison' (did you mean '--version'?)"),
    (["agent.luma", "--tool-modul", "x.py"],
     "luma: error: unknown option '--tool-modul' (did you mean '--tool-module'?)"),
    (["agent.luma", "extra.luma"], "luma: error: unexpected argument 'extra.luma'"),
])
def test_mistyped_command_lines(project: Path, args: list[str], last_line: str) -> None:
    r = luma(*args, cwd=project)
    assert (r.code, r.stdout) == (2, "")
    assert r.stderr.startswith("usage: luma")
    assert r.stderr.splitlines()[-1] == last_line


def test_help_command(project: Path) -> None:
    r = luma("help", "check", cwd=project)
    assert r.code == 0
    assert r.stdout.startswith("usage: luma check")
    assert r.stdout == luma("check", "--help", cwd=project).stdout
    r = luma("help", cwd=project)
    assert r.code == 0 and r.stdout == luma("--help", cwd=project).stdout
    r = luma("help", "chek", cwd=project)
    assert r.code == 2
    assert r.stderr.splitlines()[-1] == ("luma: error: unknown command 'chek' "
                                         "(did you mean 'luma check'?)")


def test_help_lists_version_and_the_environment(project: Path) -> None:
    for args in (["--help"], ["run", "--help"]):
        r = luma(*args, cwd=project)
        assert r.code == 0
        for word in ("--version", "LUMA_APPROVED_TOOLS", "LUMA_IDEMPOTENCY_KEY", "LUMA_DEBUG",
                     "NO_COLOR"):
            assert word in r.stdout, (args, word)
    assert "-q, --quiet" in luma("run", "--help", cwd=project).stdout
    r = luma("run", "--version", cwd=project)
    assert (r.code, r.stdout) == (0, "luma 0.1.0\n")


DEFAULT_MODEL = "agent B {\n  fn run() -> string {\n    ask \"hi\" -> string\n  }\n}\n"


def test_w004_is_not_shown_when_model_chooses_the_default(project: Path) -> None:
    (project / "b.luma").write_text(DEFAULT_MODEL)
    r = luma("b.luma", cwd=project)
    assert r.code == 0
    assert "warning[W004]" in r.stderr
    r = luma("b.luma", "--model", "test", cwd=project)
    assert r.code == 0
    assert r.stderr == ""


def test_quiet_hides_compile_warnings_but_not_errors(project: Path) -> None:
    (project / "b.luma").write_text(DEFAULT_MODEL)
    r = luma("b.luma", "-q", cwd=project)
    assert r.code == 0
    assert "warning[W004]" not in r.stderr
    assert json.loads(r.stdout) == "value"
    (project / "c.luma").write_text("x = \n")
    r = luma("c.luma", "--quiet", cwd=project)
    assert r.code == 2
    assert "error[" in r.stderr


def test_a_folder_as_tool_module_is_not_called_missing(project: Path) -> None:
    (project / "mods").mkdir()
    r = luma("models.luma", "--tool-module", "mods", "--agent", "Offline", cwd=project)
    assert r.code == 2
    assert r.stderr == "error: Tool module 'mods' is a folder, not a Python file.\n"
    (project / "luma.config.json").write_text('{"tool_modules": ["./mods"]}')
    r = luma("models.luma", "--agent", "Offline", cwd=project)
    assert r.code == 2
    assert r.stderr == ("error: Tool module './mods' (tool_modules[0]) is a folder, not a "
                        "Python file.\n")
    r = luma("check", "models.luma", cwd=project)
    assert r.code == 1
    assert r.stderr.startswith("luma.config.json:1:19: error[E041]: Tool module './mods' "
                               "(tool_modules[0]) is a folder, not a Python file.\n")
