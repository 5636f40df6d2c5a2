"""``luma check --config`` and ``--exclude``: the config a run would read is checked for the
contexts the tools need (E046) and for its tool modules; globs leave files and folders out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runner import luma

PROGRAM = """schema Database {
  user: string
  port: int
  tls?: bool
}
schema Customer {
  id: string
}
tool find_customer(id: string) -> Customer {
  description: "Look a customer up."
  needs db: Database
}
tool calculate(a: int) -> Customer {
  description: "No needs."
}
"""

GOOD_CONTEXT = {"user": {"env": "DB_USER"}, "port": {"env": "DB_PORT", "parse": "integer"}}


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _diagnostics(stdout: str) -> list[tuple[str, int, str, str, str | None]]:
    return [(Path(d["file"]).name, d["line"], d["code"], d["message"], d["hint"])
            for d in json.loads(stdout)]


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    _write(tmp_path, "prog.luma", PROGRAM)
    return tmp_path


def test_a_context_absent_from_the_given_config_is_an_error(project: Path) -> None:
    _write(project, "conf/prod.json", json.dumps({"tool_contexts": {"cache": {}}}))
    r = luma("check", "prog.luma", "--config", "conf/prod.json", "--format", "json",
             cwd=project)
    assert r.code == 1
    assert _diagnostics(r.stdout) == [(
        "prog.luma", 11, "E046", "Tool 'find_customer' needs context 'db', which tool_contexts "
        "of prod.json does not configure.",
        'add "db" to tool_contexts in prod.json, with the environment variable of each field')]


def test_the_text_report_points_at_the_needs_line(project: Path) -> None:
    _write(project, "prod.json", "{}")
    r = luma("check", "prog.luma", "--config", "prod.json", cwd=project)
    assert r.code == 1
    assert r.stderr.startswith(
        "prog.luma:11:3: error[E046]: Tool 'find_customer' needs context 'db', which "
        "tool_contexts of prod.json does not configure.\n   |\n11 |   needs db: Database\n"
        "   |   ^^^^^^^^^^^^^^^^^^\n")
    assert r.stderr.endswith("checked 1 file: 1 error\n")


def test_a_close_context_name_is_suggested(project: Path) -> None:
    _write(project, "prod.json", json.dumps({"tool_contexts": {"dbs": GOOD_CONTEXT}}))
    r = luma("check", "prog.luma", "--config", "prod.json", "--format", "json", cwd=project)
    assert [d[4] for d in _diagnostics(r.stdout)] == ["did you mean 'dbs'?"]


def test_the_config_beside_the_program_is_checked_without_the_option(project: Path) -> None:
    _write(project, "luma.config.json", json.dumps({"default_model": "X"}))
    r = luma("check", "prog.luma", "--format", "json", cwd=project)
    assert r.code == 1
    assert [d[2:4] for d in _diagnostics(r.stdout)] == [
        ("E046", "Tool 'find_customer' needs context 'db', which tool_contexts of "
                 "luma.config.json does not configure.")]


def test_a_configured_context_passes(project: Path) -> None:
    _write(project, "prod.json", json.dumps({"tool_contexts": {"db": GOOD_CONTEXT}}))
    r = luma("check", "prog.luma", "--config", "prod.json", cwd=project)
    assert (r.code, r.stderr) == (0, "checked 1 file: no problems\n")


def test_without_a_config_needs_are_not_checked(project: Path) -> None:
    r = luma("check", "prog.luma", cwd=project)
    assert (r.code, r.stderr) == (0, "checked 1 file: no problems\n")


def test_a_required_field_missing_and_a_parse_that_cannot_fit_are_errors(project: Path) -> None:
    context = {"user": {"env": "DB_USER", "parse": "integer"}, "tls": {"env": "DB_TLS"}}
    _write(project, "prod.json", json.dumps({"tool_contexts": {"db": context}}))
    r = luma("check", "prog.luma", "--config", "prod.json", "--format", "json", cwd=project)
    assert r.code == 1
    assert _diagnostics(r.stdout) == [
        ("prog.luma", 11, "E046", "Field 'user' of context 'db' is read with parse \"integer\", "
         "which never gives the string that schema 'Database' declares.",
         'set "parse": "string" for tool_contexts.db.user in prod.json'),
        ("prog.luma", 11, "E046", "Context 'db' in tool_contexts of prod.json has no field "
         "'port', which schema 'Database' of tool 'find_customer' requires.",
         'add "port": {"env": "..."} to tool_contexts.db'),
        ("prog.luma", 11, "E046", "Field 'tls' of context 'db' is read with parse \"string\", "
         "which never gives the bool that schema 'Database' declares.",
         'set "parse": "boolean" for tool_contexts.db.tls in prod.json'),
    ]


def test_json_and_number_parses_fit_where_they_can(project: Path) -> None:
    context = {"user": {"env": "DB_USER", "parse": "json"},
               "port": {"env": "DB_PORT", "parse": "number"}}
    _write(project, "prod.json", json.dumps({"tool_contexts": {"db": context}}))
    r = luma("check", "prog.luma", "--config", "prod.json", cwd=project)
    assert (r.code, r.stderr) == (0, "checked 1 file: no problems\n")


def test_a_config_a_run_would_refuse_is_reported(project: Path) -> None:
    _write(project, "prod.json", json.dumps({"tool_contexts": {"db": GOOD_CONTEXT},
                                             "defualt_model": "X"}))
    r = luma("check", "prog.luma", "--config", "prod.json", "--format", "json", cwd=project)
    assert r.code == 1
    assert [d[:4] for d in _diagnostics(r.stdout)] == [
        ("prod.json", 1, "E042", "prod.json: defualt_model: unknown key; did you mean "
                                 "'default_model'?")]


def test_the_given_config_replaces_the_one_beside_the_program(project: Path) -> None:
    _write(project, "luma.config.json", "{ broken")
    _write(project, "prod.json", json.dumps({"tool_contexts": {"db": GOOD_CONTEXT}}))
    r = luma("check", "prog.luma", "--config", "prod.json", cwd=project)
    assert (r.code, r.stderr) == (0, "checked 1 file: no problems\n")


def test_the_given_configs_tool_modules_are_relative_to_the_program(project: Path) -> None:
    # As a run resolves them: a tool module path is relative to the program's folder.
    _write(project, "tools.py", "def find_customer(input):\n    return {'id': input['id']}\n")
    config = {"tool_modules": ["./tools.py"], "tool_contexts": {"db": GOOD_CONTEXT}}
    _write(project, "conf/prod.json", json.dumps(config, indent=2))
    r = luma("check", "prog.luma", "--config", "conf/prod.json", "--format", "json",
             cwd=project)
    assert [d[2:5] for d in _diagnostics(r.stdout)] == [
        ("E040", "'calculate' is not registered in the tool registry.",
         "define a function 'calculate' in a tool module, or add it to the module's "
         "luma_tools dict")]
    (project / "tools.py").unlink()
    r = luma("check", "prog.luma", "--config", "conf/prod.json", "--format", "json",
             cwd=project)
    assert [d[:5] for d in _diagnostics(r.stdout)] == [
        ("prod.json", 3, "E041", "Tool module './tools.py' (tool_modules[0]) does not exist.",
         "tool_modules paths are relative to the program's folder")]


def test_a_config_that_does_not_exist_is_a_usage_error(project: Path) -> None:
    r = luma("check", "prog.luma", "--config", "nope.json", cwd=project)
    assert r.code == 2
    assert r.stderr.endswith("luma check: error: config does not exist: nope.json\n")
    r = luma("check", "prog.luma", "--config", ".", cwd=project)
    assert r.code == 2
    assert r.stderr.endswith("luma check: error: config is not a file: .\n")


# ---------------------------------------------------------------------------------- exclude

BROKEN = 'tool f() -> R {\n  description: "x"\n}\n'


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    _write(tmp_path, "src/good.luma", 'x = "ok"\n')
    _write(tmp_path, "src/broken/bad.luma", BROKEN)
    _write(tmp_path, "src/deep/broken/worse.luma", BROKEN)
    _write(tmp_path, "src/draft.wip.luma", BROKEN)
    return tmp_path


def _checked(r_stderr: str) -> str:
    return r_stderr.splitlines()[-1]


def test_exclude_a_folder_by_path(tree: Path) -> None:
    r = luma("check", "src", "--exclude", "src/broken", "--exclude", "*.wip.luma",
             "--format", "json", cwd=tree)
    assert sorted({d[0] for d in _diagnostics(r.stdout)}) == ["worse.luma"]
    assert _checked(r.stderr) == "checked 2 files: 1 error"


def test_exclude_by_name_anywhere(tree: Path) -> None:
    r = luma("check", "src", "--exclude", "broken/", "--exclude", "draft.*", cwd=tree)
    assert (r.code, r.stderr) == (0, "checked 1 file: no problems\n")


def test_exclude_with_a_dot_slash_and_a_path_given_from_elsewhere(tree: Path) -> None:
    r = luma("check", str(tree / "src"), "--exclude", "./src/*/broken", "--exclude",
             "src/broken", "--exclude", "*.wip.luma", cwd=tree)
    assert (r.code, r.stderr) == (0, "checked 1 file: no problems\n")


def test_exclude_applies_to_files_named_on_the_command_line(tree: Path) -> None:
    r = luma("check", "src/good.luma", "src/broken/bad.luma", "--exclude", "broken", cwd=tree)
    assert (r.code, r.stderr) == (0, "checked 1 file: no problems\n")


def test_excluding_everything_warns(tree: Path) -> None:
    r = luma("check", "src", "--exclude", "src", cwd=tree)
    assert (r.code, r.stderr) == (0, "luma check: warning: no .luma files found in src\n")
