"""Runs generated and mutated programs with mutated handlers on the offline model.

Each case is a real run of ``luma PROGRAM --tool-module HANDLERS [...]`` in a forked child of a
warm driver process (so a handler that closes stdout, calls ``os._exit`` or hangs harms only its
own case). A case *fails* when the run ends in ``luma: internal error``, prints a Python traceback,
exits with a code the CLI does not document, prints a result on stdout that is not JSON, or does
not end within its time limit.

The seeds are the cookbook programs (``examples/cookbook``) and the quickstart, run as their
header comments say. The mutations are of two kinds:

- the program: literals, types, contract values and whole lines changed, so that most mutants
  still compile and reach the runtime;
- the handlers: every tool's handler replaced by one of ``HOSTILE`` behaviours (garbage results,
  values that are not JSON, exceptions of every class, prints, sleeps, stdout closed…), sync or
  async, or kept as written.
"""

from __future__ import annotations

import json
import os
import random
import re
import select
import shlex
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COOKBOOK = ROOT / "examples" / "cookbook"
# 130 is Ctrl-C: no case presses it, so a run that ends with it took a handler's
# KeyboardInterrupt for the user's.
DOCUMENTED_EXITS = {0, 1, 2}

# A handler body per behaviour: Python statements run inside ``def NAME(input, needs=None)``
# (or ``async def``). ``ORIGINAL`` calls the seed's own handler.
HOSTILE: dict[str, str] = {
    "original": "return ORIGINAL(input, needs)",
    "none": "return None",
    "int": "return 42",
    "string": "return 'x'",
    "list": "return [1, 'two', None]",
    "empty_dict": "return {}",
    "extra_field": "r = ORIGINAL(input, needs)\n    return {**(r if isinstance(r, dict) else {}), 'zzz_extra': 1}",
    "set": "return {'value': {1, 2}}",
    "bytes": "return {'value': b'\\xff\\x00'}",
    "nan": "return {'value': float('nan'), 'result': float('nan')}",
    "inf": "return {'result': float('inf'), 'value': float('-inf')}",
    "datetime": "import datetime\n    return {'value': datetime.datetime.now()}",
    "decimal": "import decimal\n    return {'value': decimal.Decimal('1.5')}",
    "uuid": "import uuid\n    return {'value': uuid.uuid4()}",
    "object": "return {'value': object()}",
    "circular": "d = {}\n    d['self'] = d\n    return d",
    "surrogate": "return {'value': '\\ud800', 'summary': '\\udfff'}",
    "huge_int": "return {'value': 10 ** 5000, 'result': 10 ** 5000}",
    "deep": "v = 0\n    for _ in range(100000):\n        v = [v]\n    return {'value': v}",
    "echo_input": "return input",
    "raise_value": "raise ValueError('handler broke')",
    "raise_key": "raise KeyError('missing')",
    "raise_luma": "raise LumaToolError(code='E_HOSTILE', message='hostile failure', retryable=True)",
    "raise_luma_bad": "raise LumaToolError(code=123, message=None)",
    "raise_str_broken": (
        "class Weird(Exception):\n        def __str__(self):\n            raise RuntimeError('no str')\n"
        "    raise Weird()"),
    "raise_keyboard": "raise KeyboardInterrupt()",
    "raise_systemexit": "raise SystemExit(3)",
    "raise_generator_exit": "raise GeneratorExit()",
    "raise_cancelled": "import asyncio\n    raise asyncio.CancelledError()",
    "raise_base": "class Odd(BaseException):\n        pass\n    raise Odd('odd')",
    "raise_recursion": "def f(n):\n        return f(n + 1)\n    return f(0)",
    "print": "print('garbage from a handler')\n    return ORIGINAL(input, needs)",
    "print_json": "print('{\"not\": \"the result\"}')\n    return ORIGINAL(input, needs)",
    "sleep_short": "import time\n    time.sleep(0.05)\n    return ORIGINAL(input, needs)",
    "close_stdout": "import sys\n    sys.stdout.close()\n    return ORIGINAL(input, needs)",
    "mutate_input": "input.clear()\n    return ORIGINAL(input, needs) if False else None",
    # handlers that put their `needs` (which hold secrets, where the program has contexts) into
    # every channel: the result, a print, an exception's text, a typed error's code
    "leak_needs_return": "return {'value': repr(needs), 'text': str(needs), 'summary': repr(needs)}",
    "leak_needs_print": "print('needs are', needs)\n    return ORIGINAL(input, needs)",
    "leak_needs_raise": "raise ValueError(repr(needs))",
    "leak_needs_code": "raise LumaToolError(code=repr(needs), message=str(needs), details={str(needs): 1})",
}

#: Environment variables whose values Luma must never write (the seeds' credentials and
#: context secrets), looked for in every run's output.
_SECRET_NAMES = re.compile(r"PASSWORD|SECRET|TOKEN|API_KEY")

# Whole-program mutations: a regex over the text and what to put there instead.
_LITERAL_NUMBERS = ["0", "-1", "1", "2.5", "1e308", "-1e308", "100000000000000000000", "3"]
_LITERAL_STRINGS = ['""', '"x"', '"ééü"', '"{"', '"' + "a" * 300 + '"', '"null"', '"\\n\\t"']
_TYPES = ["int", "float", "string", "bool", "any", "string[]", "int?", "map[int]"]
_CONTRACT_VALUES = {
    "side_effects": ['"none"', '"read"', '"write"'],
    "retries": ["0", "1", "3", "1100"],
    "timeout": ["1", "50", "500", "60000"],
    "cache": ["true", "false"],
    "idempotent": ["true", "false"],
    "tool_rate_limit": ["0", "1", "1000"],
    "tool_concurrency": ["1", "2", "64"],
}


#: Arguments a seed's header command leaves to the docs' later examples.
_SEED_ARGS = {"needs": ["--arg", "id=c-7"]}


@dataclass(slots=True)
class Seed:
    name: str
    program: str
    handlers: Path
    argv: list[str]          # after the program path
    env: dict[str, str]
    tools: list[str]


@dataclass(slots=True)
class Case:
    seed: str
    program: str
    argv: list[str]
    env: dict[str, str]
    behaviours: dict[str, tuple[str, bool]]   # tool -> (behaviour, async)
    mutation: str


@dataclass(slots=True)
class Outcome:
    case: Case
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    problems: list[str] = field(default_factory=list)


def seeds() -> list[Seed]:
    """The cookbook programs and the quickstart, with the command lines their headers give."""
    from luma.compile import check_text

    found: list[Seed] = []
    paths = sorted(COOKBOOK.glob("*.luma")) + [ROOT / "examples" / "quickstart.luma"]
    for path in paths:
        text = path.read_text(encoding="utf-8")
        command = _header_command(text)
        if command is None:
            continue
        env, argv = command
        if "--tool-module" not in argv:
            continue
        at = argv.index("--tool-module")
        handlers = ROOT / argv[at + 1]
        rest = argv[:at] + argv[at + 2:]
        rest = [str(ROOT / a) if a.endswith(".json") and (ROOT / a).exists() else a for a in rest]
        checked = check_text(text, str(path))
        if checked.program is None:
            continue
        tools = [d.name for d in checked.program.declarations
                 if type(d).__name__ == "ToolDecl"]
        agents = [d.name for d in checked.program.declarations
                  if type(d).__name__ == "AgentDecl"]
        if "--agent" not in rest and not checked.program.statements and agents:
            rest += ["--agent", agents[0]]
        rest += _SEED_ARGS.get(path.stem, [])
        found.append(Seed(path.stem, text, handlers, rest, env, tools))
    return found


def _header_command(text: str) -> tuple[dict[str, str], list[str]] | None:
    """The first ``//   luma …`` command in a program's header comment, continuation lines joined."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not re.match(r"//\s+(\w+=\S+\s+)*luma\s", line):
            continue
        command = line[2:]
        j = i
        while command.rstrip().endswith("\\") and j + 1 < len(lines):
            j += 1
            command = command.rstrip()[:-1] + " " + lines[j].lstrip("/ ")
        words = shlex.split(command)
        env: dict[str, str] = {}
        while words and "=" in words[0] and words[0] != "luma":
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        if not words or words[0] != "luma":
            return None
        return env, words[2:]   # drop "luma PROGRAM"
    return None


def mutate_program(text: str, rng: random.Random) -> tuple[str, str]:
    """One mutation that most often keeps the program compiling; returns (text, what changed)."""
    kind = rng.choices(["none", "number", "string", "type", "contract", "delete_line",
                        "duplicate_line", "swap_lines"], weights=[25, 20, 15, 10, 20, 4, 3, 3])[0]
    body_start = _first_declaration(text)
    head, body = text[:body_start], text[body_start:]
    if kind == "number":
        spots = list(re.finditer(r"(?<![\w.])\d+(\.\d+)?(?![\w.])", body))
        if spots:
            m = rng.choice(spots)
            new = rng.choice(_LITERAL_NUMBERS)
            return head + body[:m.start()] + new + body[m.end():], f"number {m.group()} -> {new}"
    elif kind == "string":
        spots = list(re.finditer(r'(?<!")"[^"\n{}]*"(?!")', body))
        if spots:
            m = rng.choice(spots)
            new = rng.choice(_LITERAL_STRINGS)
            return head + body[:m.start()] + new + body[m.end():], f"string -> {new[:12]}"
    elif kind == "type":
        spots = list(re.finditer(r"(?<=: )(int|float|string|bool)\b", body))
        if spots:
            m = rng.choice(spots)
            new = rng.choice(_TYPES)
            return head + body[:m.start()] + new + body[m.end():], f"type {m.group()} -> {new}"
    elif kind == "contract":
        keys = [k for k in _CONTRACT_VALUES if re.search(rf"\b{k}: ", body)]
        if keys:
            key = rng.choice(keys)
            spots = list(re.finditer(rf"(?<=\b{key}: )\S+", body))
            m = rng.choice(spots)
            new = rng.choice(_CONTRACT_VALUES[key])
            return head + body[:m.start()] + new + body[m.end():], f"{key} -> {new}"
    elif kind in ("delete_line", "duplicate_line", "swap_lines"):
        lines = body.split("\n")
        if len(lines) > 2:
            i = rng.randrange(len(lines) - 1)
            if kind == "delete_line":
                del lines[i]
            elif kind == "duplicate_line":
                lines.insert(i, lines[i])
            else:
                lines[i], lines[i + 1] = lines[i + 1], lines[i]
            return head + "\n".join(lines), f"{kind} {i + 1}"
    return text, "none"


def _first_declaration(text: str) -> int:
    m = re.search(r"^(schema|tool|model|agent|tagged)\b", text, re.M)
    return m.start() if m else 0


def handler_module(seed: Seed, behaviours: dict[str, tuple[str, bool]]) -> str:
    """The text of a tool module whose handlers behave as ``behaviours`` says."""
    out = [
        "import importlib.util as _u",
        "from luma import LumaToolError",
        f"_spec = _u.spec_from_file_location('seed_handlers', {str(seed.handlers)!r})",
        "_seed = _u.module_from_spec(_spec)",
        "_spec.loader.exec_module(_seed)",
        "import inspect as _inspect, asyncio as _asyncio",
        "",
        "def _call_original(name, input, needs):",
        "    fn = getattr(_seed, name)",
        "    params = len(_inspect.signature(fn).parameters)",
        "    args = (input, needs)[:max(1, params)] if params else ()",
        "    result = fn(*args)",
        "    if _inspect.isawaitable(result):",
        "        loop = _asyncio.new_event_loop()",
        "        try:",
        "            result = loop.run_until_complete(result)",
        "        finally:",
        "            loop.close()",
        "    return result",
        "",
    ]
    for tool in seed.tools:
        behaviour, is_async = behaviours[tool]
        body = HOSTILE[behaviour].replace("ORIGINAL(input, needs)",
                                          f"_call_original({tool!r}, input, needs)")
        # _call_original runs an async seed handler on a loop of its own: only from a thread.
        asynchronous = is_async and "ORIGINAL" not in HOSTILE[behaviour]
        out.append(f"{'async ' if asynchronous else ''}def {tool}(input, needs=None):")
        out.append("    " + body)
        out.append("")
    return "\n".join(out)


def make_cases(count: int, seed_value: int) -> list[tuple[Case, str]]:
    """``count`` cases (with their handler module text), the same for the same ``seed_value``."""
    rng = random.Random(seed_value)
    pool = seeds()
    cases: list[tuple[Case, str]] = []
    names = sorted(HOSTILE)
    for index in range(count):
        generated: dict[str, object] | None = None
        if rng.random() < 0.3:
            seed, generated = generate_program(rng, index)
        else:
            seed = rng.choice(pool)
        program, mutation = mutate_program(seed.program, rng)
        behaviours = {}
        for tool in seed.tools:
            # Half the time a tool keeps its own handler, so the run gets past the first call.
            behaviour = "original" if rng.random() < 0.5 else rng.choice(names)
            behaviours[tool] = (behaviour, rng.random() < 0.5)
        argv = list(seed.argv)
        if "--arg" in argv and rng.random() < 0.3:
            at = argv.index("--arg")
            key = argv[at + 1].split("=", 1)[0]
            argv[at + 1] = f"{key}={rng.choice(['', '0', 'null', '{', 'NaN', 'x' * 50, 'é'])}"
        case = Case(seed.name, program, argv, dict(seed.env), behaviours, mutation)
        module = (handler_module(seed, behaviours) if generated is None
                  else generated_handler_module(seed, generated, behaviours))
        cases.append((case, module))
    return cases


def run_cases(cases: list[tuple[Case, str]], *, timeout: float = 30.0,
              workdir: Path | None = None) -> list[Outcome]:
    """Run each case in a forked child of this (warm) process; never raises for a case."""
    import luma.cli  # noqa: F401 — warm: the children start with luma imported

    base = Path(workdir or tempfile.mkdtemp(prefix="luma-robust-"))
    outcomes = []
    for i, (case, handlers) in enumerate(cases):
        folder = base / f"case{i:05d}"
        folder.mkdir(parents=True, exist_ok=True)
        program = folder / "prog.luma"
        program.write_text(case.program, encoding="utf-8")
        (folder / "handlers.py").write_text(handlers, encoding="utf-8")
        for data in (ROOT / "examples" / "cookbook").glob("*.json"):  # scripted turns, configs
            (folder / data.name).write_bytes(data.read_bytes())
        argv = [str(program), "--tool-module", str(folder / "handlers.py"), *case.argv]
        outcomes.append(_run_forked(case, argv, folder, timeout))
    return outcomes


def _run_forked(case: Case, argv: list[str], folder: Path, timeout: float) -> Outcome:
    out_path, err_path = folder / "stdout", folder / "stderr"
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: a whole `luma` process as a user runs it
        code = 70
        try:
            os.setsid()
            fd_out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            fd_err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            fd_in = os.open(os.devnull, os.O_RDONLY)
            os.dup2(fd_in, 0)
            os.dup2(fd_out, 1)
            os.dup2(fd_err, 2)
            sys.stdin = open(0, "r", closefd=False)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            os.chdir(folder)
            os.environ.update(case.env)
            os.environ.pop("LUMA_DEBUG", None)
            from luma.cli import main
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # what the CLI let through: a traceback, as a user would see it
            import traceback
            traceback.print_exc()
            code = 71
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:
                    pass
            os._exit(code)
    deadline = started + timeout
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        select.select([], [], [], 0.01)
    else:
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    seconds = time.monotonic() - started
    stdout = out_path.read_text(encoding="utf-8", errors="replace")
    stderr = err_path.read_text(encoding="utf-8", errors="replace")
    exit_code = os.waitstatus_to_exitcode(status) if status is not None else None
    outcome = Outcome(case, exit_code, stdout, stderr, seconds)
    outcome.problems = judge(outcome)
    return outcome


def judge(outcome: Outcome) -> list[str]:
    """What a user would call broken in this run."""
    problems = []
    if outcome.exit_code is None:
        problems.append(f"hang: no exit after {outcome.seconds:.0f} s")
    elif outcome.exit_code not in DOCUMENTED_EXITS:
        problems.append(f"exit code {outcome.exit_code}")
    for stream, text in (("stdout", outcome.stdout), ("stderr", outcome.stderr)):
        if "luma: internal error" in text:
            problems.append(f"internal error on {stream}: " + _line_with(text, "internal error"))
        if "Traceback (most recent call last)" in text:
            problems.append(f"traceback on {stream}: " + text.strip().splitlines()[-1][:200])
    if outcome.exit_code == 0:
        try:
            json.loads(outcome.stdout)
        except ValueError:
            problems.append("exit 0 but stdout is not one JSON value: " + outcome.stdout[:120])
    for name, value in outcome.case.env.items():
        if _SECRET_NAMES.search(name) and len(value) >= 6:
            for form in {value, json.dumps(value)[1:-1], repr(value)[1:-1]}:
                if form in outcome.stdout or form in outcome.stderr:
                    problems.append(f"secret {name} in the output")
                    break
    return problems


def _line_with(text: str, needle: str) -> str:
    return next((line for line in text.splitlines() if needle in line), "")[:200]


def summary(outcomes: list[Outcome]) -> dict[str, int]:
    exits: dict[str, int] = {}
    for o in outcomes:
        exits[str(o.exit_code)] = exits.get(str(o.exit_code), 0) + 1
    return {
        "runs": len(outcomes),
        "failed_runs": sum(1 for o in outcomes if o.problems),
        "internal_errors": sum(1 for o in outcomes
                               if any("internal error" in p for p in o.problems)),
        "tracebacks": sum(1 for o in outcomes if any("traceback" in p for p in o.problems)),
        "hangs": sum(1 for o in outcomes if o.exit_code is None),
        "bad_stdout": sum(1 for o in outcomes if any("stdout is not" in p for p in o.problems)),
        "runs_with_secrets": sum(1 for o in outcomes
                                 if any(_SECRET_NAMES.search(k) for k in o.case.env)),
        "secrets_found": sum(1 for o in outcomes if any("secret " in p for p in o.problems)),
        **{f"exit_{k}": v for k, v in sorted(exits.items())},
    }


# ------------------------------------------------------------------------- generated programs

_SCALARS = {"int": lambda r: r.choice([0, 1, 7, -3, 1000]),
            "float": lambda r: r.choice([0.5, 2.0, -1.25, 1e6]),
            "string": lambda r: r.choice(["", "a", "Luma é", "{x}", "x" * 40]),
            "bool": lambda r: r.choice([True, False])}


def generate_program(rng: random.Random, index: int) -> tuple[Seed, dict[str, object]]:
    """A program built from parts: schemas, tools over them, top-level calls and an agent whose
    ``run`` calls the tools and asks the offline model. Returns the seed and a valid result per
    tool (what the ``original`` behaviour returns)."""
    lines: list[str] = []
    schemas: dict[str, dict[str, str]] = {}
    for s in range(rng.randint(1, 3)):
        fields = {f"f{j}": rng.choice([*_SCALARS, "string[]", "int?", "any", "map[int]"])
                  for j in range(rng.randint(1, 4))}
        fields = {(f + "?" if t == "int?" else f): ("int" if t == "int?" else t)
                  for f, t in fields.items()}
        name = f"S{s}"
        schemas[name] = fields
        lines.append(f"schema {name} {{")
        for f, t in fields.items():
            note = rng.choice(["", "", " @range(0, 100)" if t in ("int", "float") else "",
                               " @length(0, 20)" if t in ("string", "string[]") else ""])
            lines.append(f"  {f}: {t}{note}")
        lines.append("}\n")
    tools: list[str] = []
    results: dict[str, object] = {}
    for t in range(max(len(schemas), rng.randint(1, 3))):
        name = f"tool_{t}"
        # Each schema is some tool's result (an unused schema is a warning, not a run).
        returns = f"S{t}" if t < len(schemas) else rng.choice(sorted(schemas))
        effects = rng.choice(["none", "read", "write"])
        extra = []
        if effects == "none" and rng.random() < 0.5:
            extra.append("  cache: true")
        if effects != "write" and rng.random() < 0.5:
            extra.append(f"  retries: {rng.choice([1, 2])}")
            extra.append(f"  retry_backoff: \"{rng.choice(['none', 'fixed', 'exponential'])}\"")
            extra.append("  retry_delay: 1")
        if rng.random() < 0.4:
            extra.append(f"  timeout: {rng.choice([200, 1000, 5000])}")
        lines.append(f"tool {name}(q: string, n: int @range(0, 10)) -> {returns} {{")
        lines.append(f"  description: \"Generated tool {t}.\"")
        lines.append(f"  side_effects: \"{effects}\"")
        lines.extend(extra)
        lines.append("}\n")
        tools.append(name)
        results[name] = {f.rstrip("?"): _value(t_, rng) for f, t_ in schemas[returns].items()}
    answer = rng.choice(sorted(schemas))
    lines.append("agent Gen {")
    lines.append("  system: \"Answer with the schema.\"")
    readers = [t for t in tools]
    lines.append(f"  tools: [{', '.join(readers)}]")
    lines.append(f"  fn run(q: string @default(\"hello\")) -> {answer} {{")
    for i, t in enumerate(tools):
        lines.append(f"    r{i} = tool {t}({{ q: q, n: {rng.randint(0, 10)} }})")
    lines.append(f"    ask \"Use the tools on {{q}} and answer.\" -> {answer}")
    lines.append("  }")
    lines.append("}\n")
    for i, t in enumerate(tools):
        lines.append(f"x{i} = tool {t}({{ q: \"top\", n: {i} }})")
    lines.append("result = Gen.run(\"generated\")")
    text = "\n".join(lines) + "\n"
    argv = ["--agent", "Gen"] if rng.random() < 0.5 else []
    return Seed(f"generated{index}", text, Path("generated"), argv, {}, tools), results


def _value(type_: str, rng: random.Random) -> object:
    if type_ in _SCALARS:
        value = _SCALARS[type_](rng)
        return min(max(value, 0), 20) if isinstance(value, (int, float)) and not isinstance(
            value, bool) else value[:20] if isinstance(value, str) else value
    if type_ == "string[]":
        return ["a", "b"]
    if type_ == "int?":
        return rng.choice([None, 3])
    if type_ == "map[int]":
        return {"k": 1}
    return {"any": [1, "x"]}


def generated_handler_module(seed: Seed, results: dict[str, object],
                             behaviours: dict[str, tuple[str, bool]]) -> str:
    out = ["from luma import LumaToolError", "import json as _json",
           f"_RESULTS = _json.loads({json.dumps(json.dumps(results))})", "",
           "def _call_original(name, input, needs):", "    return _RESULTS[name]", ""]
    for tool in seed.tools:
        behaviour, is_async = behaviours[tool]
        body = HOSTILE[behaviour].replace("ORIGINAL(input, needs)",
                                          f"_call_original({tool!r}, input, needs)")
        out.append(f"{'async ' if is_async else ''}def {tool}(input, needs=None):")
        out.append("    " + body)
        out.append("")
    return "\n".join(out)
