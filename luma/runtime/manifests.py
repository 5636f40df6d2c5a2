"""Tool module manifests (RUNTIME.md §2) and loading a program's tool modules under them.

A manifest entry of ``tool_modules`` names a file relative to the program's folder and may add
``version`` (semver), ``integrity`` (``sha256-<base64>``), ``dependencies`` (the third-party
packages the module may import; with a list, no dynamic import) and ``dependency_root`` (where
those packages are loaded from). Every check here runs before any of the module's code does:
paths are resolved (symlinks followed) and must stay inside the program's folder, the integrity
digest is compared with the very bytes that will run, and a file named twice must be named with
the same metadata. ``tool_module_policy`` then decides how the module runs
(:mod:`luma.runtime.sandbox`) and how many calls may be inside it at once.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from luma.runtime.call_limit import CallLimit
from luma.runtime.modules import (ToolModule, ToolModuleError, ToolRegistry, load_tool_module,
                                  not_a_module_file)
from luma.runtime.sandbox import GuardedExecutor, ImportRules

COMMAND_LINE = "--tool-module"

_IDENTIFIERS = r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*"
_SEMVER = re.compile(rf"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                     rf"(?:-{_IDENTIFIERS})?(?:\+{_IDENTIFIERS})?")


@dataclass(frozen=True, slots=True)
class ModuleRequest:
    """One tool module to load: where it was named (``tool_modules[0]`` or ``--tool-module``),
    the path as written, the resolved file, and its manifest metadata."""

    key: str
    written: str
    file: Path
    version: str | None = None
    integrity: str | None = None
    dependencies: tuple[str, ...] | None = None
    dependency_root: Path | None = None

    @property
    def label(self) -> str:
        return f"Tool module '{self.written}' ({self.key})"

    def metadata(self) -> tuple[tuple[str, Any], ...]:
        deps = tuple(sorted(set(self.dependencies))) if self.dependencies is not None else None
        return (("version", self.version), ("integrity", self.integrity),
                ("dependencies", deps), ("dependency_root", self.dependency_root))


@dataclass(slots=True)
class LoadedModules:
    """The outcome of loading a program's tool modules: the registry, each tool's concurrency
    limit (the :class:`~luma.runtime.call_limit.CallLimit` of the module it comes from; none
    without a policy), the requests that loaded and the problems, one per module that did
    not."""

    registry: ToolRegistry = field(default_factory=ToolRegistry)
    limits: dict[str, CallLimit] = field(default_factory=dict)
    loaded: list[tuple[ModuleRequest, ToolModule]] = field(default_factory=list)
    errors: list[ToolModuleError] = field(default_factory=list)
    max_memory_mb: int | None = None  # from the policy; enforced under "process" only
    warnings: list[str] = field(default_factory=list)  # said at start-up (process modules)


def load_program_modules(program_dir: Path, config: Any,
                         command_line: Iterable[str] = ()) -> LoadedModules:
    """Load the config's ``tool_modules`` and then the ``--tool-module`` paths, under the
    config's manifests and ``tool_module_policy``. Every module is tried, so every problem is
    reported in one go; a module that fails registers nothing."""
    project = program_dir.resolve()
    policy = getattr(config, "tool_module_policy", None)
    strict = policy is not None and policy.sandbox in ("strict", "process")
    out = LoadedModules(max_memory_mb=policy.max_memory_mb if policy is not None else None)
    requests: list[ModuleRequest] = []
    manifests = config.module_manifests() if config is not None else []
    for i, manifest in enumerate(manifests):
        try:
            requests.append(resolve_manifest(manifest, f"tool_modules[{i}]", project))
        except ToolModuleError as exc:
            out.errors.append(exc)
    for written in command_line:
        try:
            requests.append(resolve_command_line(written, project, strict))
        except ToolModuleError as exc:
            out.errors.append(exc)
    seen: dict[Path, ModuleRequest] = {}
    for request in requests:
        first = seen.get(request.file)
        if first is not None:
            if request.key != COMMAND_LINE and first.metadata() != request.metadata():
                out.errors.append(_metadata_conflict(request, first))
            continue  # the same file with the same metadata is loaded once
        seen[request.file] = request
        try:
            module = load_requested(request, project, policy, out.warnings)
            out.registry.add(module)
        except ToolModuleError as exc:
            out.errors.append(exc)
            continue
        out.loaded.append((request, module))
        if policy is not None:
            limit = CallLimit(policy.max_concurrency)
            for name in module.handlers:
                out.limits[name] = limit
    return out


def resolve_manifest(manifest: Any, key: str, project: Path) -> ModuleRequest:
    """Check a manifest entry's paths and version against the program's folder ``project``;
    raises :class:`ToolModuleError` naming the entry and the rule."""
    written = manifest.path
    label = f"Tool module '{written}' ({key})"
    file = _inside(project, written, f"{label} resolves to {{resolved}}, outside the program's "
                                     "folder; tool module paths may not leave it.", written)
    if not file.is_file():
        raise not_a_module_file(label, file, written)
    if manifest.version is not None and not _SEMVER.fullmatch(manifest.version):
        raise ToolModuleError(f"{label}: version '{manifest.version}' is not a semver version "
                              "(MAJOR.MINOR.PATCH, such as 1.0.0).", written)
    if manifest.integrity is not None:
        expected_digest(manifest.integrity, label, written)
    root = None
    if manifest.dependency_root is not None:
        root = _inside(project, manifest.dependency_root,
                       f"{label}: dependency_root '{manifest.dependency_root}' resolves to "
                       "{resolved}, outside the program's folder; it may not leave it.", written)
        if not root.is_dir():
            raise ToolModuleError(f"{label}: dependency_root '{manifest.dependency_root}' is not "
                                  "a folder.", written)
    deps = tuple(manifest.dependencies) if manifest.dependencies is not None else None
    return ModuleRequest(key, written, file, manifest.version, manifest.integrity, deps, root)


def resolve_command_line(written: str, project: Path, strict: bool) -> ModuleRequest:
    """A ``--tool-module`` path (relative to the working folder). Under ``strict`` it must lie
    in the program's folder, as everything the module loads must."""
    label = f"Tool module '{written}' ({COMMAND_LINE})"
    file = Path(written).resolve()
    if strict and not file.is_relative_to(project):
        raise ToolModuleError(f"{label} resolves to {file}, outside the program's folder, which "
                              "sandbox 'strict' forbids.", written)
    if not file.is_file():
        raise not_a_module_file(f"Tool module '{written}'", file, written)
    return ModuleRequest(COMMAND_LINE, written, file)


def load_requested(request: ModuleRequest, project: Path, policy: Any,
                   warnings: list[str] | None = None) -> ToolModule:
    """Load one resolved module: its integrity, checked on the bytes that will run, then its
    code under the import rules of its manifest and the policy. Under ``"sandbox": "process"``
    the module is loaded (under the ``strict`` rules) in its own child process, and what
    cannot be enforced there is added to ``warnings``."""
    if request.file.suffix in (".js", ".mjs", ".cjs", ".ts", ".mts"):
        return _load_in_node(request, project, policy,
                             warnings if warnings is not None else [])
    if policy is not None and policy.sandbox == "process":
        return _load_in_process(request, project, policy,
                                warnings if warnings is not None else [])
    strict = policy is not None and policy.sandbox == "strict"
    rules = ImportRules(
        project_dir=project, strict=strict,
        allow_builtins=frozenset(policy.allow_builtins) if strict else frozenset(),
        allow_env=policy.allow_env if strict else True,
        allow_network=policy.allow_network if strict else True,
        dependencies=frozenset(request.dependencies) if request.dependencies is not None
        else None,
        dependencies_key=f"{request.key}.dependencies",
        dependency_root=request.dependency_root)
    if request.dependency_root is not None:
        root = str(request.dependency_root)
        if root not in sys.path:
            # Where the packages load from, and where they find their own dependencies.
            sys.path.insert(0, root)
    try:
        executor = GuardedExecutor(request.file, request.written, rules)
    except OSError as exc:
        raise ToolModuleError(f"{request.label} cannot be read: {exc.strerror or exc}.",
                              request.written) from None
    if request.integrity is not None:
        verify_integrity(executor.data, request.integrity, request.label, request.written)
    return load_tool_module(request.file, shown=request.written, executor=executor)


def _load_in_process(request: ModuleRequest, project: Path, policy: Any,
                     warnings: list[str]) -> ToolModule:
    from luma.runtime.process_modules import start_process_module

    start = {"key": request.key, "written": request.written, "file": str(request.file),
             "version": request.version, "integrity": request.integrity,
             "dependencies": list(request.dependencies) if request.dependencies is not None
             else None,
             "dependency_root": str(request.dependency_root) if request.dependency_root
             else None,
             "project": str(project), "allow_builtins": list(policy.allow_builtins),
             "allow_env": policy.allow_env, "allow_network": policy.allow_network,
             "max_memory_mb": policy.max_memory_mb, "max_concurrency": policy.max_concurrency}
    module, child = start_process_module(start, request.written, request.file.parent)
    _network_warnings(request, child.warnings, warnings)
    return module


def _network_warnings(request: ModuleRequest, problems: list[str], warnings: list[str]) -> None:
    held = ("held by the strict rules only" if request.file.suffix == ".py"
            else "not held at all")
    for problem in problems:
        warnings.append(f"{request.label} runs in its own process, but the network cannot be "
                        f"closed to it: the kernel refused a network namespace ({problem}); "
                        f"tool_module_policy.allow_network false is {held}.")


def _load_in_node(request: ModuleRequest, project: Path, policy: Any,
                  warnings: list[str]) -> ToolModule:
    """A JavaScript or TypeScript module: always in a Node.js child process of its own."""
    from luma.runtime.process_modules import node_command, start_process_module

    if request.integrity is not None:
        try:
            data = request.file.read_bytes()
        except OSError as exc:
            raise ToolModuleError(f"{request.label} cannot be read: {exc.strerror or exc}.",
                                  request.written) from None
        verify_integrity(data, request.integrity, request.label, request.written)
    start = {"key": request.key, "written": request.written, "file": str(request.file),
             "dependencies": list(request.dependencies) if request.dependencies is not None
             else None,
             "dependency_root": str(request.dependency_root) if request.dependency_root
             else None,
             "project": str(project),
             "max_memory_mb": policy.max_memory_mb if policy is not None else None}
    module, child = start_process_module(start, request.written, request.file.parent,
                                         node_command(request.written, policy))
    _network_warnings(request, child.warnings, warnings)
    return module


def expected_digest(integrity: str, label: str, shown: str) -> bytes:
    """The sha256 digest an ``integrity`` value (``sha256-<base64>``) states."""
    text = integrity.removeprefix("sha256-")
    try:
        digest = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        digest = b""
    if len(digest) != hashlib.sha256().digest_size:
        raise ToolModuleError(f"{label}: integrity '{integrity}' is not 'sha256-' followed by "
                              "the base64 of a sha256 digest.", shown)
    return digest


def integrity_of(data: bytes) -> str:
    """The ``integrity`` value of a file's bytes: ``sha256-<base64>``."""
    return "sha256-" + base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")


def verify_integrity(data: bytes, integrity: str, label: str, shown: str) -> None:
    """Refuse ``data`` unless its sha256 is the one ``integrity`` states."""
    if hashlib.sha256(data).digest() != expected_digest(integrity, label, shown):
        raise ToolModuleError(f"{label} does not match its integrity: the manifest says "
                              f"{integrity}, the file is {integrity_of(data)}.", shown)


def _inside(project: Path, written: str, message: str, shown: str) -> Path:
    """``written`` resolved against ``project`` (symlinks followed); refused with ``message``
    (``{resolved}`` filled in) when it lands outside."""
    resolved = (project / written).resolve()
    if not resolved.is_relative_to(project):
        raise ToolModuleError(message.format(resolved=resolved), shown)
    return resolved


def _metadata_conflict(request: ModuleRequest, first: ModuleRequest) -> ToolModuleError:
    here, there = dict(request.metadata()), dict(first.metadata())
    name = next(k for k in here if here[k] != there[k])
    return ToolModuleError(
        f"{request.label} is the file {first.key} already loads, with different metadata: "
        f"{name} {_shown(here[name])} here, {_shown(there[name])} there.", request.written)


def _shown(value: Any) -> str:
    if value is None:
        return "not given"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    return f"'{value}'"
