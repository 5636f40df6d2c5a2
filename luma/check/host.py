"""Checks against the host: does every tool of a program have a handler in its tool modules?

The tool modules of a program are those listed in ``luma.config.json`` beside it (its
``tool_modules`` key) followed by the ones given on the command line. Nothing is run except the
modules' own import. A module is loaded once however many programs use it, and each of its
problems is reported once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from luma.syntax import ast
from luma.syntax.diagnostics import Diagnostic
from luma.syntax.source import SourceFile, Span

if TYPE_CHECKING:  # imported on use: a check without tool modules does not load the runtime
    from luma.runtime.modules import ToolModule

CONFIG_NAME = "luma.config.json"


@dataclass(frozen=True, slots=True)
class _ConfigEntry:
    written: str  # the path as written in the config
    path: Path  # resolved against the config's folder
    key: str  # tool_modules[i]
    span: Span  # the entry in the config file
    manifest: Any = None  # the validated manifest: integrity, dependencies, ...
    policy: Any = None  # the config's tool_module_policy


@dataclass(slots=True)
class HostCheck:
    """Reports missing handlers (E040), tool modules that cannot be loaded (E041) and a bad
    config file (E042) for a series of programs."""

    tool_modules: list[str] = field(default_factory=list)
    _modules: dict[Path, ToolModule | None] = field(default_factory=dict)  # None: failed
    _configs: dict[Path, list[_ConfigEntry] | None] = field(default_factory=dict)
    _reported: set[tuple[str, str, str, int]] = field(default_factory=set)
    _texts: dict[str, SourceFile] = field(default_factory=dict)

    def check(self, program: ast.Program, program_path: str | Path) -> list[Diagnostic]:
        """The host diagnostics of one program: none, and nothing imported, when it has no
        tool modules."""
        out: list[Diagnostic] = []
        config = Path(program_path).parent / CONFIG_NAME
        configured = self._config_modules(config, out) if config.is_file() else []
        if configured is None:
            return out  # the config is broken (reported): which handlers exist is unknown
        wanted: list[tuple[Path, _ConfigEntry | None]] = [(e.path, e) for e in configured]
        wanted += [(Path(p), None) for p in self.tool_modules]
        if not wanted:
            return out
        from luma.runtime.modules import ToolModuleError, ToolRegistry

        registry = ToolRegistry()
        complete = True
        seen: set[Path] = set()
        for path, where in wanted:
            if path.resolve() in seen:
                continue  # the same file named twice (config and command line) is loaded once
            seen.add(path.resolve())
            loaded = self._load(path, where, out)
            if loaded is None:
                complete = False
                continue
            try:
                registry.add(loaded)
            except ToolModuleError as exc:
                complete = False
                self._report(out, "E041", exc.message, self._span_at(exc.path, exc.line),
                             hint="each tool name may be registered by one tool module only")
        if not complete:
            # A module that failed would make every one of its tools look unregistered.
            return out
        for tool in program.tools:
            if tool.name not in registry:
                out.append(Diagnostic(
                    "error", "E040", f"'{tool.name}' is not registered in the tool registry.",
                    tool.name_span,
                    hint=f"define a function '{tool.name}' in a tool module, or add it to the "
                         "module's luma_tools dict"))
        return out

    def _load(self, path: Path, entry: _ConfigEntry | None,
              out: list[Diagnostic]) -> ToolModule | None:
        from luma.runtime.modules import ToolModuleError, load_tool_module, not_a_module_file

        key = path.resolve()
        if key in self._modules:
            return self._modules[key]
        module: ToolModule | None = None
        if entry is not None and not path.is_file():
            # Said where it was written: the config entry, with the path as written there.
            missing = not_a_module_file(f"Tool module '{entry.written}' ({entry.key})", path,
                                        entry.written)
            self._report(out, "E041", missing.message, entry.span,
                         hint=f"tool_modules paths are relative to {CONFIG_NAME}'s folder")
        elif entry is not None and entry.manifest is not None:
            # A module is loaded for a check as it would be for a run: the manifest's path,
            # version, integrity (before any of its code runs) and the sandbox policy apply.
            from luma.runtime.manifests import load_requested, resolve_manifest

            project = Path(entry.span.file).resolve().parent  # the config's (program's) folder
            try:
                request = resolve_manifest(entry.manifest, entry.key, project)
                module = load_requested(request, project, entry.policy)
            except ToolModuleError as exc:
                span = entry.span if exc.line is None else self._span_at(exc.path, exc.line)
                self._report(out, "E041", exc.message, span)
        else:
            try:
                module = load_tool_module(path)
            except ToolModuleError as exc:
                self._report(out, "E041", exc.message, self._span_at(exc.path, exc.line))
        self._modules[key] = module
        return module

    def _config_modules(self, config: Path, out: list[Diagnostic]) -> list[_ConfigEntry] | None:
        """The config's tool modules with the span of each entry, or None when the config is
        unusable (reported once)."""
        from luma.runtime.modules import ToolModuleError, config_tool_modules

        key = config.resolve()
        if key in self._configs:
            return self._configs[key]
        try:
            entries = config_tool_modules(config)
        except ToolModuleError as exc:
            self._configs[key] = None
            self._report(out, "E042", exc.message,
                         self._span_at(exc.path, exc.line, exc.column))
            return None
        source = self._source(str(config))
        manifests, policy = self._manifests(config, out) if entries else ([], None)
        if manifests is None:
            self._configs[key] = None
            return None
        result = [_ConfigEntry(e.written, e.path, e.key, self._entry_span(source, e.written),
                               manifests[i] if i < len(manifests) else None, policy)
                  for i, e in enumerate(entries)]
        self._configs[key] = result
        return result

    def _manifests(self, config: Path, out: list[Diagnostic]) -> tuple[list[Any] | None, Any]:
        """The config's manifests and policy, validated as a run validates them; a config a run
        would refuse is reported (E042) and its modules are not loaded."""
        from luma.runtime.config import ConfigError, load_config

        try:
            parsed = load_config(config)
        except ConfigError as exc:
            self._report(out, "E042", f"{CONFIG_NAME}: {exc.messages[0]}",
                         self._span_at(str(config), 1),
                         hint="; ".join(exc.messages[1:]) or None)
            return None, None
        return parsed.module_manifests(), parsed.tool_module_policy

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
                text = Path(path).read_bytes().decode("utf-8", errors="replace")
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
        start = _line_start(source.text, line)
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


def _line_start(text: str, line: int) -> int:
    offset = 0
    for _ in range(line - 1):
        nxt = text.find("\n", offset)
        if nxt < 0:
            return len(text)
        offset = nxt + 1
    return offset
