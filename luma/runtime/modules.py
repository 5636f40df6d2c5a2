"""Host tool modules: import a Python file by path and find its tool handlers (RUNTIME.md §1).

A module exports its handlers, in this order of precedence, as a dict named ``luma_tools``, a
dict named ``tools``, a dict named ``default``, or else as its own top-level functions: the
public (not ``_``-prefixed) callables defined in the module itself. Imported names and classes
are not handlers in that last form, so ``from helpers import parse`` in two modules is no
conflict; a module that wants to export an imported function lists it in ``luma_tools``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import json
import sys
import threading
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

Handler = Callable[..., Any]

EXPORT_DICTS = ("luma_tools", "tools", "default")
TOP_LEVEL_EXPORT = "top-level functions"


class ToolModuleError(Exception):
    """A tool module that cannot be used. The message names the module and reads on its own;
    ``path``, ``line`` and ``column`` (1-based, when known) say where the problem is."""

    def __init__(self, message: str, path: str, line: int | None = None,
                 column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.column = column


def not_a_module_file(label: str, file: Path, shown: str) -> ToolModuleError:
    """The error for a tool module path that is not a file: a folder, or nothing at all."""
    if file.is_dir():
        return ToolModuleError(f"{label} is a folder, not a Python file.", shown)
    return ToolModuleError(f"{label} does not exist.", shown)


class ModuleExecutor(Protocol):
    """Runs a tool module's code in place of the ordinary import (manifest checks, the strict
    sandbox). ``key`` tells apart modules of the same file loaded under different rules."""

    key: str

    def execute(self, module: ModuleType, file: Path) -> None:
        """Run the module's code in ``vars(module)``; raise :class:`ToolModuleError` to refuse."""


@dataclass(frozen=True, slots=True)
class ToolModule:
    """A loaded tool module: its handlers by tool name, and which export they came from."""

    path: str
    handlers: dict[str, Handler]
    export: str
    datasources: dict[str, Handler] = field(default_factory=dict)  # DATA.md §4: the bridges


@dataclass(slots=True)
class ToolRegistry:
    """Handlers by tool name across modules; each name is registered by exactly one module."""

    handlers: dict[str, Handler] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    datasources: dict[str, Handler] = field(default_factory=dict)  # bridge by datasource

    def add(self, module: ToolModule) -> None:
        """Register every handler of ``module``; a name already registered is a conflict and
        nothing of the module is registered."""
        for name in module.handlers:
            if name in self.handlers:
                raise ToolModuleError(f"Tool registry conflict: {name}.", module.path)
        for name in module.datasources:
            if name in self.datasources:
                raise ToolModuleError(f"Datasource bridge conflict: {name} (two tool modules "
                                      "export a bridge for it).", module.path)
        for name, handler in module.handlers.items():
            self.handlers[name] = handler
            self.origins[name] = module.path
        self.datasources.update(module.datasources)

    def __contains__(self, name: object) -> bool:
        return name in self.handlers

    def get(self, name: str) -> Handler | None:
        return self.handlers.get(name)


def load_tool_module(path: str | Path, *, shown: str | None = None,
                     executor: ModuleExecutor | None = None) -> ToolModule:
    """Import the Python file at ``path`` and collect its handlers.

    Raises :class:`ToolModuleError` when the file does not exist, fails to import (the message
    carries the exception, never a traceback), or exports something that is not a handler.
    While the module runs, its ``print`` output goes to stderr, so it cannot mix into a result
    on stdout. ``shown`` is how messages name the module (default: ``path``); ``executor``, when
    given, runs the module's code instead of the ordinary import.
    """
    shown = str(path) if shown is None else shown
    file = Path(path)
    if not file.is_file():
        raise not_a_module_file(f"Tool module '{shown}'", file, shown)
    module = _import_file(file, shown, executor)
    return ToolModule(shown, *_find_handlers(module, shown), _find_bridges(module, shown))


def load_registry(paths: Iterable[str | Path]) -> tuple[ToolRegistry, list[ToolModuleError]]:
    """Load every module into one registry. A module that fails is reported and skipped; the
    others are still registered, so every problem shows in one run."""
    registry = ToolRegistry()
    errors: list[ToolModuleError] = []
    for path in paths:
        try:
            registry.add(load_tool_module(path))
        except ToolModuleError as exc:
            errors.append(exc)
    return registry, errors


def _module_name(file: Path) -> str:
    digest = hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:12]
    stem = "".join(c if c.isalnum() else "_" for c in file.stem)
    return f"luma_tool_module_{stem}_{digest}"


# One import at a time: a module is in sys.modules while it runs, so a program starting in
# another thread (luma test --jobs, luma eval --jobs) would otherwise take it half-loaded,
# without the handlers defined below the line that is running.
_IMPORTING = threading.RLock()


def _import_file(file: Path, shown: str, executor: ModuleExecutor | None = None) -> ModuleType:
    with _IMPORTING:
        return _import_file_now(file, shown, executor)


def _import_file_now(file: Path, shown: str, executor: ModuleExecutor | None) -> ModuleType:
    name = _module_name(file) + (f"_{executor.key}" if executor is not None else "")
    cached = sys.modules.get(name)
    if cached is not None:
        return cached
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ToolModuleError(f"Tool module '{shown}' is not a Python file that can be imported.",
                              shown)
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an ordinary import is: dataclasses and pickling look the
    # module up by name while it executes.
    sys.modules[name] = module
    folder = str(file.resolve().parent)
    sys.path.insert(0, folder)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            if executor is None:
                spec.loader.exec_module(module)
            else:
                executor.execute(module, file)
    except ToolModuleError:
        del sys.modules[name]
        raise
    except (Exception, SystemExit) as exc:
        del sys.modules[name]
        raise ToolModuleError(
            f"Tool module '{shown}' could not be loaded: {_describe(exc)}", shown,
            _error_line(exc, file)) from None
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)
    return module


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg}"
    if isinstance(exc, SystemExit):
        return f"the module called exit({exc.code!r}) while loading"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _error_line(exc: BaseException, file: Path) -> int | None:
    """The line of ``file`` where the import failed: the syntax error's line, or the innermost
    traceback frame that is in the module itself."""
    target = file.resolve()
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        with contextlib.suppress(OSError):
            if Path(exc.filename).resolve() == target:
                return exc.lineno
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        with contextlib.suppress(OSError):
            if Path(frame.filename).resolve() == target:
                line = frame.lineno
    return line


def _find_handlers(module: ModuleType, shown: str) -> tuple[dict[str, Handler], str]:
    namespace = vars(module)
    for export in EXPORT_DICTS:
        if export not in namespace:
            continue
        value = namespace[export]
        if not isinstance(value, dict):
            if export == "luma_tools":
                raise ToolModuleError(
                    f"Tool module '{shown}' exports 'luma_tools' as a {type(value).__name__} "
                    "value; it must be a dict of tool names to handlers.", shown,
                    _export_line(module, export))
            continue  # a `tools` or `default` that is not a dict is not an export
        handlers: dict[str, Handler] = {}
        for key, handler in value.items():
            if not isinstance(key, str):
                raise ToolModuleError(
                    f"Tool module '{shown}' export '{export}' has a key that is not a tool "
                    f"name: {key!r}.", shown, _export_line(module, export))
            if not callable(handler):
                raise ToolModuleError(
                    f"Tool module '{shown}' export '{export}' maps '{key}' to a value that is "
                    f"not callable ({type(handler).__name__}).", shown,
                    _export_line(module, export))
            handlers[key] = handler
        return handlers, export
    _refuse_misnamed_export(module, namespace, shown)
    own = module.__name__
    handlers = {
        name: value for name, value in namespace.items()
        if not name.startswith("_") and callable(value) and not inspect.isclass(value)
        and not isinstance(value, ModuleType) and getattr(value, "__module__", None) == own
    }
    return handlers, TOP_LEVEL_EXPORT


def _find_bridges(module: ModuleType, shown: str) -> dict[str, Handler]:
    """The module's ``datasources`` export: datasource names to bridges (DATA.md §4)."""
    value = vars(module).get("datasources")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ToolModuleError(
            f"Tool module '{shown}' exports 'datasources' as a {type(value).__name__} value; it "
            "must be a dict of datasource names to bridges.", shown,
            _export_line(module, "datasources"))
    bridges: dict[str, Handler] = {}
    for key, bridge in value.items():
        if not isinstance(key, str):
            raise ToolModuleError(
                f"Tool module '{shown}' export 'datasources' has a key that is not a datasource "
                f"name: {key!r}.", shown, _export_line(module, "datasources"))
        if not callable(bridge):
            raise ToolModuleError(
                f"Tool module '{shown}' export 'datasources' maps '{key}' to a value that is "
                f"not callable ({type(bridge).__name__}).", shown,
                _export_line(module, "datasources"))
        bridges[key] = bridge
    return bridges


def _refuse_misnamed_export(module: ModuleType, namespace: dict[str, Any], shown: str) -> None:
    """A dict of handlers under a near-miss of ``luma_tools`` (``lumaTools``, ``LUMA_TOOLS``,
    ``luma_tool``) was meant as the export: say so rather than ignore it, which would leave
    every tool in it unregistered."""
    for name, value in namespace.items():
        squashed = name.replace("_", "").lower()
        if squashed not in ("lumatools", "lumatool") or name == "luma_tools":
            continue
        if isinstance(value, dict) and value and all(callable(v) for v in value.values()):
            raise ToolModuleError(
                f"Tool module '{shown}' defines '{name}', which Luma does not read: the dict of "
                "handlers must be named 'luma_tools'.", shown, _export_line(module, name))


def _export_line(module: ModuleType, export: str) -> int | None:
    """The line where the module assigns ``export`` at top level, if it can be found."""
    import re

    try:
        text = Path(module.__file__ or "").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(rf"^{re.escape(export)}\s*(:[^=\n]*)?=", text, re.MULTILINE)
    return text.count("\n", 0, match.start()) + 1 if match else None


@dataclass(frozen=True, slots=True)
class ConfigModuleEntry:
    """One ``tool_modules`` entry of a config file: the path as written and the resolved file."""

    written: str
    path: Path
    key: str


def config_tool_modules(config_path: str | Path) -> list[ConfigModuleEntry]:
    """The ``tool_modules`` entries of ``luma.config.json`` (a path string or ``{"path": ...}``),
    resolved against the config's folder. Only this key is read here.

    Raises :class:`ToolModuleError` (located in the config file) when the file is not valid JSON
    or ``tool_modules`` has the wrong shape.
    """
    shown = str(config_path)
    file = Path(config_path)
    try:
        text = file.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ToolModuleError(f"{file.name} is not valid UTF-8 text.", shown, 1) from None
    except OSError as exc:
        raise ToolModuleError(f"{file.name} cannot be read: {exc.strerror or exc}.", shown) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolModuleError(f"{file.name} is not valid JSON: {exc.msg}.", shown,
                              exc.lineno, exc.colno) from None
    if not isinstance(data, dict):
        raise ToolModuleError(f"{file.name} must hold a JSON object.", shown, 1)
    modules = data.get("tool_modules", [])
    if isinstance(modules, str):
        modules = [modules]
    if not isinstance(modules, list):
        raise ToolModuleError(
            f"{file.name}: tool_modules must be a list of paths or {{\"path\": ...}} objects.",
            shown, _line_of(text, '"tool_modules"'))
    entries = []
    for i, entry in enumerate(modules):
        key = f"tool_modules[{i}]"
        if isinstance(entry, dict) and "mcp" in entry:
            continue  # an MCP server: started by a run, not read here
        written = entry.get("path") if isinstance(entry, dict) else entry
        if not isinstance(written, str) or not written:
            what = f"{key}.path" if isinstance(entry, dict) else key
            raise ToolModuleError(f"{file.name}: {what} must be a non-empty path string.", shown,
                                  _line_of(text, '"tool_modules"'))
        entries.append(ConfigModuleEntry(written, file.parent / written, key))
    return entries


def _line_of(text: str, needle: str) -> int | None:
    i = text.find(needle)
    return text.count("\n", 0, i) + 1 if i >= 0 else None
