"""``luma check --tool-module`` and ``luma.config.json``: tools without a handler, modules that do
not load, export shapes and conflicts — reported as diagnostics, never as a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runner import luma
from luma.runtime.modules import (
    TOP_LEVEL_EXPORT, ToolModuleError, ToolRegistry, config_tool_modules, load_registry,
    load_tool_module,
)

PROGRAM = """schema Sum {
  result: int
}
schema Stats {
  words: int
}
tool calculate(a: int, b: int) -> Sum {
  description: "adds two numbers"
}
tool text_stats(text: string) -> Stats {
  description: "counts words"
}
"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _errors(stdout: str) -> list[tuple[str, int, str, str]]:
    """(file name, line, code, message) of each error in a JSON report."""
    return [(Path(d["file"]).name, d["line"], d["code"], d["message"])
            for d in json.loads(stdout) if d["severity"] == "error"]


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    _write(tmp_path, "prog.luma", PROGRAM)
    return tmp_path


# ------------------------------------------------------------------------------ via the CLI


def test_a_tool_without_a_handler_is_reported(project: Path) -> None:
    _write(project, "tools.py", "def calculate(input, signal=None, needs=None):\n"
                                "    return {'result': input['a'] + input['b']}\n")
    r = luma("check", "prog.luma", "--tool-module", "tools.py", cwd=project)
    assert r.code == 1
    assert "prog.luma:10:6: error[E040]: 'text_stats' is not registered in the tool registry.\n" \
        in r.stderr
    assert "calculate' is not registered" not in r.stderr
    assert "10 | tool text_stats(text: string) -> Stats {\n   |      ^^^^^^^^^^\n" in r.stderr


def test_every_tool_found_in_several_modules_is_clean(project: Path) -> None:
    _write(project, "a.py", "def calculate(input):\n    return {'result': 0}\n")
    _write(project, "b.py", "async def text_stats(input):\n    return {'words': 0}\n")
    r = luma("check", "prog.luma", "--tool-module", "a.py", "--tool-module", "b.py",
             "--format", "json", cwd=project)
    assert _errors(r.stdout) == []
    assert r.code == 0


def test_without_tool_modules_handlers_are_not_checked(project: Path) -> None:
    r = luma("check", "prog.luma", "--format", "json", cwd=project)
    assert _errors(r.stdout) == []


def test_a_module_that_fails_to_import_is_an_error_naming_it(project: Path) -> None:
    _write(project, "broken.py", "import os\n\nraise RuntimeError('no database configured')\n")
    r = luma("check", "prog.luma", "--tool-module", "broken.py", cwd=project)
    assert r.code == 1
    assert ("broken.py:3:1: error[E041]: Tool module 'broken.py' could not be loaded: "
            "RuntimeError: no database configured\n") in r.stderr
    assert "Traceback" not in r.stderr
    # Its tools are not also reported as unregistered: the load error says why.
    assert "E040" not in r.stderr


@pytest.mark.parametrize("source, expected", [
    ("def f(:\n    pass\n", "broken.py:1:1: error[E041]: Tool module 'broken.py' could not be "
                             "loaded: SyntaxError: invalid syntax"),
    ("import no_such_package_for_luma\n",
     "broken.py:1:1: error[E041]: Tool module 'broken.py' could not be loaded: "
     "ModuleNotFoundError: No module named 'no_such_package_for_luma'"),
    ("import sys\nsys.exit(3)\n", "broken.py:2:1: error[E041]: Tool module 'broken.py' could "
                                  "not be loaded: the module called exit(3) while loading"),
])
def test_import_failures_are_one_line(project: Path, source: str, expected: str) -> None:
    _write(project, "broken.py", source)
    for fmt in ("text", "json", "sarif", "github"):
        r = luma("check", "prog.luma", "--tool-module", "broken.py", "--format", fmt, cwd=project)
        assert r.code == 1
        assert "Traceback" not in r.stdout + r.stderr
    r = luma("check", "prog.luma", "--tool-module", "broken.py", cwd=project)
    assert expected in r.stderr


def test_module_output_while_loading_goes_to_stderr(project: Path) -> None:
    _write(project, "tools.py", "print('connecting...')\n"
                                "def calculate(input): ...\ndef text_stats(input): ...\n")
    r = luma("check", "prog.luma", "--tool-module", "tools.py", "--format", "json", cwd=project)
    assert _errors(r.stdout) == []  # stdout is still a JSON report and nothing else
    assert "connecting..." in r.stderr


def test_a_conflict_across_modules_is_reported(project: Path) -> None:
    _write(project, "a.py", "def calculate(input): ...\ndef text_stats(input): ...\n")
    _write(project, "b.py", "luma_tools = {'calculate': lambda input: None}\n")
    r = luma("check", "prog.luma", "--tool-module", "a.py", "--tool-module", "b.py",
             "--format", "json", cwd=project)
    assert r.code == 1
    assert _errors(r.stdout) == [("b.py", 1, "E041", "Tool registry conflict: calculate.")]


def test_the_same_module_twice_is_loaded_once(project: Path) -> None:
    _write(project, "tools.py", "def calculate(input): ...\ndef text_stats(input): ...\n")
    _write(project, "luma.config.json", '{"tool_modules": ["./tools.py"]}')
    r = luma("check", "prog.luma", "--tool-module", "tools.py", "--tool-module", "./tools.py",
             "--format", "json", cwd=project)
    assert _errors(r.stdout) == []


def test_a_module_used_by_several_programs_is_reported_once(tmp_path: Path) -> None:
    _write(tmp_path, "one.luma", PROGRAM)
    _write(tmp_path, "two.luma", PROGRAM)
    _write(tmp_path, "broken.py", "raise ValueError('bad')\n")
    r = luma("check", ".", "--tool-module", "broken.py", "--format", "json", cwd=tmp_path)
    assert _errors(r.stdout) == [
        ("broken.py", 1, "E041", "Tool module 'broken.py' could not be loaded: ValueError: bad")]


# --------------------------------------------------------------------------- the config file


def test_config_beside_the_program_names_its_tool_modules(project: Path) -> None:
    _write(project, "lib/calc.py", "def calculate(input): ...\n")
    _write(project, "stats.py", "tools = {'text_stats': lambda input: None}\n")
    _write(project, "luma.config.json", json.dumps({
        "tool_modules": ["./lib/calc.py", {"path": "stats.py", "version": "1.0.0"}],
        "default_model": "ignored here",
    }))
    r = luma("check", str(project / "prog.luma"), "--format", "json")
    assert _errors(r.stdout) == []
    assert r.code == 0
    _write(project, "stats.py", "tools = {}\n")
    r = luma("check", str(project / "prog.luma"), "--format", "json")
    assert _errors(r.stdout) == [
        ("prog.luma", 10, "E040", "'text_stats' is not registered in the tool registry.")]


def test_a_missing_module_in_the_config_points_at_its_entry(project: Path) -> None:
    _write(project, "luma.config.json", '{\n  "tool_modules": [\n    "./gone.py"\n  ]\n}\n')
    r = luma("check", "prog.luma", cwd=project)
    assert r.code == 1
    assert ("luma.config.json:3:5: error[E041]: Tool module './gone.py' (tool_modules[0]) does "
            "not exist.\n") in r.stderr
    assert "  = hint: tool_modules paths are relative to luma.config.json's folder\n" in r.stderr


def test_a_config_with_a_byte_order_mark_is_located_correctly(project: Path) -> None:
    (project / "luma.config.json").write_bytes(
        '\ufeff{"tool_modules": ["./gone.py"]}'.encode("utf-8"))
    r = luma("check", "prog.luma", cwd=project)
    assert ("luma.config.json:1:19: error[E041]: Tool module './gone.py' (tool_modules[0]) "
            "does not exist.\n") in r.stderr
    assert "1 | {\"tool_modules\": [\"./gone.py\"]}\n  |                   ^^^^^^^^^^^\n" in r.stderr


@pytest.mark.parametrize("text, expected", [
    ('{"tool_modules": ["a.py",]}',
     ("luma.config.json", 1, "E042", "luma.config.json is not valid JSON: Expecting value.")),
    ('[1, 2]', ("luma.config.json", 1, "E042", "luma.config.json must hold a JSON object.")),
    ('{"tool_modules": 3}',
     ("luma.config.json", 1, "E042",
      'luma.config.json: tool_modules must be a list of paths or {"path": ...} objects.')),
    ('{"tool_modules": [{"version": "1"}]}',
     ("luma.config.json", 1, "E042",
      "luma.config.json: tool_modules[0].path must be a non-empty path string.")),
])
def test_a_bad_config_is_an_error_in_the_config(project: Path, text: str,
                                                expected: tuple[str, int, str, str]) -> None:
    _write(project, "luma.config.json", text)
    r = luma("check", "prog.luma", "--format", "json", cwd=project)
    assert r.code == 1
    assert _errors(r.stdout) == [expected]


# ------------------------------------------------------------------------------- the loader


def test_export_order_luma_tools_then_tools_then_default(tmp_path: Path) -> None:
    both = _write(tmp_path, "both.py", "def own(input): ...\n"
                                      "luma_tools = {'first': own}\n"
                                      "tools = {'second': own}\n")
    assert list(load_tool_module(both).handlers) == ["first"]
    assert load_tool_module(both).export == "luma_tools"
    only_default = _write(tmp_path, "dflt.py", "tools = ['not', 'a', 'dict']\n"
                                               "default = {'third': print}\n")
    module = load_tool_module(only_default)
    assert (module.export, list(module.handlers)) == ("default", ["third"])


def test_top_level_functions_defined_in_the_module_are_handlers(tmp_path: Path) -> None:
    path = _write(tmp_path, "plain.py", "import json\nfrom os.path import join\n"
                                        "class Helper:\n    pass\n"
                                        "LIMIT = 3\n"
                                        "def _private(input): ...\n"
                                        "def calculate(input): ...\n"
                                        "async def text_stats(input): ...\n")
    module = load_tool_module(path)
    assert module.export == TOP_LEVEL_EXPORT
    assert sorted(module.handlers) == ["calculate", "text_stats"]


@pytest.mark.parametrize("source, message", [
    ("luma_tools = {'calculate': 3}\n",
     "Tool module '{p}' export 'luma_tools' maps 'calculate' to a value that is not callable "
     "(int)."),
    ("luma_tools = [print]\n",
     "Tool module '{p}' exports 'luma_tools' as a list value; it must be a dict of tool names "
     "to handlers."),
    ("tools = {1: print}\n", "Tool module '{p}' export 'tools' has a key that is not a tool "
                             "name: 1."),
])
def test_exports_that_are_not_handlers_fail_naming_the_export(tmp_path: Path, source: str,
                                                              message: str) -> None:
    path = _write(tmp_path, "m.py", "\n" + source)
    with pytest.raises(ToolModuleError) as caught:
        load_tool_module(path)
    assert caught.value.message == message.format(p=path)
    assert caught.value.line == 2


def test_registry_conflicts_and_partial_failures(tmp_path: Path) -> None:
    a = _write(tmp_path, "a.py", "def calculate(input): ...\n")
    b = _write(tmp_path, "b.py", "def calculate(input): ...\ndef other(input): ...\n")
    c = _write(tmp_path, "c.py", "def text_stats(input): ...\n")
    registry, errors = load_registry([a, b, str(tmp_path / "none.py"), c])
    assert sorted(registry.handlers) == ["calculate", "text_stats"]
    assert registry.origins["calculate"] == str(a)
    assert [e.message for e in errors] == [
        "Tool registry conflict: calculate.", f"Tool module '{tmp_path / 'none.py'}' does not exist."]
    assert "other" not in registry  # a conflicting module registers nothing
    assert isinstance(registry, ToolRegistry)


def test_config_tool_modules_resolves_against_the_config_folder(tmp_path: Path) -> None:
    config = _write(tmp_path, "sub/luma.config.json",
                    '{"tool_modules": ["./t.py", {"path": "lib/u.py"}]}')
    entries = config_tool_modules(config)
    assert [(e.written, e.path, e.key) for e in entries] == [
        ("./t.py", tmp_path / "sub" / "t.py", "tool_modules[0]"),
        ("lib/u.py", tmp_path / "sub" / "lib" / "u.py", "tool_modules[1]"),
    ]


def test_check_applies_the_manifest_before_any_module_code_runs(tmp_path: Path) -> None:
    import base64
    import hashlib

    marker = tmp_path / "ran.txt"
    module = tmp_path / "tools.py"
    module.write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                      "def calculate(input):\n    return {'result': 1}\n")
    wrong = "sha256-" + base64.b64encode(hashlib.sha256(b"something else").digest()).decode()
    actual = "sha256-" + base64.b64encode(hashlib.sha256(module.read_bytes()).digest()).decode()
    (tmp_path / "luma.config.json").write_text(json.dumps(
        {"tool_modules": [{"path": "./tools.py", "integrity": wrong}]}))
    (tmp_path / "prog.luma").write_text(
        'schema R { result: float }\ntool calculate() -> R { description: "d" }\n'
        'x = tool calculate({})\n')
    r = luma("check", "prog.luma", cwd=tmp_path)
    assert r.code == 1
    assert (f"error[E041]: Tool module './tools.py' (tool_modules[0]) does not match its "
            f"integrity: the manifest says {wrong}, the file is {actual}.") in r.stderr
    assert not marker.exists()  # refused before its code ran
    (tmp_path / "luma.config.json").write_text(json.dumps(
        {"tool_modules": [{"path": "./tools.py", "integrity": actual}]}))
    r = luma("check", "prog.luma", cwd=tmp_path)
    assert r.code == 0, r.stderr
    assert marker.exists()


@pytest.mark.parametrize("name", ["lumaTools", "LumaTools", "LUMA_TOOLS", "luma_tool"])
def test_a_misnamed_export_is_named_with_the_right_name(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, "m.py", "def add(input):\n    return input\n\n"
                                    f"{name} = {{'calculate': add}}\n")
    with pytest.raises(ToolModuleError) as caught:
        load_tool_module(path)
    assert caught.value.message == (
        f"Tool module '{path}' defines '{name}', which Luma does not read: the dict of handlers "
        "must be named 'luma_tools'.")
    assert caught.value.line == 4


def test_a_misnamed_export_is_an_error_of_luma_check(project: Path) -> None:
    _write(project, "tools.py", "def _calc(input):\n    return input\n\n"
                                "lumaTools = {'calculate': _calc, 'text_stats': _calc}\n")
    r = luma("check", "prog.luma", "--tool-module", "tools.py", cwd=project)
    assert r.code == 1
    assert ("tools.py:4:1: error[E041]: Tool module 'tools.py' defines 'lumaTools', which Luma "
            "does not read: the dict of handlers must be named 'luma_tools'.\n") in r.stderr
    assert "E040" not in r.stderr


def test_a_dict_of_handlers_beside_luma_tools_is_left_alone(tmp_path: Path) -> None:
    path = _write(tmp_path, "m.py", "def add(input):\n    return input\n\n"
                                    "luma_tools = {'calculate': add}\nlumaTools = {'x': add}\n")
    assert sorted(load_tool_module(path).handlers) == ["calculate"]
