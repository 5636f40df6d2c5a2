"""``tool_module_policy`` (RUNTIME.md §6): what ``sandbox: "strict"`` enforces at load time and
at run time, what is only a lint, what no policy means, ``max_concurrency`` — and a passing test
of a module that satisfies every check and still reaches what it should not."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from luma.runtime.engine import CallContext
from luma.runtime.sandbox import ENV_SPELLINGS, NETWORK_SPELLINGS
from sandbox.project import Project, isolated_imports, project, strict  # noqa: F401 (fixtures)

PREFIX = "error[TOOL_FAILED]: Tool 'probe' failed: "


def refused_at_start(project: Project, message: str) -> None:
    """The program did not start, and stderr is exactly ``message``."""
    outcome = project.run()
    assert (outcome.code, outcome.stdout) == (2, "")
    assert outcome.stderr == f"error: {message}\n"


def refused_when_called(project: Project, message: str, name: str = "x") -> None:
    """The module loaded; the call failed with ``message``."""
    outcome = project.run(name)
    assert outcome.code == 1, outcome.stderr
    assert outcome.stderr.splitlines()[0] == PREFIX + message


# ------------------------------------------------------------------------- allow_builtins


def test_a_listed_standard_module_may_be_imported(project: Project) -> None:
    project.write("tools.py", """
        import json
        import xml.etree.ElementTree as ET

        def probe(input):
            return {"text": json.dumps(ET.fromstring("<a>1</a>").text)}
    """)
    project.config(policy=strict("json", "xml"))
    assert project.run().value == {"text": '"1"'}


def test_an_unlisted_standard_module_is_refused_at_load(project: Project) -> None:
    project.write("tools.py", """
        import json

        def probe(input):
            return {"text": "never"}
    """)
    project.config(policy=strict("math"))
    refused_at_start(project, "./tools.py:2: Tool module './tools.py' may not import 'json': it "
                              "is not in tool_module_policy.allow_builtins.")


def test_an_import_inside_a_function_is_checked_before_anything_runs(project: Project) -> None:
    marker = project.folder / "ran.txt"
    project.write("tools.py", f"""
        import pathlib
        pathlib.Path({str(marker)!r}).write_text("the module ran")

        def probe(input):
            import csv
            return {{"text": "never"}}
    """)
    project.config(policy=strict("pathlib"))
    refused_at_start(project, "./tools.py:6: Tool module './tools.py' may not import 'csv': it "
                              "is not in tool_module_policy.allow_builtins.")
    assert not marker.exists()


def test_a_computed_import_is_refused_while_the_module_loads(project: Project) -> None:
    project.write("tools.py", """
        import importlib
        codec = importlib.import_module("js" + "on")

        def probe(input):
            return {"text": "never"}
    """)
    project.config(policy=strict("importlib"))
    refused_at_start(project, "./tools.py:3: Tool module './tools.py' may not import 'json': it "
                              "is not in tool_module_policy.allow_builtins.")


COMPUTED = """
    import importlib

    def probe(input):
        module = importlib.import_module(input["name"])
        return {"text": module.__name__}
"""

DUNDER = """
    def probe(input):
        load = __builtins__["__imp" + "ort__"]
        return {"text": load(input["name"]).__name__}
"""


@pytest.mark.parametrize("source", [COMPUTED, DUNDER], ids=["import_module", "__import__"])
def test_a_computed_import_is_checked_when_a_handler_runs(project: Project,
                                                          source: str) -> None:
    project.write("tools.py", source)
    project.config(policy=strict("importlib", "json"))
    assert project.run("json").value == {"text": "json"}
    refused_when_called(project, "Tool module './tools.py' may not import 'csv': it is not in "
                                 "tool_module_policy.allow_builtins.", name="csv")


def test_the_refusal_is_an_import_error_the_module_may_catch(project: Project) -> None:
    project.write("tools.py", """
        import importlib

        def probe(input):
            try:
                importlib.import_module(input["name"])
            except ImportError as exc:
                return {"text": type(exc).__name__ + ": " + str(exc)}
            return {"text": "imported"}
    """)
    project.config(policy=strict("importlib"))
    assert project.run("csv").value == {
        "text": "SandboxRefusal: Tool module './tools.py' may not import 'csv': it is not in "
                "tool_module_policy.allow_builtins."}


def test_importlib_offers_only_import_module(project: Project) -> None:
    project.write("tools.py", """
        import importlib

        def probe(input):
            return {"text": str(getattr(importlib, input["name"]))}
    """)
    project.config(policy=strict("importlib"))
    refused_when_called(project, "Tool module './tools.py' may not use 'importlib.util': under "
                                 "sandbox 'strict' importlib offers only import_module.",
                        name="util")


def test_importlib_submodules_are_always_forbidden(project: Project) -> None:
    project.write("tools.py", "import importlib.util\n")
    project.config(policy=strict("importlib", "importlib.util"))
    refused_at_start(project, "./tools.py:1: Tool module './tools.py' may not import "
                              "'importlib.util': sandbox 'strict' always forbids it.")


# ------------------------------------------------------------------------- always forbidden

ALL_ALLOWED = ("os", "importlib", "subprocess", "ctypes", "pty")

OBVIOUS = [
    ("eval", "x = eval('1')",
     "./tools.py:3: Tool module './tools.py' names 'eval', which sandbox 'strict' always "
     "forbids."),
    ("exec", "exec('x = 1')",
     "./tools.py:3: Tool module './tools.py' names 'exec', which sandbox 'strict' always "
     "forbids."),
    ("compile", "code = compile('1', 'f', 'eval')",
     "./tools.py:3: Tool module './tools.py' names 'compile', which sandbox 'strict' always "
     "forbids."),
    ("__import__", "json = __import__('json')",
     "./tools.py:3: Tool module './tools.py' names '__import__', which sandbox 'strict' always "
     "forbids."),
    ("subprocess", "import subprocess",
     "./tools.py:3: Tool module './tools.py' may not import 'subprocess': sandbox 'strict' "
     "always forbids it."),
    ("subprocess-by-name", "runner = importlib.import_module('subprocess')",
     "./tools.py:3: Tool module './tools.py' names 'subprocess', which sandbox 'strict' always "
     "forbids."),
    ("os.system", "os.system('true')",
     "./tools.py:3: Tool module './tools.py' names 'os.system', which sandbox 'strict' always "
     "forbids."),
    ("os.popen", "os.popen('true')",
     "./tools.py:3: Tool module './tools.py' names 'os.popen', which sandbox 'strict' always "
     "forbids."),
    ("os.spawn", "os.spawnlp(os.P_WAIT, 'true', 'true')",
     "./tools.py:3: Tool module './tools.py' names 'os.spawnlp', which sandbox 'strict' always "
     "forbids."),
    ("os.exec", "os.execv('/bin/true', ['true'])",
     "./tools.py:3: Tool module './tools.py' names 'os.execv', which sandbox 'strict' always "
     "forbids."),
    ("from-os", "from os import system",
     "./tools.py:3: Tool module './tools.py' names 'os.system', which sandbox 'strict' always "
     "forbids."),
    ("ctypes", "import ctypes",
     "./tools.py:3: Tool module './tools.py' may not import 'ctypes': sandbox 'strict' always "
     "forbids it."),
    ("pty", "import pty",
     "./tools.py:3: Tool module './tools.py' may not import 'pty': sandbox 'strict' always "
     "forbids it."),
]


@pytest.mark.parametrize("source, message", [(s, m) for _, s, m in OBVIOUS],
                         ids=[i for i, _, _ in OBVIOUS])
def test_the_obvious_spelling_of_a_forbidden_thing_is_refused_at_load(
        project: Project, source: str, message: str) -> None:
    project.write("tools.py", f"import os, importlib\n\n{source}\n\n"
                              "def probe(input):\n    return {'text': 'never'}\n")
    project.config(policy=strict(*ALL_ALLOWED))
    refused_at_start(project, message)


DISGUISED = [
    ("eval", "__builtins__['ev' + 'al']('1')",
     "Tool module './tools.py' may not use 'eval': sandbox 'strict' always forbids it."),
    ("exec", "getattr(__builtins__, 'ex' + 'ec')('x = 1')",
     "Tool module './tools.py' may not use 'exec': sandbox 'strict' always forbids it."),
    ("compile", "__builtins__['comp' + 'ile']('1', 'f', 'single')",
     "Tool module './tools.py' may not use 'compile': sandbox 'strict' always forbids it."),
    ("__import__", "__builtins__['__imp' + 'ort__']('sub' + 'process')",
     "Tool module './tools.py' may not import 'subprocess': sandbox 'strict' always forbids "
     "it."),
    ("subprocess", "importlib.import_module('sub' + 'process')",
     "Tool module './tools.py' may not import 'subprocess': sandbox 'strict' always forbids "
     "it."),
    ("os.system", "getattr(os, 'sys' + 'tem')('true')",
     "Tool module './tools.py' may not use 'os.system': sandbox 'strict' always forbids it."),
    ("os.popen", "getattr(os, 'po' + 'pen')('true')",
     "Tool module './tools.py' may not use 'os.popen': sandbox 'strict' always forbids it."),
    ("os.spawn", "getattr(os, 'spawn' + 'lp')(0, 'true', 'true')",
     "Tool module './tools.py' may not use 'os.spawnlp': sandbox 'strict' always forbids it."),
    ("os.exec", "getattr(os, 'ex' + 'ecv')('/bin/true', ['true'])",
     "Tool module './tools.py' may not use 'os.execv': sandbox 'strict' always forbids it."),
    ("os.fork", "getattr(os, 'fo' + 'rk')()",
     "Tool module './tools.py' may not use 'os.fork': sandbox 'strict' always forbids it."),
    ("ctypes", "importlib.import_module('c' + 'types')",
     "Tool module './tools.py' may not import 'ctypes': sandbox 'strict' always forbids it."),
    ("pty", "importlib.import_module('p' + 'ty')",
     "Tool module './tools.py' may not import 'pty': sandbox 'strict' always forbids it."),
    ("posix", "importlib.import_module('pos' + 'ix')",
     "Tool module './tools.py' may not import 'posix': sandbox 'strict' always forbids it."),
    ("builtins", "importlib.import_module('built' + 'ins')",
     "Tool module './tools.py' may not import 'builtins': sandbox 'strict' always forbids it."),
]


@pytest.mark.parametrize("expression, message", [(e, m) for _, e, m in DISGUISED],
                         ids=[i for i, _, _ in DISGUISED])
def test_a_disguised_spelling_passes_the_lint_and_is_refused_when_it_runs(
        project: Project, expression: str, message: str) -> None:
    project.write("tools.py", f"""
        import os
        import importlib

        def probe(input):
            {expression}
            return {{"text": "reached"}}
    """)
    project.config(policy=strict(*ALL_ALLOWED, "posix", "builtins"))
    refused_when_called(project, message)


def test_the_real_builtins_module_is_refused_even_when_listed(project: Project) -> None:
    project.write("tools.py", "import builtins\n")
    project.config(policy=strict("builtins"))
    refused_at_start(project, "./tools.py:1: Tool module './tools.py' may not import "
                              "'builtins': sandbox 'strict' always forbids it.")


def test_a_builtin_outside_the_curated_list_is_refused(project: Project) -> None:
    project.write("tools.py", """
        def probe(input):
            return {"text": open(input["name"]).read()}
    """)
    project.config(policy=strict())
    refused_when_called(project, "Tool module './tools.py' may not use 'open': it is not among "
                                 "the builtins sandbox 'strict' provides.", name="prog.luma")


def test_an_installed_package_loads_from_outside_the_project(project: Project) -> None:
    project.write("tools.py", "import pydantic\n")
    project.config(policy=strict())
    origin = sys.modules["pydantic"].__file__
    refused_at_start(project, f"./tools.py:1: Tool module './tools.py' may not import "
                              f"'pydantic': it loads from outside the project folder ({origin}), "
                              "which sandbox 'strict' forbids.")


def test_a_listed_installed_package_still_loads_from_outside_the_project(
        project: Project) -> None:
    project.write("tools.py", COMPUTED)
    project.config([{"path": "./tools.py", "dependencies": ["pydantic"]}],
                   policy=strict("importlib"))
    refused_at_start(project, "./tools.py:5: Tool module './tools.py' uses a dynamic import "
                              "('import_module'), and dynamic imports are refused when "
                              "tool_modules[0].dependencies is given.")
    project.write("tools.py", "import pydantic\n")
    origin = sys.modules["pydantic"].__file__
    refused_at_start(project, f"./tools.py:1: Tool module './tools.py' may not import "
                              f"'pydantic': it loads from outside the project folder ({origin}), "
                              "which sandbox 'strict' forbids.")


def test_a_computed_import_from_outside_the_project_is_refused_when_called(
        project: Project) -> None:
    project.write("tools.py", COMPUTED)
    project.config(policy=strict("importlib"))
    origin = sys.modules["pydantic"].__file__
    refused_when_called(project, f"Tool module './tools.py' may not import 'pydantic': it loads "
                                 f"from outside the project folder ({origin}), which sandbox "
                                 "'strict' forbids.", name="pydantic")


def test_a_relative_import_is_refused(project: Project) -> None:
    project.write("tools.py", "from . import helpers\n")
    project.config(policy=strict())
    refused_at_start(project, "./tools.py:1: Tool module './tools.py' may not use a relative "
                              "import: sandbox 'strict' loads the module on its own, outside any "
                              "package.")


def test_a_command_line_module_is_held_to_the_policy(project: Project, tmp_path: Path) -> None:
    project.write("extra.py", "import json\n")
    project.config([], policy=strict())
    outcome = project.run("x", "extra.py")
    assert outcome.code == 2
    assert outcome.stderr == ("error: extra.py:1: Tool module 'extra.py' may not import 'json': "
                              "it is not in tool_module_policy.allow_builtins.\n")
    (tmp_path / "outside.py").write_text("def probe(input):\n    return {'text': 'x'}\n")
    outcome = project.run("x", str(tmp_path / "outside.py"))
    assert outcome.stderr == (
        f"error: Tool module '{tmp_path / 'outside.py'}' (--tool-module) resolves to "
        f"{(tmp_path / 'outside.py').resolve()}, outside the program's folder, which sandbox "
        "'strict' forbids.\n")


# ------------------------------------------------------------------------- os and luma


def test_os_when_listed_is_handed_over_without_its_process_functions(project: Project) -> None:
    project.write("tools.py", """
        import os

        def probe(input):
            hidden = [n for n in ("system", "popen", "execv", "spawnv", "fork", "env" + "iron")
                      if hasattr(os, n)]
            return {"text": os.path.join("a", input["name"]) + " " + str(hidden)}
    """)
    project.config(policy=strict("os"))
    assert project.run("b").value == {"text": "a/b []"}


def test_os_is_refused_when_not_listed(project: Project) -> None:
    project.write("tools.py", "import os\n")
    project.config(policy=strict())
    refused_at_start(project, "./tools.py:1: Tool module './tools.py' may not import 'os': it "
                              "is not in tool_module_policy.allow_builtins.")


def test_the_environment_is_hidden_from_os_while_allow_env_is_false(project: Project) -> None:
    project.write("tools.py", """
        import os

        def probe(input):
            return {"text": str(getattr(os, input["name"]))}
    """)
    project.config(policy=strict("os"))
    refused_when_called(project, "Tool module './tools.py' may not use 'os.getenv': "
                                 "tool_module_policy.allow_env is false.", name="getenv")


def test_allow_env_lets_the_module_read_the_environment(project: Project,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LUMA_SANDBOX_PROBE", "visible")
    project.write("tools.py", """
        import os

        def probe(input):
            return {"text": os.environ.get(input["name"], "")}
    """)
    project.config(policy=strict("os", allow_env=True))
    assert project.run("LUMA_SANDBOX_PROBE").value == {"text": "visible"}


def test_luma_itself_is_available_with_its_two_exports(project: Project) -> None:
    project.write("tools.py", """
        from luma import LumaToolError, Signal

        def probe(input):
            raise LumaToolError(code="NOT_HERE", message="no " + input["name"] + " " +
                                Signal.__name__)
    """)
    project.config(policy=strict())
    outcome = project.run("such thing")
    assert outcome.code == 1
    assert outcome.stderr.splitlines()[0] == "error[NOT_HERE]: no such thing Signal"


def test_the_rest_of_luma_is_refused(project: Project) -> None:
    project.write("tools.py", "from luma.runtime import run\n")
    project.config(policy=strict())
    refused_at_start(project, "./tools.py:1: Tool module './tools.py' may not import "
                              "'luma.runtime': under sandbox 'strict' only 'luma' itself "
                              "(LumaToolError, Signal) may be imported.")


# ------------------------------------------------------------------------- project modules


def test_a_helper_beside_the_module_runs_under_the_same_rules(project: Project) -> None:
    project.write("helpers.py", """
        from dataclasses import dataclass

        @dataclass
        class Greeting:
            name: str

            def text(self):
                return "hello " + self.name
    """)
    project.write("tools.py", """
        from helpers import Greeting

        def probe(input):
            return {"text": Greeting(input["name"]).text()}
    """)
    project.config(policy=strict("dataclasses"))
    assert project.run("ada").value == {"text": "hello ada"}


def test_a_helper_that_breaks_a_rule_refuses_the_module(project: Project) -> None:
    project.write("helpers.py", "import subprocess\n")
    project.write("tools.py", "import helpers\n")
    project.config(policy=strict())
    refused_at_start(project, "./tools.py:1: Module 'helpers.py' (imported by tool module "
                              "'./tools.py') may not import 'subprocess': sandbox 'strict' "
                              "always forbids it.")


def test_a_helper_is_linted_too(project: Project) -> None:
    project.write("lib/net.py", "TARGET = 'x'\nKIND = socket\n")
    project.write("lib/tools.py", "import net\n")
    project.config(["./lib/tools.py"], policy=strict())
    refused_at_start(project, "./lib/tools.py:1: Module 'lib/net.py' (imported by tool module "
                              "'./lib/tools.py') names 'socket' while "
                              "tool_module_policy.allow_network is false.")


def test_a_helper_symlinked_from_outside_is_refused(project: Project, tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("VALUE = 1\n")
    (project.folder / "helpers.py").symlink_to(tmp_path / "helpers.py")
    project.write("tools.py", "import helpers\n")
    project.config(policy=strict())
    refused_at_start(project, f"./tools.py:1: Tool module './tools.py' may not import 'helpers': "
                              f"it loads from outside the project folder "
                              f"({(tmp_path / 'helpers.py').resolve()}), which sandbox 'strict' "
                              "forbids.")


def test_an_unlisted_project_package_is_refused(project: Project) -> None:
    project.write("pkg/__init__.py", "VALUE = 1\n")
    project.write("tools.py", "import pkg\n")
    project.config(policy=strict())
    refused_at_start(project, "./tools.py:1: Tool module './tools.py' may not import 'pkg': it "
                              "is a package in the project folder, and under sandbox 'strict' a "
                              "project module that is not a listed dependency must be a single "
                              "file.")


def test_a_listed_project_package_loads_as_ordinary_python(project: Project) -> None:
    project.write("pkg/__init__.py", "import os\nVALUE = os.sep\n")
    project.write("tools.py", """
        import pkg

        def probe(input):
            return {"text": pkg.VALUE}
    """)
    project.config([{"path": "./tools.py", "dependencies": ["pkg"]}], policy=strict())
    assert project.run().value == {"text": "/"}


def test_a_vendored_dependency_loads_under_strict(project: Project) -> None:
    project.write("vendor/fancylib.py", "import os\ndef shout(text):\n    return text.upper()\n")
    project.write("tools.py", """
        import fancylib

        def probe(input):
            return {"text": fancylib.shout(input["name"])}
    """)
    project.config([{"path": "./tools.py", "dependencies": ["fancylib"],
                     "dependency_root": "./vendor"}], policy=strict())
    assert project.run("ada").value == {"text": "ADA"}


# ------------------------------------------------------------------------- the lints


ENV_CASES = [
    ("import os\nX = os.environ\n", "os.environ"),
    ("from os import getenv\n", "getenv"),
    ("import os\nos.putenv('A', '1')\n", "putenv"),
    ("from os import environ\n", "environ"),
]


def test_the_env_lint_covers_the_spec_spellings() -> None:
    assert ENV_SPELLINGS == {"environ", "getenv", "putenv"}  # and os.environ through environ
    assert {spelled.split(".")[-1] for _, spelled in ENV_CASES} == ENV_SPELLINGS


@pytest.mark.parametrize("source, spelled", ENV_CASES, ids=[s for _, s in ENV_CASES])
def test_allow_env_false_refuses_a_module_that_names_the_environment(
        project: Project, source: str, spelled: str) -> None:
    project.write("tools.py", source)
    project.config(policy=strict("os"))
    line = source.count("\n")
    refused_at_start(project, f"./tools.py:{line}: Tool module './tools.py' names '{spelled}' "
                              "while tool_module_policy.allow_env is false.")


NETWORK = ["socket", "http", "urllib", "httpx", "requests", "aiohttp", "ssl", "websocket"]


def test_the_network_lint_has_exactly_the_spec_spellings() -> None:
    assert NETWORK_SPELLINGS == set(NETWORK)


@pytest.mark.parametrize("word", NETWORK)
def test_allow_network_false_refuses_a_module_that_names_the_network(project: Project,
                                                                     word: str) -> None:
    project.write("tools.py", f"def probe(input):\n    return {{'text': str({word})}}\n")
    project.config(policy=strict())
    refused_at_start(project, f"./tools.py:2: Tool module './tools.py' names '{word}' while "
                              "tool_module_policy.allow_network is false.")


def test_a_module_name_in_a_string_is_linted(project: Project) -> None:
    project.write("tools.py", "import importlib\nclient = importlib.import_module('http.client')\n")
    project.config(policy=strict("importlib", "http"))
    refused_at_start(project, "./tools.py:2: Tool module './tools.py' names 'http' while "
                              "tool_module_policy.allow_network is false.")


def test_comments_and_prose_are_not_linted(project: Project) -> None:
    project.write("tools.py", '''
        """Counts requests; no socket, no http, no environ here."""

        def probe(input):  # not a socket in sight, no eval either
            return {"text": "counts requests over http"}
    ''')
    project.config(policy=strict())
    assert project.run().value == {"text": "counts requests over http"}


def test_the_lint_is_off_when_the_setting_allows_it(project: Project) -> None:
    project.write("tools.py", """
        import socket

        def probe(input):
            return {"text": socket.__name__}
    """)
    project.config(policy=strict("socket", allow_network=True))
    assert project.run().value == {"text": "socket"}


# ------------------------------------------------------------------------- no policy


@pytest.fixture()
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server on 127.0.0.1 that keeps what the first client sends."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    received: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            received.append(conn.recv(1024))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    thread.join(timeout=10)
    server.close()


def test_without_a_policy_a_module_has_everything_the_process_has(
        project: Project, listener: tuple[int, list[bytes]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    port, received = listener
    monkeypatch.setenv("LUMA_SANDBOX_PROBE", "reachable-secret")
    project.fixture("unconfined.py")
    project.config()
    outcome = project.run(f"127.0.0.1:{port}")
    assert (outcome.code, outcome.value) == (0, {"text": "reachable-secret"})
    assert outcome.stderr == ""
    threading.Event().wait(0.05)
    assert received == [b"reachable-secret"]


def test_sandbox_none_is_no_sandbox_either(project: Project, listener: tuple[int, list[bytes]],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    port, received = listener
    monkeypatch.setenv("LUMA_SANDBOX_PROBE", "still-reachable")
    project.fixture("unconfined.py")
    project.config(policy={"sandbox": "none"})
    assert project.run(f"127.0.0.1:{port}").value == {"text": "still-reachable"}


def test_the_same_module_under_strict_is_refused(project: Project) -> None:
    project.fixture("unconfined.py")
    project.config(policy=strict())
    refused_at_start(project, "./tools.py:4: Tool module './tools.py' may not import 'os': it "
                              "is not in tool_module_policy.allow_builtins.")


# ------------------------------------------------------------------------- not a boundary


def test_strict_is_not_an_isolation_boundary(project: Project,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A module that passes every check of the strictest policy reaches the real ``os`` and
    reads the environment; its attempt to start a process is refused. This test passing is the
    documented contract: strict is not an isolation boundary. If it ever fails, the docs
    (docs/sandbox.md) must change with it."""
    monkeypatch.setenv("LUMA_SANDBOX_PROBE", "leaked")
    project.fixture("escape.py")
    project.config(policy=strict(allow_env=False, allow_network=False))
    assert project.errors() == []
    outcome = project.run("LUMA_SANDBOX_PROBE")
    assert (outcome.code, outcome.value) == (0, {
        "text": "leaked refused: Tool module './tools.py' may not start a process "
                "('subprocess.Popen'): sandbox 'strict' always forbids it."})


def test_an_allowed_module_leads_to_the_real_os(project: Project,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``os`` is handed over without its process and environment functions, but ``os.path``
    is the real ``posixpath``, which holds the real ``os``."""
    monkeypatch.setenv("LUMA_SANDBOX_PROBE", "leaked")
    project.write("tools.py", """
        import os

        def probe(input):
            real = getattr(os.path, "o" + "s")
            return {"text": getattr(real, "get" + "env")(input["name"])}
    """)
    project.config(policy=strict("os"))
    assert project.run("LUMA_SANDBOX_PROBE").value == {"text": "leaked"}


# ------------------------------------------------------------------------- max_concurrency

CONCURRENT = """schema Out {
  text: string
}
tool probe(name: string) -> Out {
  description: "probes"
}
tool other(name: string) -> Out {
  description: "probes too"
}
tool peak(name: string) -> Out {
  description: "how many calls were inside the module at once"
}
r = tool peak({ name: "x" })
"""


def _peak_of_six_calls(project: Project) -> int:
    runtime = project.runtime(CONCURRENT)

    async def calls() -> None:
        await asyncio.gather(*(runtime.pipeline.call(name, {"name": "x"}, CallContext(None, None))
                               for name in ["probe", "other"] * 3))

    asyncio.run(calls())
    return int(runtime.handlers["peak"]({"name": ""})["text"])


@pytest.mark.parametrize("policy, peak", [
    (None, 6),
    ({"sandbox": "none"}, 1),
    ({"sandbox": "none", "max_concurrency": 2}, 2),
    (strict("asyncio", max_concurrency=3), 3),
], ids=["no policy", "default of 1", "two", "strict three"])
def test_max_concurrency_limits_calls_into_one_module(project: Project,
                                                      policy: dict[str, Any] | None,
                                                      peak: int) -> None:
    project.fixture("concurrency.py")
    project.config(policy=policy)
    assert _peak_of_six_calls(project) == peak


def test_each_module_has_its_own_limit(project: Project) -> None:
    project.fixture("concurrency.py", "a.py")
    project.write("b.py", """
        import asyncio

        async def other(input):
            await asyncio.sleep(0.05)
            return {"text": "other"}
    """)
    text = (project.folder / "a.py").read_text().replace("async def other", "async def _other")
    project.write("a.py", text)
    project.config(["./a.py", "./b.py"], policy={"sandbox": "none"})
    loaded = project.load()
    assert loaded.limits["probe"] is loaded.limits["peak"]
    assert loaded.limits["probe"] is not loaded.limits["other"]
    assert _peak_of_six_calls(project) == 1  # the three probe calls, one at a time


def test_max_memory_mb_is_recorded_and_not_enforced(project: Project) -> None:
    project.write("tools.py", """
        def probe(input):
            block = bytearray(32 * 1024 * 1024)
            return {"text": str(len(block) // (1024 * 1024))}
    """)
    project.config(policy=strict(max_memory_mb=16))
    assert project.load().max_memory_mb == 16
    assert project.run().value == {"text": "32"}  # twice the limit, in the process itself
