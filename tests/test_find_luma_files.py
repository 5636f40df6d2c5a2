"""The files ``luma check``, ``luma fmt`` and ``luma test`` work on: ``find_luma_paths`` (strings,
what the check uses, without pathlib) finds the same files, written the same way and in the same
order, as the ``Path.rglob`` search it replaced."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from luma.compile import find_luma_files, find_luma_paths


def rglob_search(paths: list[str]) -> tuple[list[str], list[str]]:
    """The search as it was written with pathlib."""
    found: list[Path] = []
    missing: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found.extend(sorted(f for f in path.rglob("*.luma") if f.is_file()
                                and not any(part.startswith(".") for part in f.parts[len(path.parts):])))
        elif path.is_file():
            found.append(path)
        else:
            missing.append(p)
    return [str(f) for f in found], missing


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ["top.luma", "Upper.luma", "a/b.luma", "a-c/x.luma", "a/deep/er/z.luma",
                 "a/notes.txt", "a/.hidden.luma", ".git/skipped.luma", "a/.cache/skipped.luma",
                 "dir.luma/inside.luma", "b/luma", "b/x.lumax"]:
        path = tmp_path / "tree" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("schema A {\n  x: int\n}\n", encoding="utf-8")
    (tmp_path / "tree" / "linked").symlink_to(tmp_path / "tree" / "a")  # a folder: not followed
    (tmp_path / "tree" / "link.luma").symlink_to(tmp_path / "tree" / "top.luma")  # a file: kept
    (tmp_path / "tree" / "dangling.luma").symlink_to(tmp_path / "nowhere.luma")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("paths", [
    ["."], ["tree"], ["./tree/"], ["tree//a"], ["tree/./a-c", "tree/a"], ["tree/top.luma"],
    ["./tree/a/b.luma", "tree"], ["tree/missing", "tree/a"], ["tree/a/.hidden.luma"],
])
def test_the_files_found_are_those_of_the_pathlib_search(tree: Path, paths: list[str]) -> None:
    expected = rglob_search(paths)
    assert find_luma_paths(paths) == expected
    files, missing = find_luma_files(paths)
    assert ([str(f) for f in files], missing) == expected


def test_an_absolute_folder_is_searched_the_same_way(tree: Path) -> None:
    absolute = str(tree / "tree") + os.sep
    assert find_luma_paths([absolute]) == rglob_search([absolute])
    assert find_luma_paths([absolute])[0][0] == str(tree / "tree" / "Upper.luma")


def test_the_order_is_that_of_the_folders_then_the_names(tree: Path) -> None:
    found, _ = find_luma_paths(["tree"])
    assert found == ["tree/Upper.luma", "tree/a/b.luma", "tree/a/deep/er/z.luma",
                     "tree/a-c/x.luma", "tree/dir.luma/inside.luma", "tree/link.luma",
                     "tree/top.luma"]


def test_exclude_applies_to_the_strings_found(tree: Path) -> None:
    found, _ = find_luma_paths(["tree"], exclude=["tree/a", "*.luma/*"])
    assert found == ["tree/Upper.luma", "tree/a-c/x.luma", "tree/link.luma", "tree/top.luma"]


def test_a_file_named_twice_is_checked_once(tree: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from luma.cli import main

    monkeypatch.chdir(tree / "tree")
    path = "top.luma"  # the same string twice, and the same file by other names and a link
    assert main(["check", path, path, "./top.luma", str(tree / "tree" / "link.luma")]) == 0
    assert capsys.readouterr().err == "checked 1 file: no problems\n"
