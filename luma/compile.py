"""The front end as one call: read, parse and check files."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

from luma.record import Record
from luma.syntax import ast
from luma.syntax.diagnostics import Diagnostic
from luma.syntax.source import SourceFile

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:  # luma check works on paths as strings: pathlib costs its start-up
    from pathlib import Path
    from typing import TypeVar

    FilePath = TypeVar("FilePath", str, Path)


class CheckedFile(Record):
    """One file after the front end: its source, its AST (None on a syntax error) and all its
    diagnostics."""

    __slots__ = __match_args__ = ("source", "program", "diagnostics")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, source: SourceFile, program: ast.Program | None,
                 diagnostics: list[Diagnostic]) -> None:
        self.source = source
        self.program = program
        self.diagnostics = diagnostics

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.diagnostics)


def check_source(source: SourceFile) -> CheckedFile:
    from luma.check import check_program
    from luma.syntax.parse import parse_source

    program, diagnostics = parse_source(source)
    if program is not None:
        diagnostics = diagnostics + check_program(program)
    return CheckedFile(source, program, diagnostics)


def check_text(text: str, path: str = "<input>") -> CheckedFile:
    return check_source(SourceFile(path, text))


def check_file(path: str | Path) -> CheckedFile:
    from luma.check import check_program
    from luma.syntax.parse import parse_file

    source, program, diagnostics = parse_file(path)
    if program is not None:
        diagnostics = diagnostics + check_program(program)
    return CheckedFile(source, program, diagnostics)


def find_luma_files(paths: list[str],
                    exclude: Sequence[str] = ()) -> tuple[list[Path], list[str]]:
    """The ``.luma`` files named by ``paths`` (folders searched recursively, sorted) that no
    ``exclude`` glob matches (:func:`is_excluded`), and the paths that do not exist."""
    from pathlib import Path

    found, missing = find_luma_paths(paths, exclude)
    return [Path(f) for f in found], missing


def find_luma_paths(paths: list[str],
                    exclude: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """:func:`find_luma_files` with the files as strings, written as ``str(Path(...))`` would
    write them, in the same order."""
    found: list[str] = []
    missing: list[str] = []
    for p in paths:
        path = _written_as_path(p)
        if os.path.isdir(path):
            found.extend(sorted(_luma_files_in(path), key=lambda f: f.split(os.sep)))
        elif os.path.isfile(path):
            found.append(path)
        else:
            missing.append(p)
    if exclude:
        from pathlib import Path

        found = [f for f in found if not is_excluded(Path(f), exclude)]
    return found, missing


def _written_as_path(path: str) -> str:
    """``path`` as ``str(Path(path))``: no empty or ``.`` parts, no trailing separator."""
    if os.altsep:
        path = path.replace(os.altsep, os.sep)
    drive, rest = os.path.splitdrive(path)
    root = os.sep if rest.startswith(os.sep) else ""
    if rest.startswith(os.sep * 2) and not rest.startswith(os.sep * 3) and not drive:
        root = os.sep * 2  # POSIX keeps exactly two leading slashes
    parts = [part for part in rest.split(os.sep) if part and part != "."]
    return drive + root + os.sep.join(parts) or "."


def _luma_files_in(folder: str) -> Iterator[str]:
    """The ``*.luma`` files under ``folder``, as ``Path(folder).rglob`` finds them (symbolic links
    to folders not followed), leaving out hidden files and folders."""
    prefix = "" if folder == "." else folder if folder.endswith(os.sep) else folder + os.sep
    try:
        with os.scandir(folder) as entries:
            listed = list(entries)
    except PermissionError:
        return
    for entry in listed:
        if entry.name.startswith("."):
            continue
        if entry.is_dir() and not entry.is_symlink():
            yield from _luma_files_in(prefix + entry.name)
        elif os.path.normcase(entry.name).endswith(".luma") and entry.is_file():
            yield prefix + entry.name


def is_excluded(path: Path, patterns: Sequence[str]) -> bool:
    """Whether a glob of ``patterns`` matches the file's path, the path of a folder it is in, or
    the name of either — as written and relative to the working folder. ``*`` also matches
    ``/``; a leading ``./`` and a trailing ``/`` of a pattern are ignored."""
    from fnmatch import fnmatchcase
    from pathlib import Path

    globs = [g.removeprefix("./").rstrip("/") or "." for g in patterns]
    forms = [path]
    try:
        forms.append(path.resolve().relative_to(Path.cwd().resolve()))
    except (OSError, ValueError):
        pass  # outside the working folder: only the path as written
    candidates: set[str] = set()
    for form in forms:
        parts = form.parts
        candidates.update(parts)
        candidates.update(Path(*parts[:i]).as_posix() for i in range(1, len(parts) + 1))
    return any(fnmatchcase(c, g) for c in candidates for g in globs)


# A pool of worker processes costs some 50-70 ms of CPU to start (importing multiprocessing,
# forking, the workers' first files): below this much source it costs more than it saves.
PARALLEL_MIN_BYTES = 256 * 1024


def check_files(paths: Sequence[FilePath],
                keep_program: Callable[[FilePath], bool] = lambda p: True, jobs: int | None = None,
                ) -> Iterator[tuple[FilePath, CheckedFile | OSError]]:
    """Check ``paths``; yield each path, in order, with its ``CheckedFile`` or the ``OSError``
    that kept it from being read.

    A result's program is None (as on a syntax error) when ``keep_program(path)`` is False: a
    caller that does not need the AST says so, and the AST is then not sent back from a worker.
    With ``PARALLEL_MIN_BYTES`` of source or more and more than one idle CPU, the files are
    checked by a pool of forked worker processes, one per idle CPU (``jobs`` to choose); the
    results are the same, in the same order, as checking them one by one here."""
    workers = min(_idle_cpus() if jobs is None else jobs, len(paths) // 2)
    if workers > 1 and _can_fork() and _total_size(paths) >= PARALLEL_MIN_BYTES:
        import multiprocessing

        tasks = [(path, keep_program(path)) for path in paths]
        chunk = max(1, min(64, len(tasks) // (workers * 8)))
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            yield from pool.imap(_check_one, tasks, chunksize=chunk)
        return
    for path in paths:
        yield _check_one((path, keep_program(path)))


def _total_size(paths: Sequence[str | Path]) -> int:
    total = 0
    for path in paths:
        try:
            total += os.path.getsize(path)
        except OSError:
            pass  # reported when it is read
        if total >= PARALLEL_MIN_BYTES:
            break
    return total


def _check_one(task: tuple[FilePath, bool]) -> tuple[FilePath, CheckedFile | OSError]:
    path, keep = task
    try:
        checked = check_file(path)
    except OSError as exc:
        return path, exc
    except Exception as exc:  # a bug in Luma: it is this file's diagnostic, the others go on
        if os.environ.get("LUMA_DEBUG"):
            raise
        checked = _not_checked(path, exc)
    if not keep:
        checked.program = None
    return path, checked


def _not_checked(path: str | Path, exc: Exception) -> CheckedFile:
    """The result for a file the front end failed on: one located error that says so."""
    from luma.syntax.source import Span

    with open(path, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    return CheckedFile(SourceFile(str(path), text), None, [Diagnostic(
        "error", "INTERNAL_ERROR", f"Luma could not check this file: internal error "
        f"({type(exc).__name__}: {exc}).", Span(str(path), 0, 0),
        "this is a bug in Luma, not in the file; set LUMA_DEBUG=1 to see the traceback")])


def _idle_cpus() -> int:
    """The CPUs this process may use, less the share other jobs keep busy (the load average,
    over all the machine's CPUs): on a busy machine more workers only add their start-up and
    get no more CPU."""
    cpus = _usable_cpus()
    try:
        busy = os.getloadavg()[0] / (os.cpu_count() or cpus)
    except (AttributeError, OSError):
        return cpus
    return max(1, min(cpus, int(cpus * (1 - busy) + 0.5)))


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()
