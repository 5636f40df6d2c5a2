"""The file idempotency store never touches what is not its own, and reads a bad file safely.

Files of the wrong type (symlink, directory, FIFO, device node), a file that is not a store, a
path outside the program's folder, envelopes that are almost right, corrupt stores that nest
deeply or hold huge numbers, tampered encryption headers, and turning encryption on.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from luma.runtime.file_store import FileIdempotencyStore
from luma.runtime.store_config import open_idempotency_store
from luma.runtime.stores import (
    IdempotencyOutcome,
    StoreError,
    StoreStartupError,
    input_fingerprint,
)

TTL = 300_000
SECRET = {"LUMA_IDEMPOTENCY_KEY": "a-long-and-secure-key"}
ROW = {"row_id": "ROW-SECRET-7731", "status": "written"}


def fp(value: str = "a") -> str:
    return input_fingerprint({"request_id": "r-1", "value": value})


def run_once(store: FileIdempotencyStore, key: str = "r-1", value: Any = ROW) -> IdempotencyOutcome:
    async def compute() -> Any:
        return value

    return asyncio.run(store.run_once("db_write", key, fp(), TTL, compute))


def replay(store: FileIdempotencyStore, key: str = "r-1") -> IdempotencyOutcome:
    async def compute() -> Any:
        raise AssertionError("the handler ran again")

    return asyncio.run(store.run_once("db_write", key, fp(), TTL, compute))


def snapshot(folder: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every entry of ``folder`` (not followed): its type bits, inode and, for a regular file,
    its bytes."""
    out = {}
    for entry in folder.iterdir():
        info = entry.lstat()
        data = entry.read_bytes() if stat.S_ISREG(info.st_mode) else None
        out[entry.name] = (stat.S_IFMT(info.st_mode), info.st_ino, data)
    return out


# -- files of another type: nothing is created, locked, moved or replaced ------------------------

def make_symlink(folder: Path) -> Path:
    target = folder / "elsewhere.json"
    target.write_text('{"version": 1, "records": {}}')
    (folder / "idem.json").symlink_to(target)
    return folder / "idem.json"


def make_directory(folder: Path) -> Path:
    (folder / "idem.json").mkdir()
    return folder / "idem.json"


def make_fifo(folder: Path) -> Path:
    os.mkfifo(folder / "idem.json")
    return folder / "idem.json"


def make_char_device(folder: Path) -> Path:
    # The same device numbers as /dev/null (1, 3), in a folder of the test's own.
    os.mknod(folder / "idem.json", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return folder / "idem.json"


KINDS = [(make_symlink, "a symbolic link"), (make_directory, "a directory"),
         (make_fifo, "a FIFO")]
if os.geteuid() == 0:  # creating a device node needs root
    KINDS.append((make_char_device, "a character device"))


@pytest.mark.parametrize("make, kind", KINDS, ids=[k for _, k in KINDS])
def test_a_path_that_is_not_a_regular_file_refuses_to_start_and_is_left_alone(
        tmp_path: Path, make: Any, kind: str) -> None:
    path = make(tmp_path)
    before = snapshot(tmp_path)
    for encryption, environ in ((None, None), ("aes-256-gcm", SECRET)):
        with pytest.raises(StoreStartupError) as caught:
            FileIdempotencyStore(path, encryption=encryption, environ=environ)
        assert caught.value.code == "IDEMPOTENCY_STORE_UNAVAILABLE"
        assert caught.value.message == (
            f"Idempotency store '{path}' is {kind}, not a regular file; it was left untouched. "
            "Point idempotency_store.path at a file Luma may create.")
    assert snapshot(tmp_path) == before  # no lock file, no quarantine, nothing replaced


@pytest.mark.parametrize("make, kind", KINDS, ids=[k for _, k in KINDS])
def test_a_store_replaced_by_another_kind_of_file_fails_the_call_and_is_left_alone(
        tmp_path: Path, make: Any, kind: str) -> None:
    store = FileIdempotencyStore(tmp_path / "idem.json")
    make(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(StoreError) as caught:
        run_once(store)
    assert caught.value.code == "TOOL_IDEMPOTENCY_STORE_FAILED"
    assert caught.value.message == (
        f"Idempotency store '{tmp_path / 'idem.json'}' is {kind}, not a regular file; it was "
        "left untouched. Point idempotency_store.path at a file Luma may create.")
    after = snapshot(tmp_path)
    after.pop("idem.json.locks")  # the claim folder's own inode data is not compared
    before.pop("idem.json.locks")
    assert after == before


@pytest.mark.parametrize("lock_name", ["idem.json.lock", "idem.json.locks"])
def test_a_lock_path_that_is_a_symbolic_link_is_not_followed(tmp_path: Path,
                                                             lock_name: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_text("precious")
    (tmp_path / lock_name).symlink_to(victim if lock_name.endswith(".lock") else outside)
    with pytest.raises((StoreStartupError, StoreError)) as caught:
        store = FileIdempotencyStore(tmp_path / "idem.json")
        run_once(store)
    assert caught.value.message == (
        f"Idempotency store lock '{tmp_path / lock_name}' is a symbolic link, not a "
        f"{'regular file' if lock_name.endswith('.lock') else 'folder'}; it was left untouched.")
    assert victim.read_text() == "precious"
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]


# -- an existing file that is not a store is never moved or replaced ------------------------------

@pytest.mark.parametrize("content, reason", [
    (b"garbage", "not valid JSON: Expecting value: line 1 column 1 (char 0)"),
    (b"", "the file is empty"),
    (b"[1, 2]", "not a store envelope"),
    (b'{"name": "my-app", "dependencies": {}}', "not a store envelope"),
    (b"\xff\xfe{}", "not UTF-8 text (byte 0xff at offset 0)"),
    (b'{"version": true, "records": {}}', 'its "version" is true, not 1'),
    (b'{"version": 1.0, "records": {}}', 'its "version" is 1.0, not 1'),
    (b'{"version": "1", "records": {}}', "its \"version\" is '1', not 1"),
])
def test_an_existing_file_that_is_not_a_store_refuses_to_start_and_is_kept(
        tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "idem.json"
    path.write_bytes(content)
    before = snapshot(tmp_path)
    warnings: list[str] = []
    with pytest.raises(StoreStartupError) as caught:
        FileIdempotencyStore(path, warn=warnings.append)
    assert caught.value.message == (
        f"Idempotency store '{path}' is not a Luma idempotency store ({reason}); it was left "
        "untouched. Point idempotency_store.path at another file, or move this one away.")
    assert warnings == []
    assert snapshot(tmp_path) == before  # no quarantine, and no lock file beside it either


def test_a_store_replaced_by_a_foreign_file_during_a_run_fails_the_call(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    store = FileIdempotencyStore(path)
    run_once(store)
    path.write_text("my notes")
    with pytest.raises(StoreError) as caught:
        run_once(store, "r-2")
    assert caught.value.code == "TOOL_IDEMPOTENCY_STORE_FAILED"
    assert "is not a Luma idempotency store (not valid JSON: " in caught.value.message
    assert path.read_text() == "my notes"


def test_a_relative_path_may_not_leave_the_programs_folder(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    with pytest.raises(StoreStartupError) as caught:
        open_idempotency_store("file", "../state/idem.json", base_dir=project)
    outside = tmp_path / "state" / "idem.json"
    assert caught.value.message == (
        f"idempotency_store.path '../state/idem.json' resolves to {outside}, outside the "
        "program's folder; give an absolute path to keep the store elsewhere.")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["project"]
    # Through a symbolic link to a folder outside: the same.
    (tmp_path / "out").mkdir()
    (project / "link").symlink_to(tmp_path / "out")
    with pytest.raises(StoreStartupError) as caught:
        open_idempotency_store("file", "link/idem.json", base_dir=project)
    assert "outside the program's folder" in caught.value.message
    assert list((tmp_path / "out").iterdir()) == []


def test_an_absolute_path_may_point_anywhere(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    elsewhere = tmp_path / "state" / "idem.json"
    store = open_idempotency_store("file", str(elsewhere), base_dir=project)
    assert isinstance(store, FileIdempotencyStore) and store.path == elsewhere
    inside = open_idempotency_store("file", "sub/idem.json", base_dir=project)
    assert isinstance(inside, FileIdempotencyStore)
    assert inside.path == project / "sub" / "idem.json"


# -- a corrupt store is quarantined, whatever it holds ------------------------------------------

def a_store_with(record_text: str) -> str:
    return '{"version":1,"records":{"db_write":{"r-1":' + record_text + "}}}"


def record_text(result: str = '"x"', expires: str = "9999999999999") -> str:
    return (f'{{"fingerprint":"{fp()}","result":{result},"stored_at_ms":1,'
            f'"expires_at_ms":{expires}}}')


@pytest.mark.parametrize("content, reason", [
    (a_store_with(record_text(result="[" * 100_000 + "]" * 100_000)),
     "the value nests deeper than 200 levels"),
    (a_store_with(record_text(result='{"a":' * 100_000 + "1" + "}" * 100_000)),
     "the value nests deeper than 200 levels"),
    (a_store_with(record_text(expires="9" * 5000)),
     "an int of 5000 digits is beyond ±1.8e308, the range of a JSON number"),
    (a_store_with(record_text(expires="1" + "0" * 30)),
     "the record of key 'r-1' of tool 'db_write' is malformed"),
    (a_store_with(record_text(result="1" + "0" * 400 + ".5")), "10000000000"),
    (a_store_with(record_text(result="NaN")), "NaN is not a JSON number"),
    ('{"version":1,"records":{"db_write":{}},"records":{}}', "duplicate key 'records'"),
    (a_store_with(record_text().replace('"stored_at_ms":1', '"stored_at_ms":1,"stored_at_ms":2')),
     "duplicate key 'records.db_write.r-1.stored_at_ms'"),
    ('{"version":1,"records":{"db_write":{"r-1":', "not valid JSON: Expecting"),
    ('{"version": 1}', "the envelope does not have the fields of a store"),
    ('{"version":1,"records":{"db_write":{"line\\none":{}}}}',
     "the record of key 'line\\none' of tool 'db_write' is malformed"),
])
def test_a_corrupt_store_is_quarantined_whatever_it_holds(tmp_path: Path, content: str,
                                                          reason: str) -> None:
    path = tmp_path / "idem.json"
    path.write_text(content)
    warnings: list[str] = []
    store = FileIdempotencyStore(path, warn=warnings.append)
    quarantined = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert len(quarantined) == 1 and quarantined[0].read_text() == content
    assert len(warnings) == 1
    assert warnings[0].startswith(f"Idempotency store '{path}' is corrupt ({reason}")
    assert "\n" not in warnings[0] and len(warnings[0]) < 2 * len(str(path)) + 300
    assert run_once(store).replayed is False


def test_a_valid_store_with_its_keys_in_another_order_is_read(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    run_once(FileIdempotencyStore(path))
    path.write_text(json.dumps(json.loads(path.read_text()), sort_keys=True, indent=2))
    assert replay(FileIdempotencyStore(path)) == IdempotencyOutcome(ROW, replayed=True)


def test_a_newer_store_with_a_body_this_version_cannot_parse_is_left_alone(
        tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    path.write_text('{"version": 2, "records": {"t": {"k": {"result": NEW-SYNTAX}}}}')
    before = snapshot(tmp_path)
    with pytest.raises(StoreStartupError) as caught:
        FileIdempotencyStore(path)
    assert caught.value.message == (
        f"Idempotency store '{path}' has format version 2; this version of Luma reads "
        "version 1.")
    assert snapshot(tmp_path) == before


def test_a_result_nested_too_deeply_to_store_says_the_tool_ran(tmp_path: Path) -> None:
    value: Any = "bottom"
    for _ in range(100_000):
        value = [value]
    store = FileIdempotencyStore(tmp_path / "idem.json")
    with pytest.raises(StoreError) as caught:
        run_once(store, value=value)
    assert caught.value.code == "TOOL_IDEMPOTENCY_STORE_FAILED"
    assert caught.value.retryable is False
    assert caught.value.message == (
        "Tool 'db_write' ran for idempotency key 'r-1', but its result was not recorded: it "
        "is not JSON (nested too deeply). A later call with this key will run the tool again.")


# -- encryption headers and turning encryption on --------------------------------------------

def encrypted_store(path: Path) -> dict[str, Any]:
    run_once(FileIdempotencyStore(path, encryption="aes-256-gcm", environ=SECRET))
    return json.loads(path.read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("field, value, reason", [
    ("iterations", 10_000_000, "iterations is 10000000; this format uses 600000"),
    ("iterations", 1, "iterations is 1; this format uses 600000"),
    ("iterations", True, "iterations is true; this format uses 600000"),
    ("kdf", "scrypt", "kdf is 'scrypt'; this format uses 'pbkdf2-sha256'"),
    ("algorithm", "aes-128-gcm", "algorithm is 'aes-128-gcm'; this format uses 'aes-256-gcm'"),
])
def test_a_tampered_encryption_header_is_quarantined_at_once_not_blamed_on_the_key(
        tmp_path: Path, field: str, value: Any, reason: str) -> None:
    path = tmp_path / "idem.json"
    envelope = encrypted_store(path)
    envelope["encryption"][field] = value
    path.write_text(json.dumps(envelope))
    warnings: list[str] = []
    began = time.monotonic()
    store = FileIdempotencyStore(path, encryption="aes-256-gcm", environ=SECRET,
                                 warn=warnings.append)
    assert time.monotonic() - began < 2  # no key derivation with the tampered parameters
    assert len(warnings) == 1
    assert warnings[0].startswith(
        f"Idempotency store '{path}' is corrupt (its encryption header was altered: {reason})")
    assert run_once(store).replayed is False


def test_a_wrong_key_is_still_told_apart_and_keeps_the_file(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    encrypted_store(path)
    before = path.read_bytes()
    with pytest.raises(StoreStartupError) as caught:
        FileIdempotencyStore(path, encryption="aes-256-gcm",
                             environ={"LUMA_IDEMPOTENCY_KEY": "another-key"})
    assert caught.value.message == (
        f"Idempotency store '{path}' cannot be decrypted: LUMA_IDEMPOTENCY_KEY is not the key "
        "it was written with.")
    assert path.read_bytes() == before


def test_an_encrypted_envelope_with_a_duplicate_field_is_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    envelope = encrypted_store(path)
    text = json.dumps(envelope)
    path.write_text(text[:-1] + ', "nonce": "' + base64.b64encode(os.urandom(12)).decode()
                    + '"}')
    warnings: list[str] = []
    FileIdempotencyStore(path, encryption="aes-256-gcm", environ=SECRET, warn=warnings.append)
    assert len(warnings) == 1 and "is corrupt (duplicate key 'nonce')" in warnings[0]


def test_turning_encryption_on_encrypts_the_existing_records(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    plain = FileIdempotencyStore(path)
    run_once(plain, "r-1")
    run_once(plain, "r-2")
    warnings: list[str] = []
    store = FileIdempotencyStore(path, encryption="aes-256-gcm", environ=SECRET,
                                 warn=warnings.append)
    assert warnings == [
        f"Idempotency store '{path}' was not encrypted; its 2 records were encrypted with the "
        "key from LUMA_IDEMPOTENCY_KEY."]
    data = path.read_bytes()
    assert b"ROW-SECRET-7731" not in data and b"r-1" not in data
    assert set(json.loads(data)) == {"version", "encryption", "nonce", "ciphertext"}
    assert not [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    # Nothing runs again: the records were kept.
    assert replay(store, "r-1") == IdempotencyOutcome(ROW, replayed=True)
    reopened = FileIdempotencyStore(path, encryption="aes-256-gcm", environ=SECRET,
                                    warn=warnings.append)
    assert replay(reopened, "r-2") == IdempotencyOutcome(ROW, replayed=True)
    assert len(warnings) == 1
