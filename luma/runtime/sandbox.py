"""The import rules of a tool module and the ``strict`` sandbox (RUNTIME.md §6).

``strict`` is a contract check, not an isolation boundary. What it enforces, fail-closed, when
the module loads and whenever it imports later: the standard-library allowlist
(``allow_builtins``), the always-forbidden modules, the manifest's ``dependencies`` and where
imported code may come from (the project folder). It does so by running the module's code in a
namespace whose ``__builtins__`` is an explicit dict of safe builtins with a guarded
``__import__``, so ``import x``, ``__import__(x)`` and ``importlib.import_module(x)`` all pass
through one check. Everything else — ``allow_env``, ``allow_network``, the dynamic-code names —
is a lint over the module's text that matches spellings. Python code can walk from any object to
the whole interpreter (``().__class__.__base__.__subclasses__()``), so a module that names none
of the spellings runs with the process's privileges; ``docs/sandbox.md`` says so, and a test
keeps it true.

A manifest's ``dependencies`` list applies with or without a sandbox: the module may import
only the listed third-party packages, and no dynamic import at all.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib.machinery
import importlib.util
import io
import os
import re
import sys
import threading
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from luma.runtime.modules import ToolModuleError
from luma.runtime.sandbox_errors import STRICT, SandboxViolation

#: The builtins a strict module gets: data, iteration, classes and exceptions. Not there:
#: ``eval``/``exec``/``compile`` (always forbidden), ``open``/``input``/``breakpoint`` (I/O and
#: the debugger), ``globals``/``locals``/``vars`` and the interactive helpers.
SAFE_BUILTINS = (
    "abs", "aiter", "all", "anext", "any", "ascii", "bin", "bool", "bytearray", "bytes",
    "callable", "chr", "classmethod", "complex", "delattr", "dict", "dir", "divmod",
    "enumerate", "filter", "float", "format", "frozenset", "getattr", "hasattr", "hash", "hex",
    "id", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "memoryview",
    "min", "next", "object", "oct", "ord", "pow", "print", "property", "range", "repr",
    "reversed", "round", "set", "setattr", "slice", "sorted", "staticmethod", "str", "sum",
    "super", "tuple", "type", "zip", "__build_class__", "None", "True", "False", "Ellipsis",
    "NotImplemented",
)

#: Builtins that strict always refuses, however they are reached.
FORBIDDEN_BUILTINS = ("eval", "exec", "compile", "__import__")

#: Modules strict refuses even when ``allow_builtins`` lists them: the spec's three, and the
#: modules that hand out the same things under another name (process spawning, foreign
#: functions, the real builtins, loading or running code by path).
FORBIDDEN_MODULES = frozenset({
    "subprocess", "_posixsubprocess", "ctypes", "_ctypes", "pty", "posix", "nt", "builtins",
    "multiprocessing", "_multiprocessing", "runpy", "code", "codeop",
})

#: ``os`` names strict hides: running other programs.
_OS_PROCESS = re.compile(r"_?(system|popen|spawn\w*|exec\w*|posix_spawnp?|fork\w*)")
#: ``os`` names hidden too when ``allow_env`` is false.
_OS_ENV = frozenset({"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"})

#: The lint spellings (RUNTIME.md §6), matched as whole names.
ENV_SPELLINGS = frozenset({"environ", "getenv", "putenv"})
NETWORK_SPELLINGS = frozenset({"socket", "http", "urllib", "httpx", "requests", "aiohttp", "ssl",
                               "websocket"})
_LINTED_MODULES = frozenset({"subprocess", "ctypes", "pty"})
_OS_SPELLED = re.compile(r"system|popen|spawn\w*|exec\w*")
_DYNAMIC_IMPORTS = frozenset({"__import__", "import_module"})
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")

#: What ``import luma`` gives a strict module.
LUMA_EXPORTS = ("LumaToolError", "Signal")


class SandboxRefusal(ImportError, SandboxViolation):
    """An import the module's rules refuse; it imported nothing."""


class RefusedName(NameError, SandboxViolation):
    """A builtin the strict sandbox does not provide."""


class RefusedAttribute(AttributeError, SandboxViolation):
    """A name hidden from a strict module (``os.system``, ``importlib.util``, ...)."""


class ImportRules(NamedTuple):
    """What one module may import, and how strictly its code is checked.

    ``strict`` turns on the sandbox (``allow_builtins``, forbidden names, the lint, the project
    confinement); ``dependencies`` is the manifest's list (None: not given), ``dependencies_key``
    where it was written, for messages. A tuple, so that nothing — not even
    ``object.__setattr__`` from a module that reached it — can change the rules once made.
    """

    project_dir: Path
    strict: bool = False
    allow_builtins: frozenset[str] = frozenset()
    allow_env: bool = True
    allow_network: bool = True
    dependencies: frozenset[str] | None = None
    dependencies_key: str = "dependencies"
    dependency_root: Path | None = None

    @property
    def guarded(self) -> bool:
        """Whether the module's imports go through a guard at all."""
        return self.strict or self.dependencies is not None

    def fingerprint(self) -> str:
        deps = ",".join(sorted(self.dependencies)) if self.dependencies is not None else "-"
        return "|".join((str(self.project_dir), str(self.strict),
                         ",".join(sorted(self.allow_builtins)), str(self.allow_env),
                         str(self.allow_network), deps, str(self.dependency_root)))


# ------------------------------------------------------------------------------ the executor


class GuardedExecutor:
    """Runs one tool module under its rules (the ``executor`` of ``load_tool_module``).

    The file is read once, here: those bytes (``data``, for the integrity check) are the ones
    checked (static imports, the lint) and the ones that run — never a cached ``.pyc`` — so
    nothing of the module runs before every load-time check has passed. ``key`` covers the
    bytes and the rules, so a module is reused only for the same file content under the same
    rules.
    """

    def __init__(self, file: Path, shown: str, rules: ImportRules) -> None:
        self.file = file
        self.shown = shown
        self.rules = rules
        self.data = file.read_bytes()
        digest = hashlib.sha256(self.data)
        digest.update(rules.fingerprint().encode())
        self.key = digest.hexdigest()[:12]

    def execute(self, module: ModuleType, file: Path) -> None:
        namespace = vars(module)
        guard = None
        if self.rules.guarded:
            guard = ImportGuard.create(self.rules, f"Tool module '{self.shown}'", self.file.parent)
        code = _checked_code(self.data, self.file, self.shown, guard)
        if guard is not None:
            namespace["__builtins__"] = guard.builtins
        if self.rules.strict:
            # No importlib loader: its get_data and load_module read and run any file.
            namespace["__loader__"] = namespace["__spec__"] = None
            _hold_to_effects(self.file, self.rules, f"Tool module '{self.shown}'")
        try:
            exec(code, namespace)  # the module's own code, under its guard
        except SandboxViolation as exc:
            raise ToolModuleError(str(exc), self.shown, _line_in(exc, self.file)) from None


def _hold_to_effects(file: Path, rules: ImportRules, who: str) -> None:
    """Hold the code compiled from ``file`` to the effect rules (``sandbox_effects``)."""
    from luma.runtime.sandbox_effects import StrictEffects, register

    register(file, StrictEffects(who, os.path.realpath(rules.project_dir), rules.allow_network,
                                 rules.allow_env))


def _checked_code(data: bytes, file: Path, shown: str, guard: ImportGuard | None) -> Any:
    """Parse ``data``; with a guard, refuse it for its first static import or lint finding
    (raising :class:`ToolModuleError`, located); return the code object to run."""
    tree = ast.parse(data, filename=str(file))
    if guard is not None:
        finding = guard.first_finding(tree, _decode(data))
        if finding is not None:
            line, message = finding
            raise ToolModuleError(message, shown, line)
    return compile(tree, str(file), "exec", dont_inherit=True)


def _decode(data: bytes) -> str:
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding, errors="replace").removeprefix("\ufeff")


def _line_in(exc: BaseException, file: Path) -> int | None:
    """The innermost line of ``file`` in the traceback."""
    line = None
    tb = exc.__traceback__
    name = str(file)
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == name:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


# --------------------------------------------------------------------------------- the guard


@dataclass(slots=True)
class _Decision:
    kind: str                      # stdlib, luma, future, dependency, helper
    spec: Any = None               # the found spec, for code loaded from the project


class ImportGuard(NamedTuple):
    """The ``__import__`` of a guarded module, its builtins and its proxies of ``os``,
    ``importlib`` and ``luma``. ``who`` names the module in messages.

    A tuple: the module's ``__import__`` is this guard, and a module must not be able to swap
    its rules (``object.__setattr__`` cannot set a tuple's fields). Make one with
    :meth:`create`."""

    rules: ImportRules
    who: str
    root: str
    module_dir: Path
    helpers: dict[Path, ModuleType]
    lock: Any
    proxies: dict[str, ModuleType]
    builtins: dict[str, Any]

    @classmethod
    def create(cls, rules: ImportRules, who: str, module_dir: Path,
               helpers: dict[Path, ModuleType] | None = None,
               root: str | None = None) -> ImportGuard:
        guard = cls(rules, who, root if root is not None else who[0].lower() + who[1:],
                    module_dir, {} if helpers is None else helpers, threading.RLock(), {},
                    _StrictBuiltins(who) if rules.strict else {})
        guard.builtins.update(guard._make_builtins())
        return guard

    # -------------------------------------------------------------------------- decisions
    def refusal(self, name: str, reason: str) -> SandboxRefusal:
        return SandboxRefusal(f"{self.who} may not import '{name}': {reason}.", name=name)

    def decide(self, name: str) -> _Decision:
        """Whether ``name`` (absolute) may be imported, and what kind of module it is; raises
        :class:`SandboxRefusal`. Finds modules without running them."""
        rules = self.rules
        top = name.partition(".")[0]
        if top == "__future__":
            return _Decision("future")
        if top == "luma":
            if rules.strict and name != "luma":
                raise self.refusal(name, f"under {STRICT} only 'luma' itself "
                                         f"({', '.join(LUMA_EXPORTS)}) may be imported")
            return _Decision("luma")
        if top in sys.stdlib_module_names:
            if rules.strict:
                if _forbidden_module(name):
                    raise self.refusal(name, f"{STRICT} always forbids it")
                if not _listed(name, rules.allow_builtins):
                    raise self.refusal(name, "it is not in tool_module_policy.allow_builtins")
            return _Decision("stdlib")
        return self._decide_third_party(name, top)

    def _decide_third_party(self, name: str, top: str) -> _Decision:
        rules = self.rules
        listed = rules.dependencies is None or top in rules.dependencies
        not_listed = f"it is not in {rules.dependencies_key}"
        root = rules.dependency_root
        if root is not None:
            spec = importlib.machinery.PathFinder.find_spec(top, [str(root)])
            if spec is not None:
                if not listed:
                    raise self.refusal(name, not_listed)
                self._confine(name, spec, shared=True)
                return _Decision("dependency", spec)
        spec = importlib.machinery.PathFinder.find_spec(top, [str(self.module_dir)])
        if spec is not None:  # project code beside the module: not a third-party package
            if not rules.strict:
                return _Decision("dependency", spec)
            if rules.dependencies is not None and top in rules.dependencies:
                self._confine(name, spec, shared=True)
                return _Decision("dependency", spec)  # listed: loaded as ordinary Python
            self._confine(name, spec, shared=False)
            if spec.submodule_search_locations is not None:
                raise self.refusal(name, f"it is a package in the project folder, and under "
                                         f"{STRICT} a project module that is not a listed "
                                         "dependency must be a single file")
            if name != top:
                raise self.refusal(name, f"'{top}' is a single-file module, not a package")
            return _Decision("helper", spec)
        if not listed:
            raise self.refusal(name, not_listed)
        if rules.strict:
            origin = _origin_elsewhere(top)
            if origin is not None:
                raise self.refusal(name, f"it loads from outside the project folder ({origin}), "
                                         f"which {STRICT} forbids")
        return _Decision("dependency")

    def _confine(self, name: str, spec: Any, *, shared: bool) -> None:
        """Under strict, code loaded for the module must resolve inside the project folder
        (a symlink that leads out is refused). A ``shared`` module is imported as ordinary
        Python, so what counts is the module of that name already loaded, if there is one."""
        origin = spec.origin if spec.has_location else None
        if origin is None and spec.submodule_search_locations:
            origin = next(iter(spec.submodule_search_locations))
        loaded = sys.modules.get(name.partition(".")[0]) if shared else None
        if loaded is not None and getattr(loaded, "__file__", None):
            origin = loaded.__file__  # an import returns what is loaded already
        if origin is None:
            return
        resolved = Path(origin).resolve()
        if not resolved.is_relative_to(self.rules.project_dir):
            raise self.refusal(name, f"it loads from outside the project folder ({resolved}), "
                                     f"which {STRICT} forbids")

    # -------------------------------------------------------------------------- importing
    def __call__(self, name: str, globals: Any = None, locals: Any = None,
                 fromlist: Any = (), level: int = 0) -> ModuleType:
        if level:
            if self.rules.strict:
                raise SandboxRefusal(f"{self.who} may not use a relative import: {STRICT} "
                                     "loads the module on its own, outside any package.")
            return builtins.__import__(name, globals, locals, fromlist, level)
        decision = self.decide(name)
        with self.lock:
            return self._import(name, decision, fromlist)

    def import_module(self, name: str, package: str | None = None) -> ModuleType:
        """``importlib.import_module`` for the module: refused outright when its manifest lists
        dependencies; otherwise the same check as an ``import`` statement."""
        if self.rules.dependencies is not None:
            raise SandboxRefusal(f"{self.who} may not import '{name}' dynamically: dynamic "
                                 f"imports are refused when {self.rules.dependencies_key} is "
                                 "given.", name=name)
        if name.startswith("."):
            return self(name.lstrip("."), None, None, (), len(name) - len(name.lstrip(".")))
        return self(name, None, None, ("__name__",), 0)

    def _import(self, name: str, decision: _Decision, fromlist: Any) -> ModuleType:
        top = name.partition(".")[0]
        rules = self.rules
        if decision.kind == "luma":
            if rules.strict:
                return self._proxy("luma")
            return builtins.__import__(name, None, None, fromlist, 0)
        if decision.kind == "helper":
            return self._helper(decision.spec)
        if decision.kind == "dependency" and decision.spec is not None and top not in sys.modules:
            _load_spec(top, decision.spec)
        module = builtins.__import__(name, None, None, fromlist, 0)
        if top in ("os", "importlib") and (not fromlist or name == top):
            return self._proxy(top)
        return module

    def _proxy(self, name: str) -> ModuleType:
        proxy = self.proxies.get(name)
        if proxy is None:
            make = {"os": self._os_proxy, "importlib": self._importlib_proxy,
                    "luma": self._luma_proxy}[name]
            proxy = self.proxies[name] = make()
        return proxy

    def _os_proxy(self) -> ModuleType:
        import os

        if not self.rules.strict:
            return os
        hidden: dict[str, str] = {}
        for key in vars(os):
            if _OS_PROCESS.fullmatch(key):
                hidden[key] = f"{STRICT} always forbids it"
            elif key in _OS_ENV and not self.rules.allow_env:
                hidden[key] = "tool_module_policy.allow_env is false"
        return _module_proxy("os", os, hidden, self.who)

    def _importlib_proxy(self) -> ModuleType:
        import importlib

        if self.rules.strict:
            proxy = ModuleType("importlib", importlib.__doc__)
            proxy.import_module = self.import_module  # type: ignore[attr-defined]
            who = self.who

            def __getattr__(attr: str) -> Any:
                raise RefusedAttribute(f"{who} may not use 'importlib.{attr}': under {STRICT} "
                                       "importlib offers only import_module.", name=attr)

            vars(proxy)["__getattr__"] = __getattr__
            return proxy
        proxy = _module_proxy("importlib", importlib, {}, self.who)
        proxy.import_module = self.import_module  # type: ignore[attr-defined]
        return proxy

    def _luma_proxy(self) -> ModuleType:
        # what a module may import from luma, taken from where it lives (the package itself
        # also exposes the API, which a tool module has no use for)
        from luma.runtime.errors import LumaToolError
        from luma.runtime.signal import Signal

        proxy = ModuleType("luma", "Luma, as a tool module sees it.")
        exports: dict[str, Any] = {"LumaToolError": LumaToolError, "Signal": Signal}
        for attr in LUMA_EXPORTS:
            setattr(proxy, attr, exports[attr])
        return proxy

    def _helper(self, spec: Any) -> ModuleType:
        """A single-file module of the project, loaded under the same rules."""
        file = Path(spec.origin).resolve()
        loaded = self.helpers.get(file)
        if loaded is not None:
            return loaded
        shown = file.relative_to(self.rules.project_dir).as_posix()
        guard = ImportGuard.create(self.rules, f"Module '{shown}' (imported by {self.root})",
                            file.parent, self.helpers, self.root)
        data = file.read_bytes()
        name = f"luma_sandboxed_{_safe(file.stem)}_{hashlib.sha256(data).hexdigest()[:12]}"
        module = ModuleType(name)
        module.__file__ = str(file)
        try:
            code = _checked_code(data, file, shown, guard)
        except ToolModuleError as exc:
            raise SandboxRefusal(exc.message, name=spec.name) from None
        vars(module)["__builtins__"] = guard.builtins
        _hold_to_effects(file, self.rules, f"Module '{shown}' (imported by {self.root})")
        self.helpers[file] = module
        sys.modules[name] = module  # classes defined in it are looked up by module name
        try:
            exec(code, vars(module))  # the helper's own code, under its guard
        except BaseException:
            del self.helpers[file]
            sys.modules.pop(name, None)
            raise
        return module

    # -------------------------------------------------------------------------- builtins
    def _make_builtins(self) -> dict[str, Any]:
        table: dict[str, Any]
        if not self.rules.strict:
            table = dict(vars(builtins))
            table["__import__"] = self
            return table
        table = {}
        for name in SAFE_BUILTINS:
            table[name] = getattr(builtins, name)
        for name, value in vars(builtins).items():
            if isinstance(value, type) and issubclass(value, BaseException):
                table[name] = value
        table["__import__"] = self
        return table

    # -------------------------------------------------------------------------- load time
    def first_finding(self, tree: ast.AST, text: str) -> tuple[int, str] | None:
        """The first refused static import or lint finding: ``(line, message)``."""
        findings = list(self._static_imports(tree)) + list(self._lint(text))
        return min(findings, key=lambda f: f[0]) if findings else None

    def _static_imports(self, tree: ast.AST) -> Iterator[tuple[int, str]]:
        for node in ast.walk(tree):
            names: list[str] = []
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    if self.rules.strict:
                        yield node.lineno, (f"{self.who} may not use a relative import: {STRICT} "
                                            "loads the module on its own, outside any package.")
                    continue
                assert node.module is not None
                names = [node.module]
                if self.rules.strict:
                    for alias in node.names:
                        full = f"{node.module}.{alias.name}"
                        if node.module == "os" and _OS_SPELLED.fullmatch(alias.name):
                            yield node.lineno, self._names(full)
                        elif node.module == "importlib" and alias.name != "import_module":
                            yield node.lineno, (f"{self.who} may not use '{full}': under "
                                                f"{STRICT} importlib offers only import_module.")
            for name in names:
                try:
                    self.decide(name)
                except SandboxRefusal as exc:
                    yield node.lineno, str(exc)

    def _names(self, spelled: str, setting: str | None = None) -> str:
        """A lint finding: the spelling is always forbidden, or ``setting`` is false."""
        if setting is None:
            return f"{self.who} names '{spelled}', which {STRICT} always forbids."
        return f"{self.who} names '{spelled}' while tool_module_policy.{setting} is false."

    def _lint(self, text: str) -> Iterator[tuple[int, str]]:
        rules = self.rules
        for word in _spellings(text):
            if rules.strict:
                if word.is_builtin_use and word.text in FORBIDDEN_BUILTINS:
                    yield word.line, self._names(word.text)
                if word.text in _LINTED_MODULES:
                    yield word.line, self._names(word.text)
                if word.owner == "os" and _OS_SPELLED.fullmatch(word.text):
                    yield word.line, self._names(f"os.{word.text}")
                if not rules.allow_env and word.text in ENV_SPELLINGS:
                    is_os_environ = (word.owner, word.text) == ("os", "environ")
                    spelled = "os.environ" if is_os_environ else word.text
                    yield word.line, self._names(spelled, "allow_env")
                if not rules.allow_network and word.text in NETWORK_SPELLINGS:
                    yield word.line, self._names(word.text, "allow_network")
            if rules.dependencies is not None and word.text in _DYNAMIC_IMPORTS and (
                    word.text == "import_module" or word.is_builtin_use):
                yield word.line, (f"{self.who} uses a dynamic import ('{word.text}'), and "
                                  f"dynamic imports are refused when {rules.dependencies_key} "
                                  "is given.")


class _StrictBuiltins(dict):  # type: ignore[type-arg]
    """The builtins of a strict module: a missing name is refused with the rule that applies."""

    def __init__(self, who: str) -> None:
        super().__init__()
        self.who = who

    def _reason(self, name: str) -> str:
        if name in FORBIDDEN_BUILTINS:
            return f"{self.who} may not use '{name}': {STRICT} always forbids it."
        return (f"{self.who} may not use '{name}': it is not among the builtins {STRICT} "
                "provides.")

    def __missing__(self, name: str) -> Any:
        if hasattr(builtins, name):
            raise RefusedName(self._reason(name), name=name)
        raise NameError(f"name '{name}' is not defined", name=name)

    def __getattr__(self, name: str) -> Any:
        if hasattr(builtins, name):
            raise RefusedAttribute(self._reason(name), name=name)
        raise AttributeError(f"'dict' object has no attribute '{name}'", name=name)


def _module_proxy(name: str, real: ModuleType, hidden: dict[str, str], who: str) -> ModuleType:
    """A module with ``real``'s names except ``hidden`` (name → why); reading a hidden name
    raises ``AttributeError`` with the rule."""
    proxy = ModuleType(name, real.__doc__)
    for key, value in vars(real).items():
        if key not in hidden and key not in ("__getattr__", "__builtins__"):
            vars(proxy)[key] = value

    def __getattr__(attr: str) -> Any:
        if attr in hidden:
            raise RefusedAttribute(f"{who} may not use '{name}.{attr}': {hidden[attr]}.",
                                   name=attr)
        raise AttributeError(f"module '{name}' has no attribute '{attr}'", name=attr)

    vars(proxy)["__getattr__"] = __getattr__
    return proxy


def _load_spec(name: str, spec: Any) -> ModuleType:
    """Import the top-level module ``name`` from an already found spec, as ``import`` does."""
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _origin_elsewhere(top: str) -> str | None:
    """Where ``top`` is (or would be) loaded from outside the project: its file or folder."""
    loaded = sys.modules.get(top)
    if loaded is not None:
        return getattr(loaded, "__file__", None) or "a built-in module"
    try:
        spec = importlib.machinery.PathFinder.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin and spec.has_location:
        return spec.origin
    locations = list(spec.submodule_search_locations or [])
    return locations[0] if locations else None


def _forbidden_module(name: str) -> bool:
    parts = name.split(".")
    if parts[0] == "importlib" and len(parts) > 1:
        return True  # importlib's submodules load code by path
    return any(".".join(parts[:i]) in FORBIDDEN_MODULES for i in range(1, len(parts) + 1))


def _listed(name: str, allowed: frozenset[str]) -> bool:
    parts = name.split(".")
    return any(".".join(parts[:i]) in allowed for i in range(1, len(parts) + 1))


def _safe(stem: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in stem)


# --------------------------------------------------------------------------------- the lint


@dataclass(frozen=True, slots=True)
class _Word:
    text: str
    line: int
    owner: str | None = None          # `os` in `os.system`
    is_builtin_use: bool = False      # a bare name (not an attribute), or a string equal to it


def _spellings(text: str) -> Iterator[_Word]:
    """The words a lint looks at: every name in the code, and the parts of every string
    literal that is a (dotted) identifier, such as ``"socket"`` or ``"http.client"``.
    Comments and prose in strings are not looked at."""
    previous: list[tokenize.TokenInfo] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return
    for tok in tokens:
        if tok.type == tokenize.NAME:
            after_dot = bool(previous) and previous[-1].type == tokenize.OP and \
                previous[-1].string == "."
            owner = previous[-2].string if after_dot and len(previous) > 1 and \
                previous[-2].type == tokenize.NAME else None
            yield _Word(tok.string, tok.start[0], owner, not after_dot)
        elif tok.type == tokenize.STRING:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):
                value = None  # an f-string
            if isinstance(value, str) and _DOTTED.fullmatch(value.strip()):
                parts = value.strip().split(".")
                for i, part in enumerate(parts):
                    yield _Word(part, tok.start[0], parts[i - 1] if i else None,
                                len(parts) == 1)
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT,
                            tokenize.DEDENT):
            previous = (previous + [tok])[-2:]
