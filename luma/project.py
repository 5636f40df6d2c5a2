"""``luma init``: a new project that runs at once.

The project: a program with a schema, a tool, a model and an agent with one ``ask``; its Python
tool module, typed by a generated types file; ``luma.config.json``; a test that runs the program
on the offline model; a pre-commit config running ``luma fmt --check`` and ``luma check``.
Nothing is ever overwritten: when one of these files exists, no file is written.
"""

from __future__ import annotations

import os
from pathlib import Path

PROGRAM = "main.luma"
TYPES = "tools_types.py"

_PROGRAM_TEXT = """\
// A Luma program: the contracts of the tools and the agent live here, the tools' code in tools.py.
//
//   luma main.luma --arg text="Luma keeps tool contracts typed"
//
// The model `Offline` is the built-in offline model (no key, no network): it calls each tool it
// is offered once and answers with a value made from `Summary`. For a real model, change its
// provider and name, e.g. provider: "openai" and name: "gpt-5.4-mini".

schema WordCount {
  words: int @desc("How many words the text has")
}

schema Summary {
  summary: string @desc("One sentence about the text")
  words: int @desc("How many words the text has")
}

tool count_words(text: string @desc("The text to measure")) -> WordCount {
  description: "Count the words of a text. Changes nothing."
  side_effects: "none"
}

model Offline {
  provider: "test"
}

agent Summarizer {
  model: Offline
  system: "You summarize texts. Count their words with count_words."
  tools: [count_words]

  fn run(text: string @default("Luma keeps tool contracts typed")) -> Summary {
    ask "Summarize this text: {text}" -> Summary
  }
}
"""

_TOOLS_TEXT = '''\
"""The handlers of the tools declared in main.luma.

tools_types.py is generated from main.luma; after changing a tool there, run
    luma main.luma --generate-tool-types tools_types.py
and mypy tells you which handler no longer fits its contract.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools_types import CountWordsInput, GeneratedToolModule, WordCount


def count_words(input: CountWordsInput) -> WordCount:
    return {"words": len(input["text"].split())}


luma_tools: GeneratedToolModule = {"count_words": count_words}
'''

_CONFIG_TEXT = """\
{
  "tool_modules": ["./tools.py"]
}
"""

_TEST_TEXT = '''\
"""Run the program as a user does, on the offline model: no key, no network."""

import json
import subprocess
import sys
from pathlib import Path

from tools import count_words

HERE = Path(__file__).resolve().parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "luma", str(HERE / "main.luma"), *args],
                          capture_output=True, text=True, cwd=HERE)


def test_the_agent_answers_with_a_summary() -> None:
    done = run("--arg", "text=three short words")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert set(answer) == {"summary", "words"}
    assert isinstance(answer["summary"], str) and isinstance(answer["words"], int)


def test_count_words_counts_words() -> None:
    assert count_words({"text": "three short words"}) == {"words": 3}
'''

_PRE_COMMIT_TEXT = """\
# pre-commit (https://pre-commit.com): `pre-commit install`, then every commit is checked.
repos:
  - repo: local
    hooks:
      - id: luma-fmt
        name: luma fmt --check
        entry: luma fmt --check
        language: system
        files: \\.luma$
      - id: luma-check
        name: luma check
        entry: luma check
        language: system
        files: \\.luma$
"""

FILES = (PROGRAM, "tools.py", TYPES, "luma.config.json", "test_main.py",
         ".pre-commit-config.yaml")


class InitRefused(Exception):
    """The folder already holds a file the project would write; nothing was written."""


def init_project(folder: Path) -> list[Path]:
    """Write the new project into ``folder`` (made when missing); returns the files written."""
    existing = [name for name in FILES if os.path.lexists(folder / name)]
    if existing:
        names = ", ".join(existing)
        raise InitRefused(f"{folder} already has {names}; luma init overwrites nothing, so "
                          "nothing was written (choose an empty folder: luma init DIR)")
    if folder.exists() and not folder.is_dir():
        raise InitRefused(f"{folder} is not a folder")
    texts = {PROGRAM: _PROGRAM_TEXT, "tools.py": _TOOLS_TEXT, TYPES: _types_text(),
             "luma.config.json": _CONFIG_TEXT, "test_main.py": _TEST_TEXT,
             ".pre-commit-config.yaml": _PRE_COMMIT_TEXT}
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        for name in FILES:
            path = folder / name
            # "x": made here or not at all, even if a file appeared since the check above
            with open(path, "x", encoding="utf-8", newline="\n") as f:
                written.append(path)
                f.write(texts[name])
    except OSError as exc:
        for path in written:  # only what this call made
            path.unlink(missing_ok=True)
        if isinstance(exc, FileExistsError):
            raise InitRefused(f"{exc.filename} appeared while luma init was writing; "
                              "nothing was written") from None
        raise
    return written


def _types_text() -> str:
    from luma.codegen import generate_tool_types
    from luma.compile import check_text

    checked = check_text(_PROGRAM_TEXT, PROGRAM)
    assert checked.program is not None and not checked.diagnostics, checked.diagnostics
    return generate_tool_types(checked.program, TYPES, PROGRAM)
