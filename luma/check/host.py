"""Checks against the host: does every tool of a program have a handler in its tool modules,
and can the config provide every context a tool ``needs``?

A program's config is the one given (``luma check --config``) or else ``luma.config.json``
beside it, as for a run. Its tool modules are the config's ``tool_modules`` (relative to the
program's folder) followed by the ones given on the command line. The config's MCP servers
(``{"mcp": ...}`` entries) are connected to and their tools listed, as at a run's start, so that
a contract that disagrees with its server is reported where the tool is declared. Nothing is run
except the modules' own import and the servers (no tool is called). A module is loaded once
however many programs use it, a config's servers once per folder of programs, and each problem
is reported once.
"""

from __future__ import annotations

import os

from luma.record import Record
from luma.syntax import ast
from luma.syntax.diagnostics import Diagnostic
from luma.syntax.source import SourceFile, Span

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:  # imported on use: a check without tool modules does not load the runtime
    from pathlib import Path  # nor pathlib: a program without a config is checked with strings
    from typing import Any

    from luma.runtime.modules import ToolModule

CONFIG_NAME = "luma.config.json"


class _ConfigEntry(Record):
    __slots__ = __match_args__ = ("written", "path", "key", "span", "manifest", "policy")

    def __init__(self, written: str, path: Path, key: str, span: Span, manifest: Any = None,
                 policy: Any = None) -> None:
        self.written = written  # the path as written in the config
        self.path = path  # resolved against the config's folder
        self.key = key  # tool_modules[i]
        self.span = span  # the entry in the config file
        self.manifest = manifest  # the validated manifest: integrity, dependencies, ...
        self.policy = policy  # the config's tool_module_policy


class _Config(Record):
    """A config file that a run would accept."""

    __slots__ = __match_args__ = ("path", "entries", "policy", "contexts", "datasources",
                                  "parsed", "mcp_spans")

    def __init__(self, path: Path, entries: list[tuple[str, str, Span, Any]], policy: Any,
                 contexts: dict[str, dict[str, Any]],
                 datasources: tuple[tuple[str, Span], ...] = (), parsed: Any = None,
                 mcp_spans: dict[int, Span] | None = None) -> None:
        self.path = path
        self.entries = entries  # (written, key, span, manifest) per tool module
        self.policy = policy  # its tool_module_policy
        self.contexts = contexts  # its tool_contexts: context → field → ContextField
        self.datasources = datasources  # its datasources entries, where written
        self.parsed = parsed  # the validated config (LumaConfig)
        # tool_modules index → where the entry is written, per {"mcp": ...} entry (a server
        # whose tools a run finds at its start)
        self.mcp_spans = {} if mcp_spans is None else mcp_spans


class HostCheck(Record):
    """Reports missing handlers (E040), tool modules that cannot be loaded (E041), a bad
    config file (E042) and contexts the config cannot provide (E046) for a series of programs.
    ``config``: the config of every program (``--config``); None: ``luma.config.json`` beside
    each program, if there is one."""

    __slots__ = ("tool_modules", "config", "_modules", "_configs", "_reported", "_texts",
                 "_secrets", "_beside", "_listed")
    __match_args__ = ("tool_modules", "config")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, tool_modules: list[str] | None = None,
                 config: str | Path | None = None) -> None:
        self.tool_modules = [] if tool_modules is None else tool_modules
        self.config = None if config is None else os.fspath(config)
        self._modules: dict[Path, ToolModule | None] = {}  # None: failed
        self._configs: dict[Path, _Config | None] = {}  # None: broken
        self._reported: set[tuple[str, str, str, int]] = set()
        self._texts: dict[str, SourceFile] = {}
        self._beside: dict[str, str | None] = {}  # folder → its luma.config.json, if any
        # SecretRedactor of the MCP servers' URLs and headers, once there are
        self._secrets: Any = None
        # config → project folder → its MCP servers' tools (McpListing), listed once
        self._listed: dict[Path, dict[Path, list[Any]]] = {}

    def redact(self, report: str) -> str:
        """``report`` without the secrets of the MCP entries checked (a config line shown
        under a diagnostic may hold a token)."""
        return report if self._secrets is None else self._secrets.redact(report)

    def config_of(self, program_path: str | Path) -> str | None:
        """The config file a run of the program would read, if any."""
        if self.config is not None:
            return self.config
        folder = os.path.dirname(program_path)
        if folder not in self._beside:  # one look per folder, however many programs it holds
            beside = os.path.join(folder, CONFIG_NAME)
            self._beside[folder] = beside if os.path.isfile(beside) else None
        return self._beside[folder]

    def check(self, program: ast.Program, program_path: str | Path) -> list[Diagnostic]:
        """The host diagnostics of one program: none, and nothing imported, when it has no
        config and no tool modules."""
        out: list[Diagnostic] = []
        config_path = self.config_of(program_path)
        if config_path is None and not self.tool_modules:
            return out
        from pathlib import Path

        project = Path(program_path).resolve().parent
        configured: list[_ConfigEntry] = []
        config: _Config | None = None
        if config_path is not None:
            config = self._config(Path(config_path), out)
            if config is None:
                return out  # the config is broken (reported): which handlers exist is unknown
            out += _context_problems(program, config)
            out += _datasource_problems(program, config)
            configured = [_ConfigEntry(written, project / written, key, span, manifest,
                                       config.policy)
                          for written, key, span, manifest in config.entries]
        wanted: list[tuple[Path, _ConfigEntry | None]] = [(e.path, e) for e in configured]
        wanted += [(Path(p), None) for p in self.tool_modules]
        served = config is not None and bool(config.mcp_spans)
        if not wanted and not served:
            return out
        from luma.runtime.modules import ToolModuleError, ToolRegistry

        registry = ToolRegistry()
        complete = True
        seen: set[Path] = set()
        for path, where in wanted:
            if path.resolve() in seen:
                continue  # the same file named twice (config and command line) is loaded once
            seen.add(path.resolve())
            loaded = self._load(path, where, project, out)
            if loaded is None:
                complete = False
                continue
            try:
                registry.add(loaded)
            except ToolModuleError as exc:
                complete = False
                self._report(out, "E041", exc.message, self._span_at(exc.path, exc.line),
                             hint="each tool name may be registered by one tool module only")
        known = {t.name for t in program.tools if t.name in registry}
        offered: list[str] = []  # the MCP servers' tool names, for a did-you-mean
        if served and complete:
            assert config is not None
            found = self._mcp(program, config, known, project, out)
            if found is None:
                complete = False
            else:
                known |= set(found.handlers)
                offered = found.offered
        if not complete:
            # A module (or server) that failed would make every one of its tools look
            # unregistered.
            return out
        from luma.syntax.diagnostics import did_you_mean

        for tool in program.tools:
            if tool.kind == "tool" and tool.name not in known:
                hint = did_you_mean(tool.name, offered) if offered else None
                out.append(Diagnostic(
                    "error", "E040", f"'{tool.name}' is not registered in the tool registry.",
                    tool.name_span,
                    hint=hint or f"define a function '{tool.name}' in a tool module, or add it "
                                 "to the module's luma_tools dict"))
        return out

    def _mcp(self, program: ast.Program, config: _Config, handled: set[str], project: Path,
             out: list[Diagnostic]) -> Any:
        """Connect to the config's MCP servers, list their tools (calling none) and report
        what a run's start would refuse: a server that does not answer (E041, at its entry),
        a contract that disagrees with its server (E057, at the tool). The servers' tools, or
        None when a server did not answer."""
        from luma.runtime.mcp_host import connect_mcp_servers, match_mcp_tools, missing_extra
        from luma.runtime.secrets import SecretRedactor, register_startup_secrets

        spans = config.mcp_spans
        missing = missing_extra()
        if missing is not None:
            self._report(out, "E041", missing, spans[min(spans)])
            return None
        if self._secrets is None:
            self._secrets = SecretRedactor()
        listed = self._listed.get(config.path)
        if listed is None:  # the config's first program: its secrets, once
            listed = self._listed[config.path] = {}
            register_startup_secrets(self._secrets, None, config.parsed, os.environ)
        listings = listed.get(project)
        if listings is None:  # connected once per folder (a command runs there)
            listings = listed[project] = connect_mcp_servers(
                config.parsed, str(project), os.environ, self._secrets.redact)
            for listing in listings:
                if listing.host is not None:
                    listing.host.close()
        found = match_mcp_tools(program, listings, handled)
        spans_of = {t.name: t.name_span for t in program.tools}
        answered = True
        for problem in found.problems:
            if problem.tool is None:
                answered = False
                self._report(out, "E041", problem.message, spans[problem.server])
            else:
                self._report(out, "E057", problem.message, spans_of[problem.tool],
                             hint=f"its implementation is on {problem.label} "
                                  f"(tool_modules[{problem.server}])")
        return found if answered else None

    def _load(self, path: Path, entry: _ConfigEntry | None, project: Path,
              out: list[Diagnostic]) -> ToolModule | None:
        from pathlib import Path

        from luma.runtime.modules import ToolModuleError, load_tool_module, not_a_module_file

        key = path.resolve()
        if key in self._modules:
            return self._modules[key]
        module: ToolModule | None = None
        if entry is not None and not path.is_file():
            # Said where it was written: the config entry, with the path as written there.
            missing = not_a_module_file(f"Tool module '{entry.written}' ({entry.key})", path,
                                        entry.written)
            beside = Path(entry.span.file).resolve().parent == project
            self._report(out, "E041", missing.message, entry.span,
                         hint=f"tool_modules paths are relative to {CONFIG_NAME}'s folder"
                         if beside else "tool_modules paths are relative to the program's "
                         "folder")
        elif entry is not None and entry.manifest is not None:
            # A module is loaded for a check as it would be for a run: the manifest's path,
            # version, integrity (before any of its code runs) and the sandbox policy apply.
            from luma.runtime.manifests import load_requested, resolve_manifest

            try:
                request = resolve_manifest(entry.manifest, entry.key, project)
                module = load_requested(request, project, entry.policy)
            except ToolModuleError as exc:
                span = entry.span if exc.line is None else self._span_at(exc.path, exc.line)
                self._report(out, "E041", exc.message, span)
        else:
            try:
                if path.suffix in (".js", ".mjs", ".cjs", ".ts", ".mts"):  # a Node.js child
                    from luma.runtime.manifests import ModuleRequest, load_requested

                    module = load_requested(ModuleRequest("--tool-module", str(path),
                                                          path.resolve()), project, None)
                else:
                    module = load_tool_module(path)
            except ToolModuleError as exc:
                self._report(out, "E041", exc.message, self._span_at(exc.path, exc.line))
        self._modules[key] = module
        return module

    def _config(self, config: Path, out: list[Diagnostic]) -> _Config | None:
        """The config's tool modules (with the span of each entry), policy and contexts, or
        None when a run would refuse the config (reported once)."""
        from luma.runtime.config import ConfigError, load_config
        from luma.runtime.modules import ToolModuleError, config_tool_modules

        key = config.resolve()
        if key in self._configs:
            return self._configs[key]
        self._configs[key] = None
        try:
            entries = config_tool_modules(config)
        except ToolModuleError as exc:
            self._report(out, "E042", exc.message,
                         self._span_at(exc.path, exc.line, exc.column))
            return None
        try:
            parsed = load_config(config)
        except ConfigError as exc:
            self._report(out, "E042", f"{config.name}: {exc.messages[0]}",
                         self._span_at(str(config), 1),
                         hint="; ".join(exc.messages[1:]) or None)
            return None
        source = self._source(str(config))
        manifests = parsed.module_manifests()
        result = _Config(
            config,
            [(e.written, e.key, self._entry_span(source, e.written),
              manifests[i] if i < len(manifests) else None) for i, e in enumerate(entries)],
            parsed.tool_module_policy, dict(parsed.tool_contexts),
            tuple((name, self._entry_span(source, name)) for name in parsed.datasources),
            parsed, _mcp_spans(source, parsed))
        self._configs[key] = result
        return result

    def _report(self, out: list[Diagnostic], code: str, message: str, span: Span,
                hint: str | None = None) -> None:
        key = (code, message, span.file, span.start)
        if key in self._reported:
            return
        self._reported.add(key)
        out.append(Diagnostic("error", code, message, span, hint))

    def _source(self, path: str) -> SourceFile:
        if path not in self._texts:
            try:
                with open(path, "rb") as f:
                    text = f.read().decode("utf-8", errors="replace")
            except OSError:
                text = ""
            # The same text the renderer reads for this path, so offsets agree.
            self._texts[path] = SourceFile(path, text.removeprefix("\ufeff"))
        return self._texts[path]

    def _span_at(self, path: str, line: int | None, column: int | None = None) -> Span:
        """The character at ``line``:``column`` of ``path``, or the text of the whole line when
        the column is unknown (the file's start when the line is too). 1-based."""
        if line is None:
            return Span(path, 0, 0)
        source = self._source(path)
        text = source.line_text(line)
        start = source.line_offset(line)
        if column is not None:
            offset = start + min(max(column - 1, 0), len(text))
            return Span(path, offset, offset + 1)
        indent = len(text) - len(text.lstrip())
        return Span(path, start + indent, start + len(text.rstrip()))

    @staticmethod
    def _entry_span(source: SourceFile, written: str) -> Span:
        import json

        needle = json.dumps(written)
        i = source.text.find(needle)
        if i < 0:
            return Span(source.path, 0, 0)
        return Span(source.path, i, i + len(needle))


def _mcp_spans(source: SourceFile, parsed: Any) -> dict[int, Span]:
    """Where each ``{"mcp": ...}`` entry of ``tool_modules`` is written: its n-th ``"mcp"``
    key (the file's start when the text does not show them one by one)."""
    import re

    keys = [m.span() for m in re.finditer(r'"mcp"\s*:', source.text)]
    servers = parsed.mcp_servers()
    if len(keys) != len(servers):
        return {i: Span(source.path, 0, 0) for i, _ in servers}
    return {i: Span(source.path, start, start + len('"mcp"'))
            for (i, _), (start, _) in zip(servers, keys)}


# The parse kinds of a context field (RUNTIME.md §4) that can give a value of each static kind.
_PARSES_FOR = {
    "string": ("string", "json"),
    "int": ("integer", "number", "json"),
    "float": ("number", "integer", "json"),
    "bool": ("boolean", "json"),
}
_PARSE_HINT = {"string": "string", "int": "integer", "float": "number", "bool": "boolean"}


def _datasource_problems(program: ast.Program, config: _Config) -> list[Diagnostic]:
    """E056 for each ``datasources`` entry of the config that names no datasource of the
    program (DATA.md §5)."""
    from luma.syntax.diagnostics import did_you_mean

    declared = [d.name for d in program.datasources]
    return [Diagnostic("error", "E056", f"datasources.{name} in {config.path.name} names no "
                       "datasource of the program.", span, did_you_mean(name, declared))
            for name, span in config.datasources if name not in declared]


def _context_problems(program: ast.Program, config: _Config) -> list[Diagnostic]:
    """E046 for each ``needs`` that no run with this config could resolve: a context that
    ``tool_contexts`` does not configure, one without a field its schema requires, or a field
    whose ``parse`` kind never gives the type the schema declares."""
    from luma.check.exprtypes import describe, resolve
    from luma.check.symbols import Symbols, collect_symbols
    from luma.syntax.diagnostics import DiagnosticBag, did_you_mean

    out: list[Diagnostic] = []
    shown = config.path.name
    symbols: Symbols | None = None
    for tool in program.tools:
        for need in tool.needs:
            fields = config.contexts.get(need.name)
            if fields is None:
                hint = did_you_mean(need.name, list(config.contexts)) or (
                    f'add "{need.name}" to tool_contexts in {shown}, with the environment '
                    "variable of each field")
                out.append(Diagnostic(
                    "error", "E046", f"Tool '{tool.name}' needs context '{need.name}', which "
                    f"tool_contexts of {shown} does not configure.", need.span, hint))
                continue
            if not isinstance(need.type, ast.NamedType):
                continue
            if symbols is None:
                symbols = collect_symbols(program, DiagnosticBag())  # reported by the checker
            schema = symbols.schemas.get(need.type.name)
            if schema is None:
                continue  # not an object schema: reported by the checker, if wrong
            for f in schema.fields:
                spec = fields.get(f.name)
                if spec is None:
                    if not f.optional and f.annotation("default") is None:
                        out.append(Diagnostic(
                            "error", "E046", f"Context '{need.name}' in tool_contexts of "
                            f"{shown} has no field '{f.name}', which schema '{schema.name}' of "
                            f"tool '{tool.name}' requires.", need.span,
                            f'add "{f.name}": {{"env": "..."}} to tool_contexts.{need.name}'))
                    continue
                kind = resolve(f.type, symbols).kind
                accepted = _PARSES_FOR.get(kind, ("json",) if kind != "unknown" else None)
                if accepted is not None and spec.parse not in accepted:
                    wanted = _PARSE_HINT.get(kind, "json")
                    out.append(Diagnostic(
                        "error", "E046", f"Field '{f.name}' of context '{need.name}' is read "
                        f'with parse "{spec.parse}", which never gives the '
                        f"{describe(resolve(f.type, symbols))} that schema '{schema.name}' "
                        "declares.", need.span,
                        f'set "parse": "{wanted}" for tool_contexts.{need.name}.{f.name} in '
                        f"{shown}"))
    return out
