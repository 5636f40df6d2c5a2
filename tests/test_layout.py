"""The package reads top-down: no module imports, even lazily or for type checking only, a
module that imports it back; and the public API sits below the command line."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "luma"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every luma module ``name`` imports: at the top, in a function, under TYPE_CHECKING."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module."""
    from luma.graphs import strongly_connected

    parts = strongly_connected(sorted(graph), lambda v: sorted(graph[v]))
    return sorted(sorted(part) for part in parts if len(part) > 1)


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_api_is_below_the_command_line() -> None:
    graph = _graph()
    api = {name for name in graph if name == "luma.api" or name.startswith("luma.api.")}
    command_line = {"luma.cli", "luma.cli_run"}
    assert [name for name in api if graph[name] & command_line] == []
    assert "luma.api" in graph["luma.cli_run"]
    below = [name for name in graph if name.startswith(("luma.runtime.", "luma.models.",
                                                        "luma.syntax.", "luma.check.",
                                                        "luma.schema."))
             and name != "luma.runtime.run"]  # the old name of luma.cli_run
    assert [name for name in below if graph[name] & (api | command_line)] == []
