"""The file idempotency store's contact with the file system: it only ever reads, locks,
replaces or moves regular files, never follows a symbolic link it did not make, and parses
what it reads strictly (RUNTIME.md §5).

- :func:`read_store_file` reads the store file, refusing anything that is not a regular file.
- :func:`open_lock_file` and :func:`ensure_folder` open the lock files and the claim folder.
- :func:`loads_strict` parses JSON strictly (Luma's one strict reader) and says why not.

Each refusal is a :class:`Refused` whose text is the one-line message the user sees.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any, NamedTuple

_KINDS = {stat.S_IFLNK: "a symbolic link", stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO",
          stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket"}

_STORE_HINT = " Point idempotency_store.path at a file Luma may create."


class Refused(Exception):
    """A path the store must leave alone: the program does not start, or the call fails."""


class BadJSON(Exception):
    """Text that is not strict JSON; the argument says why, in a few words."""


class Identity(NamedTuple):
    """Which file a path named when it was read: a later replace or move checks it is the same."""

    device: int
    inode: int


def kind_of(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def identity_at(path: Path) -> Identity | None:
    """The identity of the entry at ``path`` (not followed), or None when there is none."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    return Identity(info.st_dev, info.st_ino)


def check_store_path(path: Path, shown: str) -> None:
    """Refuse a store path that exists and is not a regular file (a symlink, a device...)."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    if not stat.S_ISREG(info.st_mode):
        raise Refused(f"Idempotency store '{shown}' is {kind_of(info.st_mode)}, not a regular "
                      f"file; it was left untouched.{_STORE_HINT}")


def read_store_file(path: Path, shown: str) -> tuple[bytes, Identity] | None:
    """The bytes of the store file and the identity of the file they came from; None when
    there is no file. Refuses (without opening it) anything that is not a regular file."""
    check_store_path(path, shown)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symbolic link appeared after the check
            raise Refused(f"Idempotency store '{shown}' is a symbolic link, not a regular file; "
                          f"it was left untouched.{_STORE_HINT}") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # swapped for a FIFO or a device after the check
            raise Refused(f"Idempotency store '{shown}' is {kind_of(info.st_mode)}, not a "
                          f"regular file; it was left untouched.{_STORE_HINT}")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks), Identity(info.st_dev, info.st_ino)


def open_lock_file(path: Path, shown: str) -> int:
    """Open (creating it if needed) a lock file: a regular file, never through a symlink."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EOPNOTSUPP):
            _refuse_lock(path, shown, "regular file")
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise Refused(f"Idempotency store lock '{shown}' is {kind_of(mode)}, not a regular "
                      "file; it was left untouched.")
    return fd


def ensure_folder(path: Path, shown: str) -> None:
    """Create the claim folder, or check that what is there is a real folder."""
    try:
        os.mkdir(path, 0o700)
        return
    except FileExistsError:
        pass
    mode = os.lstat(path).st_mode
    if not stat.S_ISDIR(mode):
        raise Refused(f"Idempotency store lock '{shown}' is {kind_of(mode)}, not a folder; it "
                      "was left untouched.")


def _refuse_lock(path: Path, shown: str, wanted: str) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise Refused(f"Idempotency store lock '{shown}' is {kind_of(mode)}, not a {wanted}; "
                      "it was left untouched.")


def is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


# -- strict JSON ---------------------------------------------------------------------------------

def loads_strict(data: bytes) -> Any:
    """Parse ``data`` with Luma's one strict JSON reader (:func:`luma.runtime.json_text.loads`:
    UTF-8, no duplicate key, no ``NaN``/``Infinity``, numbers within a float's range, bounded
    nesting), raising :class:`BadJSON` with a short reason for anything else."""
    from luma.runtime.json_text import NotUtf8Error, decode_utf8, loads

    if not data.strip():
        raise BadJSON("the file is empty")
    try:
        return loads(decode_utf8(data))
    except NotUtf8Error as exc:
        raise BadJSON(_short(f"not UTF-8 text (byte 0x{exc.byte:02x} at offset {exc.offset})")) \
            from None
    except json.JSONDecodeError as exc:
        raise BadJSON(_short(f"not valid JSON: {exc}")) from None
    except (ValueError, RecursionError) as exc:
        raise BadJSON(_short(str(exc) or "nested too deeply")) from None


def _short(reason: str) -> str:
    """A reason fit for a one-line message (a number of 400 digits is cut)."""
    reason = " ".join(reason.split())
    return reason if len(reason) <= 160 else reason[:157] + "..."


def shown_value(value: Any) -> str:
    """A short rendering of a value for a message: JSON literals as JSON, strings in single
    quotes (cut at 40 characters), containers by their kind."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, str):
        return repr(value[:40] + ("..." if len(value) > 40 else ""))
    if isinstance(value, (int, float)):
        return repr(value)
    return "an object" if isinstance(value, dict) else "a list"
