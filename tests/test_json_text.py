"""JSON from users: a key given twice is an error naming its path; only UTF-8 is text."""

from __future__ import annotations

import json

import pytest

from luma.runtime.json_text import DuplicateKeyError, NotUtf8Error, decode_utf8, loads


def test_duplicate_keys_are_named_by_their_path_in_the_order_their_objects_end() -> None:
    with pytest.raises(DuplicateKeyError) as caught:
        loads('{"a": {"b": [1, {"c": 1, "c": 2}]}, "d": 1, "d": 2}')
    assert caught.value.paths == ["a.b[1].c", "d"]
    assert str(caught.value) == "duplicate key 'a.b[1].c', 'd'"


def test_json_without_duplicates_is_what_json_loads_gives() -> None:
    text = '{"a": [1, 2.5, null, {"b": "c"}], "d": {}}'
    assert loads(text) == json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        loads('{"a": }')


def test_the_offset_of_a_bad_byte_counts_a_byte_order_mark() -> None:
    assert decode_utf8(b"\xef\xbb\xbf{}") == "{}"
    with pytest.raises(NotUtf8Error) as caught:
        decode_utf8(b"\xef\xbb\xbf{\"x\": \"\xc3\"}")
    assert str(caught.value) == "is not UTF-8 text (byte 0xc3 at offset 10)"
