"""Files Luma writes by a name the user gives (``--generate-tool-types``, ``--trace``,
``--record``): never over a file Luma did not write.

Every such file is recognisable as Luma's own (a generated file's header line, a trace's event
lines, a recording's envelope). An existing regular file is replaced only when it is empty or
recognised; the program's own inputs — its source, its config, its tool modules — are never
replaced, whatever they contain, even through a symbolic link. A device or a pipe
(``/dev/stdout``, ``/dev/null``) holds nothing to lose and is always allowed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO

HEAD_BYTES = 4096
"""How much of an existing file a recogniser is given."""


class OutputRefused(Exception):
    """Luma will not write this file; the message is one line naming it and saying why."""


def guard_output(path: str, is_luma_file: Callable[[bytes], bool], *,
                 protected: Mapping[Path, str] | None = None, made: str = "written") -> None:
    """Raise :class:`OutputRefused` unless ``path`` may be (over)written.

    ``is_luma_file`` gets the first :data:`HEAD_BYTES` bytes of an existing, non-empty file
    and says whether Luma wrote it. ``protected`` maps resolved paths to the reason they may
    never be written (``"it is a tool module of this program"``); ``made`` is the verb of the
    refusal (``generated`` or ``written``)."""
    target = Path(path)
    resolved = target.resolve()
    reason = (protected or {}).get(resolved)
    if reason is not None:
        raise OutputRefused(f"refusing to write {path}: {reason}")
    try:
        info = os.stat(resolved)
    except FileNotFoundError:
        return
    except OSError:
        return  # let the write itself report what is wrong with the path
    if stat.S_ISDIR(info.st_mode):
        raise OutputRefused(f"refusing to write {path}: it is a folder")
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return
    try:
        with open(resolved, "rb") as existing:
            head = existing.read(HEAD_BYTES)
    except OSError:
        return
    if not is_luma_file(head):
        raise OutputRefused(f"refusing to write {path}: the file exists and was not {made} by "
                            "luma (remove it first to replace it)")


def protected_inputs(program: str | Path, config: str | Path | None,
                     tool_modules: Iterable[str | Path]) -> dict[Path, str]:
    """The files of a program that no output may replace, resolved, with the reason."""
    out: dict[Path, str] = {}
    for module in tool_modules:
        out[Path(module).resolve()] = "it is a tool module of this program"
    if config is not None:
        out[Path(config).resolve()] = "it is the config file of this program"
    out[Path(program).resolve()] = "it is the program's source file"
    return out


def discard_stream(stream: IO[str]) -> None:
    """Point a standard stream that failed (a full disk, a reader gone) at the null device, so
    that what is still buffered in it is not retried, and reported again, when Python exits."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
