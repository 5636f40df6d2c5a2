"""The front end as one call: read, parse and check files."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from luma.record import Record
from luma.syntax import ast
from luma.syntax.diagnostics import Diagnostic
from luma.syntax.source import SourceFile


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
    if exclude:
        found = [f for f in found if not is_excluded(f, exclude)]
    return found, missing


def is_excluded(path: Path, patterns: Sequence[str]) -> bool:
    """Whether a glob of ``patterns`` matches the file's path, the path of a folder it is in, or
    the name of either — as written and relative to the working folder. ``*`` also matches
    ``/``; a leading ``./`` and a trailing ``/`` of a pattern are ignored."""
    from fnmatch import fnmatchcase

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


def check_files(paths: Sequence[Path], keep_program: Callable[[Path], bool] = lambda p: True,
                jobs: int | None = None) -> Iterator[tuple[Path, CheckedFile | OSError]]:
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


def _total_size(paths: Sequence[Path]) -> int:
    total = 0
    for path in paths:
        try:
            total += os.path.getsize(path)
        except OSError:
            pass  # reported when it is read
        if total >= PARALLEL_MIN_BYTES:
            break
    return total


def _check_one(task: tuple[Path, bool]) -> tuple[Path, CheckedFile | OSError]:
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


def _not_checked(path: Path, exc: Exception) -> CheckedFile:
    """The result for a file the front end failed on: one located error that says so."""
    from luma.syntax.source import Span

    text = path.read_bytes().decode("utf-8", errors="replace")
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
