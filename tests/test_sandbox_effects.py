"""What a strict module can and cannot do once it has reached past the import guard.

The routes below are the ones that made the old claims false: the real ``__import__`` behind a
builtin's ``__self__`` or a standard module's ``__builtins__``, the real builtins behind
``LumaToolError``'s globals, the module's loader, the guard's own rules, and a traceback's
frames. Each test runs a real strict module through ``luma prog.luma``. The tests marked
*remains* pass on purpose: they are the routes docs/sandbox.md lists as still open.
"""

from __future__ import annotations

import collections
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.project import Project, isolated_imports, project, strict  # noqa: F401 (fixtures)

PREFIX = "error[TOOL_FAILED]: Tool 'probe' failed: "
WHO = "Tool module './tools.py'"


def failed_with(project: Project, message: str, name: str = "x") -> None:
    outcome = project.run(name)
    assert outcome.code == 1, outcome.stdout + outcome.stderr
    assert outcome.stderr.splitlines()[0] == PREFIX + message


def answered(project: Project, name: str = "x") -> str:
    outcome = project.run(name)
    assert outcome.code == 0, outcome.stderr
    text: str = outcome.value["text"]
    return text


# Three ways to the real ``__import__`` that do not pass through the guard, spelled so that the
# lint does not see them (it matches spellings; these tests are about what happens at run time).
REAL_IMPORT = {
    "builtin-self": "getattr(print.__self__, '__imp' + 'ort__')",
    "module-builtins": "luma_json.__builtins__['__imp' + 'ort__']",
    "subclass-walk": "next(c for c in ().__class__.__base__.__subclasses__() "
                     "if c.__name__ == '_wrap_close').__init__.__globals__['__builtins__']"
                     "['__imp' + 'ort__']",
}
#: The real ``__import__``, as the modules below reach it.
REAL = "getattr(print.__self__, '__imp' + 'ort__')"


@pytest.mark.parametrize("route", sorted(REAL_IMPORT))
def test_a_process_started_through_the_real_import_is_refused(project: Project,
                                                              route: str) -> None:
    project.write("tools.py", f"""
        import json as luma_json

        def probe(input):
            real_import = {REAL_IMPORT[route]}
            real_import("sub" + "process").run(["echo", "escaped"])
            return {{"text": "ran"}}
    """)
    project.config(policy=strict("json"))
    failed_with(project, f"{WHO} may not start a process ('subprocess.Popen'): sandbox 'strict' "
                         "always forbids it.")


@pytest.mark.parametrize("route", sorted(REAL_IMPORT))
def test_the_real_import_still_gives_modules_remains(project: Project, route: str) -> None:
    """*Remains*: the guard decides what ``import`` gives the module; a module that reaches the
    real ``__import__`` gets real modules. What it can do with them is held by the effect
    rules (the test above)."""
    project.write("tools.py", f"""
        import json as luma_json

        def probe(input):
            real_import = {REAL_IMPORT[route]}
            return {{"text": real_import("csv").__name__}}
    """)
    project.config(policy=strict("json"))
    assert answered(project) == "csv"


@pytest.mark.parametrize("call", ["real_eval('1 + 1')", "real_exec('x = 1')",
                                  "real_compile('1', 'f', 'ev' + 'al')"])
def test_code_built_at_run_time_is_refused_however_eval_was_reached(project: Project,
                                                                   call: str) -> None:
    project.write("tools.py", f"""
        def probe(input):
            real = print.__self__
            real_eval, real_exec, real_compile = (getattr(real, n) for n in
                                                  ("ev" + "al", "ex" + "ec", "comp" + "ile"))
            {call}
            return {{"text": "ran"}}
    """)
    project.config(policy=strict())
    event = "compile"  # eval and exec of a string compile it first
    failed_with(project, f"{WHO} may not run code it builds at run time ('{event}'): sandbox "
                         "'strict' always forbids it.")


def test_luma_tool_error_leads_to_no_builtins(project: Project) -> None:
    project.write("tools.py", """
        from luma import LumaToolError, Signal

        def probe(input):
            found = []
            for f in (LumaToolError.__init__, LumaToolError.fields, Signal.wait, Signal.abort):
                g = f.__globals__
                found.append(",".join(sorted(k for k in g if k != "__builtins__")) + "/" +
                             ",".join(sorted(g["__builtins__"])))
            return {"text": " | ".join(found)}
    """)
    project.config(policy=strict())
    types_only = "BaseException,Exception,bool,dict,float,int,list,str,super,tuple,type"
    signal = "Empty,RLock,Signal,SignalAborted,SimpleQueue,__name__/" + types_only
    assert answered(project) == " | ".join([
        "LumaToolError,__name__/" + types_only, "LumaToolError,__name__/" + types_only,
        signal, signal])


def _reachable(roots: list[Any], depth: int) -> Iterator[Any]:
    """Every object reachable from ``roots`` through attributes (no calls), breadth first."""
    seen: set[int] = set()
    queue = collections.deque((r, 0) for r in roots)
    while queue:
        obj, d = queue.popleft()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        yield obj
        if d == depth:
            continue
        children: list[Any] = []
        if isinstance(obj, dict):
            children += list(obj.keys()) + list(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            children += list(obj)
        for attr in ("__dict__", "__globals__", "__closure__", "__self__", "__func__", "__mro__",
                     "__defaults__", "__kwdefaults__", "cell_contents", "fget", "fset",
                     "__wrapped__", "__traceback__", "__context__", "__cause__", "args"):
            try:
                children.append(getattr(obj, attr))
            except (AttributeError, ValueError):
                pass
        if hasattr(type(obj), "__slots__") and not isinstance(obj, type):
            for slot in type(obj).__slots__:
                children.append(getattr(obj, slot, None))
        queue.extend((c, d + 1) for c in children)


def test_nothing_of_luma_and_no_module_is_reachable_from_what_a_handler_is_handed() -> None:
    """From the error class, the signal (its class and an instance, fired, with a listener),
    and a raised error, no attribute path reaches a module, a frame or any object of
    Luma's other than these."""
    from luma.runtime.errors import LumaToolError
    from luma.runtime.signal import Signal, SignalAborted

    signal = Signal()
    signal.add_listener(list)  # a function defined here would lead to this test's globals
    fired = Signal()
    fired.abort("timeout")
    try:
        fired.throw_if_aborted()
    except SignalAborted as exc:
        raised: Any = exc
    handed = {LumaToolError, Signal, SignalAborted}
    for obj in _reachable([LumaToolError, Signal, signal, fired, raised,
                           LumaToolError("E", "m", details={"a": 1})], depth=8):
        assert not isinstance(obj, (types.ModuleType, types.FrameType)), obj
        owner = getattr(type(obj), "__module__", "") or ""
        if owner.startswith("luma") and not isinstance(obj, type):
            assert type(obj) in handed, obj
        if isinstance(obj, type) and (obj.__module__ or "").startswith("luma"):
            assert obj in handed, obj


def test_the_module_has_no_loader(project: Project, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours")
    project.write("tools.py", """
        def probe(input):
            return {"text": repr(__loader__) + " " + repr(__spec__)}
    """)
    project.config(policy=strict())
    assert answered(project) == "None None"


def test_a_real_loader_reached_another_way_cannot_read_outside_the_project(
        project: Project, tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text("SECRET = 'not yours'\n")
    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')

        def probe(input):
            machinery = REAL("importlib.machinery").machinery
            loader = machinery.SourceFileLoader("outside", input["name"])
            return {"text": loader.get_data(input["name"]).decode()}
    """)
    project.config(policy=strict())
    failed_with(project, f"{WHO} may not read '{outside}': it is outside the project folder, and "
                         "sandbox 'strict' keeps reads inside it and the Python installation.",
                name=str(outside))


def test_files_inside_the_project_may_be_read_and_written(project: Project) -> None:
    project.write("data.txt", "inside")
    project.write("tools.py", """
        import pathlib

        def probe(input):
            here = pathlib.Path(__file__).parent
            (here / "out.txt").write_text("written")
            return {"text": (here / "data.txt").read_text() + " " +
                            (here / "out.txt").read_text()}
    """)
    project.config(policy=strict("pathlib"))
    assert answered(project) == "inside written"


def test_a_write_outside_the_project_is_refused(project: Project, tmp_path: Path) -> None:
    target = tmp_path / "planted.txt"
    project.write("tools.py", """
        import pathlib

        def probe(input):
            pathlib.Path(input["name"]).write_text("planted")
            return {"text": "wrote"}
    """)
    project.config(policy=strict("pathlib"))
    failed_with(project, f"{WHO} may not write '{target}': it is outside the project folder, and "
                         "sandbox 'strict' keeps writes inside it.", name=str(target))
    assert not target.exists()


def test_the_guard_cannot_be_switched_off(project: Project) -> None:
    project.write("tools.py", """
        def probe(input):
            guard = __builtins__["__imp" + "ort__"]
            tries = []
            for target, name, value in ((guard.rules, "strict", False),
                                        (guard, "rules", guard.rules._replace(strict=False))):
                try:
                    object.__setattr__(target, name, value)
                    tries.append("changed")
                except AttributeError:
                    tries.append("refused")
            try:
                guard("c" + "sv")
                tries.append("imported csv")
            except ImportError as exc:
                tries.append(str(exc))
            return {"text": "; ".join(tries)}
    """)
    project.config(policy=strict())
    assert answered(project) == ("refused; refused; Tool module './tools.py' may not import 'csv': "
                                 "it is not in tool_module_policy.allow_builtins.")


@pytest.mark.parametrize("walk", [
    "err.__traceback__.tb_frame",
    "err.__traceback__.tb_next.tb_frame",
    "REAL('sys')._getframe()",
    "REAL('gc').get_referrers(input)",
    "REAL('gc').get_objects()",
])
def test_the_interpreter_frames_and_live_objects_are_out_of_reach(project: Project,
                                                                 walk: str) -> None:
    """A handler that catches an error raised inside Luma (the guard's refusal) cannot climb
    its traceback into the pipeline, and cannot ask the garbage collector for Luma's objects."""
    project.write("tools.py", f"""
        REAL = getattr(print.__self__, "__imp" + "ort__")

        def probe(input):
            try:
                __builtins__["__imp" + "ort__"]("c" + "sv")
            except ImportError as caught:
                err = caught
            return {{"text": repr({walk})}}
    """)
    project.config(policy=strict())
    outcome = project.run()
    assert outcome.code == 1
    line = outcome.stderr.splitlines()[0]
    assert line.startswith(PREFIX + f"{WHO} may not ")
    assert "sandbox 'strict' always forbids it." in line
    assert any(what in line for what in ("reach the interpreter's frames",
                                         "inspect the live objects of the process"))


def test_a_function_s_code_cannot_be_replaced(project: Project) -> None:
    project.write("tools.py", """
        from luma import LumaToolError

        def probe(input):
            LumaToolError.fields.__code__ = (lambda self: {}).__code__
            return {"text": "patched"}
    """)
    project.config(policy=strict())
    failed_with(project, f"{WHO} may not replace a function's code ('__code__'): sandbox "
                         "'strict' always forbids it.")


def test_the_network_is_refused_at_the_socket_while_allow_network_is_false(
        project: Project) -> None:
    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')

        def probe(input):
            sock = getattr(REAL("sock" + "et"), "sock" + "et")()
            try:
                sock.connect(("127.0.0.1", 9))
            finally:
                sock.close()
            return {"text": "connected"}
    """)
    project.config(policy=strict(allow_network=False))
    failed_with(project, f"{WHO} may not use the network ('socket.__new__') while "
                         "tool_module_policy.allow_network is false.")


def test_standard_library_code_that_builds_code_still_works(project: Project) -> None:
    project.write("tools.py", """
        import collections
        import dataclasses
        import enum

        Point = collections.namedtuple("Point", "x y")

        @dataclasses.dataclass
        class Box:
            size: int

        Color = enum.Enum("Color", "RED GREEN")

        def probe(input):
            return {"text": f"{Point(1, 2).x} {Box(3).size} {Color.RED.name}"}
    """)
    project.config(policy=strict("collections", "dataclasses", "enum"))
    assert answered(project) == "1 3 RED"


# ------------------------------------------------------------------------- what remains


def test_the_environment_can_be_read_through_a_real_os_remains(
        project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """*Remains*: reading the environment is not an event the interpreter reports, so a module
    that reaches the real ``os`` reads it whatever ``allow_env`` says."""
    monkeypatch.setenv("LUMA_SANDBOX_PROBE", "leaked")
    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')

        def probe(input):
            real_os = REAL("os")
            return {"text": getattr(real_os, "envi" + "ron").get(input["name"], "")}
    """)
    project.config(policy=strict(allow_env=False))
    assert answered(project, "LUMA_SANDBOX_PROBE") == "leaked"


def test_work_handed_to_another_thread_is_not_held_remains(project: Project,
                                                           tmp_path: Path) -> None:
    """*Remains*: the rules hold while the module's code is on the stack. A standard-library
    function run by another thread, with none of the module's code on that thread's stack,
    is not held."""
    marker = tmp_path / "marker"
    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')

        def probe(input):
            thread = REAL("threading").Thread(target=getattr(REAL("os"), "sys" + "tem"),
                                              args=("touch " + input["name"],))
            thread.start()
            thread.join()
            return {"text": "handed over"}
    """)
    project.config(policy=strict())
    assert answered(project, str(marker)) == "handed over"
    assert marker.exists()


def test_rewriting_the_standard_library_misleads_the_file_rule_remains(
        project: Project, tmp_path: Path) -> None:
    """*Remains*: the file rule resolves paths with the standard library's ``os.path``; a
    module that rewrites that code can make an outside path look inside."""
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours")
    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')

        def probe(input):
            posixpath = REAL("posixpath")
            here = posixpath.dirname(__file__)
            saved = posixpath.abspath
            posixpath.abspath = lambda path, _here=here: _here + "/anything"
            try:
                return {"text": getattr(print.__self__, "op" + "en")(input["name"]).read()}
            finally:
                posixpath.abspath = saved  # the rest of the process needs it
    """)
    project.config(policy=strict())
    assert answered(project, str(outside)) == "not yours"
