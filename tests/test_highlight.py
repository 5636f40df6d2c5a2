"""Highlighting: the Pygments lexer (an entry point: ``pygmentize -l luma``) and the TextMate
grammar of the VS Code extension (checked by ``vscode-tmgrammar-test``)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from node_packages import node_modules
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Error, Keyword, Name, String

from cli_runner import ROOT

VSCODE = ROOT / "editors" / "vscode"
EXAMPLES = sorted((ROOT / "examples").glob("**/*.luma"))


def _doc_blocks() -> list[str]:
    blocks = []
    for doc in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        text = doc.read_text(encoding="utf-8")
        blocks += [m.group(2) for m in re.finditer(r"^(`{3,})luma[^\n]*\n(.*?)^\1", text,
                                                     re.S | re.M)]
    return blocks


def test_the_lexer_is_found_by_name_and_by_file_name() -> None:
    assert get_lexer_by_name("luma").name == "Luma"
    assert get_lexer_for_filename("orders.luma").name == "Luma"


@pytest.mark.parametrize("text", [p.read_text(encoding="utf-8") for p in EXAMPLES] + _doc_blocks())
def test_every_example_lexes_without_an_error_token(text: str) -> None:
    tokens = list(get_lexer_by_name("luma").get_tokens(text))
    assert [v for t, v in tokens if t in Error] == []
    assert "".join(v for _, v in tokens) == (text if text.endswith("\n") else text + "\n")


def test_the_lexer_names_what_it_sees() -> None:
    text = ('schema Order { id: string @desc("x {a.b}") }\n'
            'tool get(id: string) -> Order { cache: true }\n'
            'agent A { fn run() { x = tool get({ id: "1" }) } }\n')
    tokens = [(t, v) for t, v in get_lexer_by_name("luma").get_tokens(text) if v.strip()]
    assert (Keyword.Declaration, "schema") in tokens and (Name.Class, "Order") in tokens
    assert (Name.Decorator, "desc") in tokens and (String.Interpol, "{a.b}") in tokens
    assert tokens[tokens.index((Keyword.Declaration, "tool")) + 1] == (Name.Function, "get")
    call = tokens.index((Keyword, "tool"))  # `tool get({...})` is a call, not a declaration
    assert tokens[call + 1] == (Name.Function, "get")
    assert (Keyword.Constant, "true") in tokens and (Name.Function, "run") in tokens
    assert (Keyword.Type, "string") in tokens


def test_the_lexer_names_a_test_and_its_entries() -> None:
    text = ('test "adds" {\n  mock tool stats returns { words: 2 }\n'
            '  assert x.words == 2, "two"\n  check len(calls("stats")) == 1\n}\ncheck = 1\n')
    tokens = [(t, v) for t, v in get_lexer_by_name("luma").get_tokens(text) if v.strip()]
    assert tokens[:2] == [(Keyword.Declaration, "test"), (String.Double, '"')]
    assert [(Keyword, "mock"), (Keyword, "tool"), (Name.Function, "stats"),
            (Keyword, "returns")] == tokens[tokens.index((Keyword, "mock")):][:4]
    assert (Keyword, "assert") in tokens and tokens.count((Keyword, "check")) == 1
    assert (Name, "check") in tokens  # `check = 1` assigns a variable


def test_pygmentize_highlights_a_luma_file() -> None:
    pygmentize = Path(sys.executable).parent / "pygmentize"
    done = subprocess.run([str(pygmentize), "-l", "luma", "-f", "html",
                           str(ROOT / "examples" / "quickstart.luma")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert '<span class="kd">schema</span>' in done.stdout
    assert 'class="err"' not in done.stdout


# ------------------------------------------------------------------------- the VS Code folder

def test_the_extension_names_files_that_exist() -> None:
    manifest = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
    language = manifest["contributes"]["languages"][0]
    grammar = manifest["contributes"]["grammars"][0]
    assert language["id"] == grammar["language"] == "luma"
    assert language["extensions"] == [".luma"]
    for path in (language["configuration"], grammar["path"], manifest["main"]):
        assert (VSCODE / path).is_file(), path
    assert json.loads((VSCODE / grammar["path"]).read_text(encoding="utf-8"))["scopeName"] == (
        grammar["scopeName"])
    config = json.loads((VSCODE / language["configuration"]).read_text(encoding="utf-8"))
    assert config["comments"] == {"lineComment": "//", "blockComment": ["/*", "*/"]}
    setting = manifest["contributes"]["configuration"]["properties"]["luma.server.command"]
    assert setting["default"] == ["luma", "lsp"]
    assert '"server.command", ["luma", "lsp"]' in (VSCODE / "extension.js").read_text(
        encoding="utf-8")


@pytest.fixture(scope="session")
def grammar_test() -> list[str]:
    """The command that runs the pinned ``vscode-tmgrammar-test``, installing it if needed."""
    unit = "vscode-tmgrammar-test/dist/unit.js"
    script = node_modules("the grammar tests", unit) / unit
    node = shutil.which("node")
    assert node is not None
    return [node, str(script)]


def test_the_textmate_grammar_passes_its_tests(grammar_test: list[str]) -> None:
    done = subprocess.run([*grammar_test, "-g", "syntaxes/luma.tmLanguage.json",
                           "tests/*.luma"], capture_output=True, text=True, cwd=VSCODE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "run successfuly" in done.stdout


def test_a_wrong_scope_fails_the_grammar_test(grammar_test: list[str], tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.luma"
    wrong.write_text('// SYNTAX TEST "source.luma"\nschema Order {}\n'
                     "//     ^^^^^ comment.line.luma\n", encoding="utf-8")
    done = subprocess.run([*grammar_test, "-g", str(VSCODE / "syntaxes/luma.tmLanguage.json"),
                           str(wrong)], capture_output=True, text=True)
    assert done.returncode != 0
    assert "missing required scopes: comment.line.luma" in done.stdout
