"""The documentation is tested: what docs/*.md shows is what Luma does.

1. Every ```luma block in docs/*.md parses and checks. A block with no expectation comment must
   check clean (no error, no warning). A block that shows a mistake says so with the same inline
   comments as tests/cases: ``// error[E012]: message`` on the line it concerns, or
   ``// error[E012]@+1: message`` on the line before. Then every diagnostic must be expected and
   every expectation met, message text included.
2. A fenced block whose info string names a file (```luma file=examples/cookbook/x.luma) shows
   that file exactly.
3. Every ```console block in the user docs and README.md is a transcript: each ``$ luma ...`` command runs
   (as ``python -m luma`` from the repository root, stdin not a terminal, stderr and stdout
   merged as a terminal shows them) and its output must be the lines below it. A line ``...``
   stands for any number of lines. ``$ echo $?`` shows the exit code of the command before it;
   a command without one must exit 0. ``NAME=value`` before ``luma`` sets an environment
   variable; ``2>/dev/null`` and ``>/dev/null`` drop a stream.
4. Every cookbook program and tool module is run by some transcript in docs/cookbook.md.
5. Every diagnostic or error code the docs mention exists in the code, and docs/language.md's
   table of diagnostics lists every code of luma/check/codes.py with its title and a message
   that Luma really produces.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from luma.check.codes import CODES
from luma.compile import check_text

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
COOKBOOK = ROOT / "examples" / "cookbook"
USER_DOCS = ("language.md", "cli.md", "runtime.md", "models.md", "cookbook.md", "testing.md")

_EXPECT = re.compile(r"//\s*(error|warning)\[([A-Z0-9_]+)\](@[+-]\d+)?:\s?(.*?)\s*$")


# ------------------------------------------------------------------------------ markdown


@dataclass(frozen=True)
class Block:
    doc: str        # file name under docs/
    line: int       # the line of the opening fence, 1-based
    lang: str
    attrs: dict[str, str]
    text: str

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _blocks(doc: Path) -> list[Block]:
    out: list[Block] = []
    lines = doc.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(`{3,})(.*)$", lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip().split()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        lang = info[0] if info else ""
        attrs = dict(a.split("=", 1) for a in info[1:] if "=" in a)
        out.append(Block(doc.name, start + 1, lang, attrs, "\n".join(body) + "\n"))
    return out


def _all_docs() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def _blocks_of(lang: str, docs: list[Path] | None = None) -> list[Block]:
    return [b for d in (docs if docs is not None else _all_docs()) for b in _blocks(d)
            if b.lang == lang]


def _user_docs() -> list[Path]:
    return [DOCS / name for name in USER_DOCS if (DOCS / name).exists()]


# ---------------------------------------------------------------------------- 1. luma blocks


def _expectations(text: str) -> list[tuple[int, str, str, str]]:
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        for m in _EXPECT.finditer(line):
            offset = int(m.group(3)[1:]) if m.group(3) else 0
            out.append((lineno + offset, m.group(1), m.group(2), m.group(4)))
    return out


def _diagnostics(text: str, path: str) -> list[tuple[int, str, str, str]]:
    checked = check_text(text, path)
    return sorted((checked.source.line_col(d.span.start)[0], d.severity, d.code, d.message)
                  for d in checked.diagnostics)


@pytest.mark.parametrize("block", _blocks_of("luma"), ids=lambda b: b.id)
def test_luma_block_checks_as_it_says(block: Block) -> None:
    got = _diagnostics(block.text, block.attrs.get("file", "example.luma"))
    assert got == sorted(_expectations(block.text)), (
        f"{block.id}: the block's diagnostics differ from its expectation comments")


@pytest.mark.parametrize("block", [b for d in _all_docs() for b in _blocks(d)
                                   if "file" in b.attrs], ids=lambda b: b.id)
def test_a_block_that_names_a_file_shows_it_exactly(block: Block) -> None:
    path = ROOT / block.attrs["file"]
    assert path.is_file(), f"{block.id}: {block.attrs['file']} does not exist"
    assert block.text == path.read_text(encoding="utf-8"), (
        f"{block.id}: the block differs from {block.attrs['file']}")


# ------------------------------------------------------------------------ 3. transcripts


@dataclass
class Step:
    command: str
    expected: list[str]


def _steps(block: Block) -> list[Step]:
    steps: list[Step] = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            assert steps, f"{block.id}: a transcript starts with a '$ ' command line"
            steps[-1].expected.append(line)
            i += 1
            continue
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + " " + lines[i].lstrip("> ").strip()
        steps.append(Step(command, []))
        i += 1
    return steps


def _environment(extra: dict[str, str]) -> dict[str, str]:
    dropped = ("NO_COLOR", "FORCE_COLOR", "LUMA_DEBUG", "TERM", "COLUMNS")
    env = {k: v for k, v in os.environ.items()
           if k not in dropped and not k.startswith(("LUMA_", "DB_", "OPENAI_", "AZURE_",
                                                     "ANTHROPIC_", "GEMINI_"))}
    # as a user with Luma's environment activated: `python` in a config is the one Luma runs on
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env.update(extra)
    return env


def _run(command: str) -> tuple[int, str]:
    words = shlex.split(command)
    env: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    assert words and words[0] == "luma", f"only luma commands run in transcripts: {command}"
    drop_err = "2>/dev/null" in words
    drop_out = ">/dev/null" in words
    args = [w for w in words[1:] if w not in ("2>/dev/null", ">/dev/null", "2>&1")]
    done = subprocess.run([sys.executable, "-m", "luma", *args], cwd=ROOT,
                          env=_environment(env), stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL if drop_out else subprocess.PIPE,
                          stderr=(subprocess.DEVNULL if drop_err else
                                  subprocess.PIPE if drop_out else subprocess.STDOUT),
                          timeout=120)
    output = done.stderr if drop_out else done.stdout
    return done.returncode, (output or b"").decode("utf-8", errors="replace")


def _matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line; a line ``...`` matches any number of lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(_matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and actual[0] == expected[0] and _matches(expected[1:], actual[1:])


def _trimmed(lines: list[str]) -> list[str]:
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


@pytest.mark.parametrize("block", _blocks_of("console", [*_user_docs(), ROOT / "README.md"]),
                         ids=lambda b: b.id)
def test_transcript_shows_what_luma_prints(block: Block) -> None:
    last_code: int | None = None
    for step in _steps(block):
        if step.command.strip() == "echo $?":
            assert last_code is not None, f"{block.id}: 'echo $?' before any command"
            assert _trimmed(step.expected) == [str(last_code)], (
                f"{block.id}: exit code of the command before 'echo $?'")
            last_code = None
            continue
        if last_code not in (None, 0):
            pytest.fail(f"{block.id}: the command before '$ {step.command}' exited with "
                        f"{last_code}; show it with '$ echo $?'")
        last_code, output = _run(step.command)
        actual = _trimmed(output.splitlines())
        expected = _trimmed(step.expected)
        assert _matches(expected, actual), (
            f"{block.id}: '$ {step.command}' printed:\n" + "\n".join(actual))
    assert last_code in (None, 0), (f"{block.id}: the last command exited with {last_code}; "
                                    "show it with '$ echo $?'")


# -------------------------------------------------------------------------- 4. cookbook


def _transcript_commands(doc: str) -> str:
    path = DOCS / doc
    if not path.exists():
        return ""
    return "\n".join(s.command for b in _blocks_of("console", [path]) for s in _steps(b))


def test_every_cookbook_program_and_module_is_run_by_the_cookbook() -> None:
    commands = _transcript_commands("cookbook.md")
    files = sorted(p for p in COOKBOOK.glob("*") if p.suffix in (".luma", ".py"))
    assert files, "examples/cookbook/ holds the cookbook's programs"
    missing = [str(p.relative_to(ROOT)) for p in files
               if str(p.relative_to(ROOT)) not in commands]
    assert missing == [], "cookbook files no transcript in docs/cookbook.md runs"


def test_every_example_file_is_used_by_the_docs() -> None:
    docs = "\n".join(p.read_text(encoding="utf-8") for p in _user_docs())
    files = sorted(str(p.relative_to(ROOT)) for p in COOKBOOK.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts)
    assert [f for f in files if f not in docs] == [], "example files no doc shows or runs"


def test_every_cookbook_program_is_shown_in_the_cookbook() -> None:
    shown = {b.attrs.get("file") for b in _blocks(DOCS / "cookbook.md")}
    programs = sorted(str(p.relative_to(ROOT)) for p in COOKBOOK.glob("*.luma"))
    assert [p for p in programs if p not in shown] == []


# ------------------------------------------------------------------------------ 5. codes


def _source_text() -> str:
    parts = [p.read_text(encoding="utf-8") for p in (ROOT / "luma").rglob("*.py")]
    return "\n".join(parts)


_BRACKETED = re.compile(r"\b(?:error|warning)\[([A-Z][A-Z0-9_]*)\]")
_CODE_WORD = re.compile(r"`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[EW]\d{3})`")


@pytest.mark.parametrize("doc", _all_docs(), ids=lambda p: p.name)
def test_every_code_the_docs_mention_exists(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    source = _source_text()
    examples = "\n".join(p.read_text(encoding="utf-8") for p in COOKBOOK.rglob("*")
                         if p.is_file())
    unknown = []
    for code in sorted(set(_BRACKETED.findall(text)) | set(_CODE_WORD.findall(text))):
        if code == "CODE":
            continue  # the placeholder of `error[CODE]: message`
        if re.fullmatch(r"[EW]\d{3}", code):
            if code not in CODES:
                unknown.append(code)
        elif f'"{code}"' not in source and code not in examples:
            unknown.append(code)
    assert unknown == [], f"{doc.name} mentions codes that Luma does not have"


def _diagnostic_table() -> list[tuple[str, str, str, str]]:
    rows = []
    for line in (DOCS / "language.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\|\s*`([EW]\d{3})`\s*\|\s*(.*?)\s*\|\s*(error|warning)\s*\|\s*`(.*)`\s*\|$",
                     line)
        if m:
            rows.append((m.group(1), m.group(2), m.group(3), m.group(4)))
    return rows


def _produced_messages() -> set[tuple[str, str]]:
    """(code, message) pairs Luma is known to produce: the expectations of tests/cases and of
    the docs' own luma blocks (all asserted by tests), and the transcripts' output."""
    pairs: set[tuple[str, str]] = set()
    texts = [p.read_text(encoding="utf-8") for p in (ROOT / "tests" / "cases").rglob("*.luma")]
    texts += [b.text for b in _blocks_of("luma")]
    for text in texts:
        pairs |= {(code, message) for _, _, code, message in _expectations(text)}
    for block in _blocks_of("console", _user_docs()):
        for m in re.finditer(r"(?:error|warning)\[([EW]\d{3})\]: (.*)", block.text):
            pairs.add((m.group(1), m.group(2).strip()))
    return pairs


def test_the_diagnostic_table_lists_every_code_with_a_real_message() -> None:
    rows = _diagnostic_table()
    assert [r[0] for r in rows] == list(CODES), "one row per code, in the order of codes.py"
    produced = _produced_messages()
    for code, title, severity, message in rows:
        assert title == CODES[code], f"{code}: the title in codes.py is {CODES[code]!r}"
        assert severity == ("warning" if code.startswith("W") else "error"), code
        assert (code, message) in produced, (
            f"{code}: {message!r} is not a message any tested example produces")


# ------------------------------------------------------------------------------ 6. links


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' removed, spaces
    to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    text = doc.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.*)$", text, re.MULTILINE)}


@pytest.mark.parametrize("doc", _user_docs(), ids=lambda p: p.name)
def test_links_between_the_docs_lead_somewhere(doc: Path) -> None:
    text = re.sub(r"^```.*?^```", "", doc.read_text(encoding="utf-8"),
                  flags=re.MULTILINE | re.DOTALL)
    broken = []
    for target, anchor in re.findall(r"\]\(([\w./-]*)(?:#([\w-]+))?\)", text):
        if target.startswith(("http:", "https:")):
            continue
        path = (doc.parent / target) if target else doc
        if not path.exists():
            broken.append(f"{target}#{anchor}")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{target}#{anchor}")
    assert broken == [], f"{doc.name} links to headings or files that do not exist"
