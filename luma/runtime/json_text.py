"""JSON a user hands to Luma (``--input``, ``--arg``, ``luma.config.json``): UTF-8 only, and a key
given twice in one object is an error naming it, never a silent last-one-wins."""

from __future__ import annotations

import json
from typing import Any

_BOM = b"\xef\xbb\xbf"


class NotUtf8Error(ValueError):
    """Bytes that are not UTF-8 text; the message says which byte and where."""

    def __init__(self, byte: int, offset: int) -> None:
        super().__init__(f"is not UTF-8 text (byte 0x{byte:02x} at offset {offset})")
        self.byte = byte
        self.offset = offset


class DuplicateKeyError(ValueError):
    """One or more objects give a key twice; ``paths`` are their key paths (``a.b``, ``x[0].k``),
    in the order the objects end in the text."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__("duplicate key " + ", ".join(f"'{p}'" for p in paths))
        self.paths = paths


def decode_utf8(data: bytes) -> str:
    """``data`` as text; a leading byte order mark is dropped. Raises :class:`NotUtf8Error` with
    the offset of the first bad byte in ``data``."""
    skip = len(_BOM) if data.startswith(_BOM) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUtf8Error(data[skip + exc.start], skip + exc.start) from None


def loads(text: str) -> Any:
    """Strict JSON (:func:`luma.runtime.values.parse_json`: no ``NaN``, no infinities, bounded
    nesting), and a key repeated in one object raises :class:`DuplicateKeyError`. A
    ``json.JSONDecodeError`` means invalid JSON; another ``ValueError`` says what JSON does not
    allow."""
    from luma.runtime.values import parse_json

    repeated: list[tuple[dict[str, Any], str]] = []

    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj:
                repeated.append((obj, key))
            obj[key] = value
        return obj

    value = parse_json(text, object_pairs_hook=build)
    if repeated:
        where = _object_paths(value)
        paths = [_join(where[id(obj)], key) for obj, key in repeated if id(obj) in where]
        raise DuplicateKeyError(list(dict.fromkeys(paths)))
    return value


def _object_paths(value: Any) -> dict[int, str]:
    """The key path of every object in ``value``, by identity ("" for the outermost)."""
    out: dict[int, str] = {}
    pending: list[tuple[Any, str]] = [(value, "")]
    while pending:
        item, path = pending.pop()
        if isinstance(item, dict):
            out[id(item)] = path
            pending.extend((v, _join(path, k)) for k, v in item.items())
        elif isinstance(item, list):
            pending.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
    return out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
