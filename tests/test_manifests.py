"""Tool module manifests (RUNTIME.md §2): paths confined to the program's folder (symlinks
followed), semver versions, one set of metadata per file, integrity checked before any code
runs, the dependency allowlist and ``dependency_root``. A refused module stops the program
before anything runs (exit 2), with a message naming the module and the rule."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import pytest

from cli_runner import luma
from luma.runtime.manifests import integrity_of
from sandbox.project import Project, isolated_imports, project  # noqa: F401 (fixtures)

CLEAN = """
def probe(input):
    return {"text": "ran"}
"""


def _digest(text: str) -> str:
    import textwrap

    return integrity_of(textwrap.dedent(text).encode())


# ------------------------------------------------------------------------------- paths


def test_a_path_is_relative_to_the_programs_folder(project: Project, tmp_path: Path) -> None:
    project.write("tools/probe.py", CLEAN)
    project.config(["./tools/probe.py"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outcome = project.run(cwd=elsewhere)
    assert (outcome.code, outcome.value) == (0, {"text": "ran"})


def test_a_path_that_leaves_the_folder_is_refused(project: Project, tmp_path: Path) -> None:
    (tmp_path / "outside.py").write_text(CLEAN)
    project.config(["../outside.py"])
    outcome = project.run()
    assert outcome.code == 2
    assert outcome.stdout == ""
    assert outcome.stderr == (
        f"error: Tool module '../outside.py' (tool_modules[0]) resolves to "
        f"{(tmp_path / 'outside.py').resolve()}, outside the program's folder; tool module paths "
        "may not leave it.\n")


def test_an_absolute_path_outside_the_folder_is_refused(project: Project,
                                                        tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text(CLEAN)
    project.config([str(outside)])
    assert project.errors() == [
        f"Tool module '{outside}' (tool_modules[0]) resolves to {outside.resolve()}, outside "
        "the program's folder; tool module paths may not leave it."]


def test_an_absolute_path_inside_the_folder_is_fine(project: Project) -> None:
    path = project.write("tools.py", CLEAN)
    project.config([str(path)])
    assert project.errors() == []


def test_a_symlink_that_leads_out_of_the_folder_is_refused(project: Project,
                                                           tmp_path: Path) -> None:
    target = tmp_path / "outside.py"
    target.write_text(CLEAN)
    (project.folder / "tools.py").symlink_to(target)
    project.config()
    assert project.errors() == [
        f"Tool module './tools.py' (tool_modules[0]) resolves to {target.resolve()}, outside "
        "the program's folder; tool module paths may not leave it."]


def test_a_symlinked_folder_that_leads_out_is_refused(project: Project, tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "tools.py").write_text(CLEAN)
    (project.folder / "lib").symlink_to(tmp_path / "shared", target_is_directory=True)
    project.config(["./lib/tools.py"])
    assert project.errors() == [
        f"Tool module './lib/tools.py' (tool_modules[0]) resolves to "
        f"{(tmp_path / 'shared' / 'tools.py').resolve()}, outside the program's folder; tool "
        "module paths may not leave it."]


def test_a_symlink_inside_the_folder_is_fine(project: Project) -> None:
    project.write("real/tools.py", CLEAN)
    (project.folder / "tools.py").symlink_to(project.folder / "real" / "tools.py")
    project.config()
    assert project.run().value == {"text": "ran"}


def test_a_missing_module_names_its_entry(project: Project) -> None:
    project.config(["./gone.py"])
    assert project.errors() == ["Tool module './gone.py' (tool_modules[0]) does not exist."]


def test_a_command_line_module_outside_the_folder_is_fine_without_strict(
        project: Project, tmp_path: Path) -> None:
    (tmp_path / "outside.py").write_text(CLEAN)
    project.config([])
    outcome = project.run("x", str(tmp_path / "outside.py"))
    assert (outcome.code, outcome.value) == (0, {"text": "ran"})


# ------------------------------------------------------------------------------- version


@pytest.mark.parametrize("version", ["1.0.0", "0.3.12", "2.0.0-rc.1", "1.0.0+build.5"])
def test_a_semver_version_is_accepted(project: Project, version: str) -> None:
    project.write("tools.py", CLEAN)
    project.config([{"path": "./tools.py", "version": version}])
    assert project.errors() == []


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "01.0.0", "latest"])
def test_a_version_that_is_not_semver_is_refused(project: Project, version: str) -> None:
    project.write("tools.py", CLEAN)
    project.config([{"path": "./tools.py", "version": version}])
    assert project.errors() == [
        f"Tool module './tools.py' (tool_modules[0]): version '{version}' is not a semver "
        "version (MAJOR.MINOR.PATCH, such as 1.0.0)."]


def test_the_same_file_with_different_versions_is_an_error(project: Project) -> None:
    project.write("tools.py", CLEAN)
    project.config([{"path": "./tools.py", "version": "1.0.0"},
                    {"path": "sub/../tools.py", "version": "1.1.0"}])
    (project.folder / "sub").mkdir()
    outcome = project.run()
    assert outcome.code == 2
    assert outcome.stderr == (
        "error: Tool module 'sub/../tools.py' (tool_modules[1]) is the file tool_modules[0] "
        "already loads, with different metadata: version '1.1.0' here, '1.0.0' there.\n")


def test_the_short_form_and_a_manifest_with_a_version_differ(project: Project) -> None:
    project.write("tools.py", CLEAN)
    project.config(["./tools.py", {"path": "./tools.py", "version": "1.0.0"}])
    assert project.errors() == [
        "Tool module './tools.py' (tool_modules[1]) is the file tool_modules[0] already loads, "
        "with different metadata: version '1.0.0' here, not given there."]


def test_the_same_file_with_different_dependencies_is_an_error(project: Project) -> None:
    project.write("tools.py", CLEAN)
    project.config([{"path": "./tools.py", "dependencies": ["httpx"]},
                    {"path": "./tools.py", "dependencies": ["httpx", "rich"]}])
    assert project.errors() == [
        "Tool module './tools.py' (tool_modules[1]) is the file tool_modules[0] already loads, "
        "with different metadata: dependencies [httpx, rich] here, [httpx] there."]


def test_the_same_file_with_the_same_metadata_is_loaded_once(project: Project) -> None:
    project.write("tools.py", CLEAN)
    entry = {"path": "./tools.py", "version": "1.0.0", "dependencies": ["b", "a"]}
    project.config([entry, {**entry, "dependencies": ["a", "b"]}])
    outcome = project.run()
    assert (outcome.code, outcome.value) == (0, {"text": "ran"})


def test_a_command_line_repeat_of_a_config_module_is_loaded_once(project: Project) -> None:
    project.write("tools.py", CLEAN)
    project.config([{"path": "./tools.py", "version": "1.0.0"}])
    outcome = project.run("x", "tools.py")
    assert (outcome.code, outcome.value) == (0, {"text": "ran"})


# ------------------------------------------------------------------------------- integrity


def test_a_matching_integrity_loads(project: Project) -> None:
    project.write("tools.py", CLEAN)
    project.config([{"path": "./tools.py", "integrity": _digest(CLEAN)}])
    assert project.run().value == {"text": "ran"}


def test_the_integrity_is_the_base64_of_the_files_sha256(project: Project) -> None:
    path = project.write("tools.py", CLEAN)
    digest = hashlib.sha256(path.read_bytes()).digest()
    assert integrity_of(path.read_bytes()) == "sha256-" + base64.b64encode(digest).decode()


def test_a_mismatch_refuses_the_load_before_any_code_runs(project: Project) -> None:
    marker = project.folder / "ran.txt"
    text = f"""
    open({str(marker)!r}, "w").write("the module ran")

    def probe(input):
        return {{"text": "ran"}}
    """
    project.write("tools.py", text)
    stated = _digest(CLEAN)
    project.config([{"path": "./tools.py", "integrity": stated}])
    outcome = project.run()
    assert outcome.code == 2
    assert outcome.stderr == (
        f"error: Tool module './tools.py' (tool_modules[0]) does not match its integrity: the "
        f"manifest says {stated}, the file is {_digest(text)}.\n")
    assert not marker.exists()


def test_an_edit_after_the_digest_was_taken_is_refused(project: Project) -> None:
    project.write("tools.py", CLEAN)
    stated = _digest(CLEAN)
    project.config([{"path": "./tools.py", "integrity": stated}])
    assert project.errors() == []
    edited = CLEAN + "\n# an edit\n"
    project.write("tools.py", edited)
    assert project.errors() == [
        f"Tool module './tools.py' (tool_modules[0]) does not match its integrity: the manifest "
        f"says {stated}, the file is {_digest(edited)}."]


def test_a_wrong_integrity_is_refused_after_the_same_bytes_loaded(project: Project) -> None:
    project.write("tools.py", CLEAN)
    project.config([{"path": "./tools.py", "integrity": _digest(CLEAN)}])
    assert project.errors() == []
    wrong = _digest("other\n")
    project.config([{"path": "./tools.py", "integrity": wrong}])
    assert project.errors() == [
        f"Tool module './tools.py' (tool_modules[0]) does not match its integrity: the manifest "
        f"says {wrong}, the file is {_digest(CLEAN)}."]


@pytest.mark.parametrize("integrity", ["sha256-abc", "sha256-!!!!", "sha256-" + "A" * 40])
def test_an_integrity_that_is_not_a_sha256_digest_is_refused(project: Project,
                                                             integrity: str) -> None:
    project.write("tools.py", CLEAN)
    project.config([{"path": "./tools.py", "integrity": integrity}])
    assert project.errors() == [
        f"Tool module './tools.py' (tool_modules[0]): integrity '{integrity}' is not 'sha256-' "
        "followed by the base64 of a sha256 digest."]


def test_a_refused_module_stops_the_program_from_the_command_line(project: Project) -> None:
    project.write("tools.py", CLEAN)
    stated = _digest("something else\n")
    project.config([{"path": "./tools.py", "integrity": stated}])
    (project.folder / "prog.luma").write_text(
        'schema Out {\n  text: string\n}\ntool probe(name: string) -> Out {\n'
        '  description: "probes"\n}\nr = tool probe({ name: "x" })\nr\n')
    r = luma("prog.luma", cwd=project.folder)
    assert r.code == 2
    assert r.stdout == ""
    assert r.stderr == (
        f"error: Tool module './tools.py' (tool_modules[0]) does not match its integrity: the "
        f"manifest says {stated}, the file is {_digest(CLEAN)}.\n")


# ------------------------------------------------------------------------------- dependencies


@pytest.fixture()
def vendored(project: Project) -> Project:
    """``./vendor`` holds two third-party packages; ``fancylib`` imports ``fancyhelper``."""
    project.write("vendor/fancylib/__init__.py", """
        from fancyhelper import shout

        def greet(name):
            return shout("hello " + name)
    """)
    project.write("vendor/fancyhelper.py", """
        def shout(text):
            return text.upper()
    """)
    project.write("vendor/otherlib.py", "VALUE = 1\n")
    return project


def test_a_listed_dependency_loads_from_the_dependency_root(vendored: Project) -> None:
    vendored.write("tools.py", """
        import fancylib

        def probe(input):
            return {"text": fancylib.greet(input["name"]) + " " + fancylib.__file__}
    """)
    vendored.config([{"path": "./tools.py", "dependencies": ["fancylib", "fancyhelper"],
                      "dependency_root": "./vendor"}])
    outcome = vendored.run("ada")
    assert outcome.code == 0, outcome.stderr
    greeting, file = outcome.value["text"].rsplit(" ", 1)
    assert greeting == "HELLO ADA"
    assert Path(file) == vendored.folder / "vendor" / "fancylib" / "__init__.py"


def test_an_import_that_is_not_listed_is_refused_before_the_module_runs(
        vendored: Project) -> None:
    marker = vendored.folder / "ran.txt"
    vendored.write("tools.py", f"""
        open({str(marker)!r}, "w").write("the module ran")

        def probe(input):
            import otherlib
            return {{"text": "ran"}}
    """)
    vendored.config([{"path": "./tools.py", "dependencies": ["fancylib"],
                      "dependency_root": "./vendor"}])
    outcome = vendored.run()
    assert outcome.code == 2
    assert outcome.stderr == (
        "error: ./tools.py:5: Tool module './tools.py' may not import 'otherlib': it is not in "
        "tool_modules[0].dependencies.\n")
    assert not marker.exists()


def test_an_installed_package_that_is_not_listed_is_refused(project: Project) -> None:
    project.write("tools.py", "import pydantic\n" + CLEAN)
    project.config([{"path": "./tools.py", "dependencies": []}])
    assert project.errors() == [
        "./tools.py:1: Tool module './tools.py' may not import 'pydantic': it is not in "
        "tool_modules[0].dependencies."]


def test_without_a_list_any_package_may_be_imported(project: Project) -> None:
    project.write("tools.py", "import pydantic\n" + CLEAN)
    project.config([{"path": "./tools.py"}])
    assert project.errors() == []


def test_the_standard_library_and_luma_need_no_listing(project: Project) -> None:
    project.write("tools.py", """
        import json
        from luma import LumaToolError

        def probe(input):
            return {"text": json.dumps(LumaToolError.__name__)}
    """)
    project.config([{"path": "./tools.py", "dependencies": []}])
    assert project.run().value == {"text": '"LumaToolError"'}


@pytest.mark.parametrize("spelling, call", [
    ("import_module", "importlib.import_module('json')"),
    ("__import__", "__import__('json')"),
])
def test_a_dynamic_import_is_refused_when_dependencies_are_listed(
        project: Project, spelling: str, call: str) -> None:
    project.write("tools.py", f"""
        import importlib

        def probe(input):
            return {{"text": {call}.__name__}}
    """)
    project.config([{"path": "./tools.py", "dependencies": ["fancylib"]}])
    assert project.errors() == [
        f"./tools.py:5: Tool module './tools.py' uses a dynamic import ('{spelling}'), and "
        "dynamic imports are refused when tool_modules[0].dependencies is given."]


def test_a_disguised_dynamic_import_is_refused_when_called(vendored: Project) -> None:
    vendored.write("tools.py", """
        import importlib

        def probe(input):
            load = getattr(importlib, "import_" + "module")
            return {"text": load(input["name"]).__name__}
    """)
    vendored.config([{"path": "./tools.py", "dependencies": ["fancylib"],
                      "dependency_root": "./vendor"}])
    outcome = vendored.run("fancylib")
    assert outcome.code == 1
    assert outcome.stderr.startswith(
        "error[TOOL_FAILED]: Tool 'probe' failed: Tool module './tools.py' may not import "
        "'fancylib' dynamically: dynamic imports are refused when tool_modules[0].dependencies "
        "is given.\n")


def test_a_disguised_dunder_import_is_held_to_the_list(vendored: Project) -> None:
    vendored.write("tools.py", """
        def probe(input):
            load = __builtins__["__imp" + "ort__"]
            return {"text": load(input["name"]).__name__}
    """)
    vendored.config([{"path": "./tools.py", "dependencies": ["fancylib"],
                      "dependency_root": "./vendor"}])
    outcome = vendored.run("otherlib")
    assert outcome.code == 1
    assert outcome.stderr.startswith(
        "error[TOOL_FAILED]: Tool 'probe' failed: Tool module './tools.py' may not import "
        "'otherlib': it is not in tool_modules[0].dependencies.\n")


def test_a_dependency_root_outside_the_folder_is_refused(project: Project,
                                                        tmp_path: Path) -> None:
    (tmp_path / "vendor").mkdir()
    project.write("tools.py", CLEAN)
    project.config([{"path": "./tools.py", "dependency_root": "../vendor"}])
    assert project.errors() == [
        f"Tool module './tools.py' (tool_modules[0]): dependency_root '../vendor' resolves to "
        f"{(tmp_path / 'vendor').resolve()}, outside the program's folder; it may not leave it."]


def test_a_dependency_root_symlinked_out_of_the_folder_is_refused(project: Project,
                                                                 tmp_path: Path) -> None:
    (tmp_path / "site").mkdir()
    os.symlink(tmp_path / "site", project.folder / "vendor", target_is_directory=True)
    project.write("tools.py", CLEAN)
    project.config([{"path": "./tools.py", "dependency_root": "./vendor"}])
    assert project.errors() == [
        f"Tool module './tools.py' (tool_modules[0]): dependency_root './vendor' resolves to "
        f"{(tmp_path / 'site').resolve()}, outside the program's folder; it may not leave it."]


def test_a_dependency_root_that_is_not_a_folder_is_refused(project: Project) -> None:
    project.write("tools.py", CLEAN)
    project.config([{"path": "./tools.py", "dependency_root": "./vendor"}])
    assert project.errors() == [
        "Tool module './tools.py' (tool_modules[0]): dependency_root './vendor' is not a "
        "folder."]


def test_every_refused_module_is_reported_and_nothing_runs(project: Project,
                                                          tmp_path: Path) -> None:
    (tmp_path / "outside.py").write_text(CLEAN)
    project.write("tools.py", CLEAN)
    project.config(["../outside.py", {"path": "./tools.py", "version": "one"}])
    outcome = project.run()
    assert outcome.code == 2
    assert outcome.stderr.splitlines() == [
        f"error: Tool module '../outside.py' (tool_modules[0]) resolves to "
        f"{(tmp_path / 'outside.py').resolve()}, outside the program's folder; tool module "
        "paths may not leave it.",
        "error: Tool module './tools.py' (tool_modules[1]): version 'one' is not a semver "
        "version (MAJOR.MINOR.PATCH, such as 1.0.0)."]
