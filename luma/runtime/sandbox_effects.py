"""What a strict module may *do*, however it got hold of the means: the effect rules.

The import guard (``luma.runtime.sandbox``) decides what ``import`` gives a strict module. A
module can reach real modules without it (every object leads back to the interpreter), so the
effects that matter are refused again where they happen: in a CPython audit hook (PEP 578),
which sees every process start, native-code load, file open, socket, frame access and code
change in the process, whoever asks.

The hook refuses an effect while code of a strict module is on the current thread's stack —
its top level while it loads, its handlers while they run, the helpers they call — so it does
not matter through which object the module reached the function. ``exec`` and ``compile`` are
refused only when the strict module's own code calls them, so the standard library may still
build code (``dataclasses``, ``namedtuple``).

The hook's state cannot be reached from Python: it lives in the closure of a function that only
the interpreter holds (an audit hook cannot be listed or removed), every name it uses is bound
when it is installed, and a module is registered through an audit event of its own, which can
only add rules. The hook is installed the first time a strict module loads; a program without
one pays nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from luma.runtime.sandbox_errors import STRICT, SandboxViolation

REGISTER = "luma.sandbox.strict"


class RefusedEffect(PermissionError, ValueError, SandboxViolation):
    """An effect the strict sandbox refuses. A ``PermissionError``, and a ``ValueError`` too,
    because that is what the standard library expects when frames cannot be had (``logging``,
    ``namedtuple`` and ``enum`` then carry on without a caller's name)."""


class StrictEffects(NamedTuple):
    """The effect rules of one strict module (its file, and the helpers it loads)."""

    who: str
    project_dir: str
    allow_network: bool
    allow_env: bool


def register(file: Path, effects: StrictEffects) -> None:
    """Hold the code compiled from ``file`` to ``effects`` (installing the hook first)."""
    install()
    sys.audit(REGISTER, str(file), tuple(effects))


#: Kept on ``sys``, not here: this module may be imported again (``importlib.reload``, or a
#: host that clears it from ``sys.modules``), and a second hook would walk the stack of the first.
_INSTALLED = "_luma_strict_effects_hook"

_ALWAYS = {
    "sys._getframe": "reach the interpreter's frames",
    "sys._current_frames": "reach the interpreter's frames",
    "sys._current_exceptions": "reach the interpreter's frames",
    "gc.get_objects": "inspect the live objects of the process",
    "gc.get_referrers": "inspect the live objects of the process",
    "gc.get_referents": "inspect the live objects of the process",
    "sys.settrace": "trace the interpreter",
    "sys.setprofile": "trace the interpreter",
    "subprocess.Popen": "start a process",
    "os.system": "start a process",
    "os.exec": "start a process",
    "os.posix_spawn": "start a process",
    "os.spawn": "start a process",
    "os.fork": "start a process",
    "os.forkpty": "start a process",
    "os.startfile": "start a process",
    "pty.spawn": "start a process",
    "os.kill": "signal a process",
    "os.killpg": "signal a process",
    "os.chdir": "change the working folder",
}
_FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_WRITES = frozenset({"os.remove", "os.rmdir", "os.rename", "os.mkdir", "os.chmod", "os.chown",
                     "os.link", "os.symlink", "os.truncate", "os.utime", "os.chflags",
                     "os.setxattr", "os.removexattr", "shutil.rmtree", "shutil.copyfile",
                     "shutil.copymode", "shutil.copystat", "shutil.copytree", "shutil.move",
                     "shutil.chown"})
_ENV_WRITES = frozenset({"os.putenv", "os.unsetenv"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def install() -> None:
    """Add the audit hook, once per process."""
    if getattr(sys, _INSTALLED, False):
        return
    setattr(sys, _INSTALLED, True)
    sys.addaudithook(_make_hook(_read_roots()))


def _read_roots() -> tuple[str, ...]:
    """Where a strict module's code may read files besides its project: the Python installation
    (the standard library, the environment's packages) and Luma itself."""
    luma_folder = Path(__file__).parent.parent  # luma/runtime/ is in the package's folder
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(luma_folder)}
    return tuple(sorted({os.path.realpath(r) for r in roots if r}))


def _make_hook(read_roots: tuple[str, ...]) -> Any:
    # Every name the hook uses is bound here, so that a module that reaches this module's
    # globals cannot change what the hook sees.
    getframe = sys._getframe
    realpath, fsdecode, join, getcwd, sep = (os.path.realpath, os.fsdecode, os.path.join,
                                             os.getcwd, os.sep)
    str_type, int_type, kind_of, any_of, truth = str, int, type, any, bool
    tuple_type, bool_type = tuple, bool
    effects_type, refused = StrictEffects, RefusedEffect
    always, frame_attributes, writes, env_writes = _ALWAYS, _FRAME_ATTRIBUTES, _WRITES, _ENV_WRITES
    write_flags, strict_name, register_event = _WRITE_FLAGS, STRICT, REGISTER
    strict_files: dict[str, StrictEffects] = {}
    busy: set[int] = set()
    from _thread import get_ident

    def holders(frame: Any, immediate: bool) -> list[StrictEffects]:
        found: list[StrictEffects] = []
        while frame is not None:
            effects = strict_files.get(frame.f_code.co_filename)
            if effects is not None:
                found.append(effects)
            if immediate:
                break
            frame = frame.f_back
        return found

    def inside(path: str, roots: Iterable[str]) -> bool:
        return any_of(path == root or path.startswith(root + sep) for root in roots)

    def where(path: Any) -> str | None:
        if kind_of(path) is int_type or path is None:
            return None  # an open file descriptor: no new file is reached
        text = fsdecode(path)
        return realpath(join(getcwd(), text))

    def judge(event: str, args: tuple[Any, ...], found: list[StrictEffects],
              caller: Any) -> str | None:
        if event == "exec" or event == "compile":
            if holders(caller, True):
                return f"run code it builds at run time ('{event}'): {strict_name} always " \
                       "forbids it"
            return None
        if not found:
            return None
        what = always.get(event)
        if what is not None:
            return f"{what} ('{event}'): {strict_name} always forbids it"
        if event == "object.__getattr__":
            return f"reach the interpreter's frames ('{args[1]}'): {strict_name} always " \
                   "forbids it"
        if event == "object.__setattr__" or event == "object.__delattr__":
            return f"replace a function's code ('{args[1]}'): {strict_name} always forbids it"
        if event.startswith("ctypes."):
            return f"load or call native code ('{event}'): {strict_name} always forbids it"
        if event.startswith("socket."):
            for effects in found:
                if not effects.allow_network:
                    return f"use the network ('{event}') while " \
                           "tool_module_policy.allow_network is false"
            return None
        if event in env_writes:
            for effects in found:
                if not effects.allow_env:
                    return f"change the environment ('{event}') while " \
                           "tool_module_policy.allow_env is false"
            return None
        writing = event in writes
        if event == "open":
            mode, flags = args[1], args[2]
            writing = (kind_of(mode) is str_type and any_of(c in mode for c in "wax+")) or (
                kind_of(flags) is int_type and truth(flags & write_flags))
        paths = [where(a) for a in (args[:2] if event in ("os.rename", "os.link", "os.symlink",
                                                         "shutil.copyfile", "shutil.copytree",
                                                         "shutil.move") else args[:1])]
        for path in paths:
            if path is None:
                continue
            for effects in found:
                if writing and not inside(path, (effects.project_dir,)):
                    return f"write '{path}': it is outside the project folder, and " \
                           f"{strict_name} keeps writes inside it"
                if not writing and not inside(path, (effects.project_dir, *read_roots)):
                    return f"read '{path}': it is outside the project folder, and " \
                           f"{strict_name} keeps reads inside it and the Python installation"
        return None

    watched = frozenset({*always, *writes, *env_writes, "exec", "compile", "open",
                         "object.__getattr__", "object.__setattr__", "object.__delattr__"})

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == register_event:
            # A plain tuple: a hook installed by an earlier import of this module must understand
            # a registration made through a later one.
            rules = args[1]
            if kind_of(args[0]) is str_type and kind_of(rules) is tuple_type and \
                    [kind_of(r) for r in rules] == [str_type, str_type, bool_type, bool_type]:
                strict_files.setdefault(args[0], effects_type(*rules))  # only ever added
            return
        if event not in watched and not event.startswith(("ctypes.", "socket.")):
            return
        if event == "object.__getattr__" and args[1] not in frame_attributes:
            return
        if (event == "object.__setattr__" or event == "object.__delattr__") and \
                args[1] != "__code__":
            return
        me = get_ident()
        if me in busy:
            return  # the hook's own frame walk (its f_code reads are audited too)
        busy.add(me)
        try:
            caller = getframe(1)  # the code that caused the event
            found = holders(caller, False)
            reason = judge(event, args, found, caller) if found else None
        finally:
            busy.discard(me)
        if reason is not None:
            raise refused(f"{found[0].who} may not {reason}.")

    return hook
