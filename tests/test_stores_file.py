"""The file idempotency store in one process: format, quarantine, expiry, encryption, locks."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from luma.runtime.file_store import FileIdempotencyStore
from luma.runtime.stores import (
    IdempotencyOutcome,
    StoreError,
    StoreStartupError,
    input_fingerprint,
)

TTL = 300_000
SECRET = {"LUMA_IDEMPOTENCY_KEY": "a-long-and-secure-key"}
ROW = {"row_id": "ROW-SECRET-7731", "status": "written"}


def fp(value: str) -> str:
    return input_fingerprint({"request_id": "r-1", "value": value})


async def returns(value: Any) -> Any:
    return value


def run_once(store: FileIdempotencyStore, key: str, value: Any = ROW, input_value: str = "a",
             ttl_ms: int = TTL, **options: Any) -> IdempotencyOutcome:
    async def compute() -> Any:
        return value

    return asyncio.run(store.run_once("db_write", key, fp(input_value), ttl_ms, compute,
                                      **options))


def must_not_run() -> Any:
    async def compute() -> Any:
        raise AssertionError("the handler ran again")

    return compute


def replay(store: FileIdempotencyStore, key: str, input_value: str = "a") -> IdempotencyOutcome:
    return asyncio.run(store.run_once("db_write", key, fp(input_value), TTL, must_not_run()))


def test_records_persist_across_store_instances_in_a_versioned_envelope(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    first = FileIdempotencyStore(path)
    assert run_once(first, "r-1") == IdempotencyOutcome(ROW, replayed=False)
    assert replay(FileIdempotencyStore(path), "r-1") == IdempotencyOutcome(ROW, replayed=True)

    envelope = json.loads(path.read_text())
    assert envelope["version"] == 1 and set(envelope) == {"version", "records"}
    record = envelope["records"]["db_write"]["r-1"]
    assert record["fingerprint"] == fp("a") and record["result"] == ROW
    assert record["expires_at_ms"] - record["stored_at_ms"] == TTL
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    # No temporary file and no claim file is left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "idem.json", "idem.json.lock", "idem.json.locks"]
    assert list((tmp_path / "idem.json.locks").iterdir()) == []


def test_conflict_is_detected_by_another_instance(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    run_once(FileIdempotencyStore(path), "r-1")
    with pytest.raises(StoreError) as caught:
        run_once(FileIdempotencyStore(path), "r-1", input_value="b")
    assert caught.value.code == "TOOL_IDEMPOTENCY_CONFLICT"
    assert caught.value.message == (
        "Idempotency key 'r-1' of tool 'db_write' was already used with a different input.")


def test_a_corrupt_file_is_quarantined_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    path.write_text('{"version": 1, "records": {"db_write": {"r-1": ')
    warnings: list[str] = []
    store = FileIdempotencyStore(path, warn=warnings.append)

    quarantined = [p for p in tmp_path.iterdir() if p.name.startswith("idem.json.corrupt-")]
    assert len(quarantined) == 1
    assert re.fullmatch(r"idem\.json\.corrupt-\d{8}T\d{6}Z", quarantined[0].name)
    assert quarantined[0].read_text() == '{"version": 1, "records": {"db_write": {"r-1": '
    assert len(warnings) == 1
    assert warnings[0].startswith(f"Idempotency store '{path}' is corrupt (not valid JSON: ")
    assert warnings[0].endswith(
        f"); it was moved to '{quarantined[0]}' and a new store was started.")
    assert not path.exists()
    assert run_once(store, "r-1").replayed is False


@pytest.mark.parametrize("content, reason", [
    ('{"version": 1, "records": []}', "the records are not an object"),
    ('{"version": 1, "records": {}, "extra": 1}',
     "the envelope does not have the fields of a store"),
    ('{"version": 1, "records": {"db_write": {"r-1": {"result": 1}}}}',
     "the record of key 'r-1' of tool 'db_write' is malformed"),
    (b'{"version": 1, "records": {"db_write": \xff\xfe{}',
     "not UTF-8 text (byte 0xff at offset 39)"),
])
def test_a_store_of_the_wrong_shape_is_quarantined(tmp_path: Path, content: str | bytes,
                                                   reason: str) -> None:
    path = tmp_path / "idem.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    warnings: list[str] = []
    FileIdempotencyStore(path, warn=warnings.append)
    assert len(warnings) == 1 and f"is corrupt ({reason}" in warnings[0]
    assert not path.exists()


def test_two_quarantines_in_one_second_keep_both_files(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    warnings: list[str] = []
    for text in ('{"version": 1, garbage one', '{"version": 1, garbage two'):
        path.write_text(text)
        FileIdempotencyStore(path, warn=warnings.append)
    kept = sorted(p.read_text() for p in tmp_path.iterdir() if ".corrupt-" in p.name)
    assert kept == ['{"version": 1, garbage one', '{"version": 1, garbage two']
    assert len(warnings) == 2


def test_corruption_found_during_a_call_is_quarantined_too(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    warnings: list[str] = []
    store = FileIdempotencyStore(path, warn=warnings.append)
    run_once(store, "r-1")
    path.write_text('{"version": 1, "records": }')
    assert run_once(store, "r-1", value={"again": True}) == IdempotencyOutcome(
        {"again": True}, replayed=False)
    assert len(warnings) == 1 and "is corrupt (not valid JSON" in warnings[0]
    assert replay(store, "r-1").value == {"again": True}


def test_a_newer_format_version_refuses_to_start_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    path.write_text('{"version": 2, "records": {}}')
    with pytest.raises(StoreStartupError) as caught:
        FileIdempotencyStore(path)
    assert caught.value.message == (
        f"Idempotency store '{path}' has format version 2; this version of Luma reads "
        "version 1.")
    assert caught.value.code == "IDEMPOTENCY_STORE_UNAVAILABLE"
    assert path.read_text() == '{"version": 2, "records": {}}'


def test_expired_records_are_dropped_at_startup(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    now = [1_000_000.0]
    store = FileIdempotencyStore(path, clock=lambda: now[0])
    run_once(store, "short", ttl_ms=1_000)
    run_once(store, "long", ttl_ms=60_000)
    assert set(json.loads(path.read_text())["records"]["db_write"]) == {"short", "long"}

    now[0] += 2
    FileIdempotencyStore(path, clock=lambda: now[0])
    assert set(json.loads(path.read_text())["records"]["db_write"]) == {"long"}

    now[0] += 60
    FileIdempotencyStore(path, clock=lambda: now[0])
    assert json.loads(path.read_text()) == {"version": 1, "records": {}}


def test_an_expired_record_is_not_replayed_while_running(tmp_path: Path) -> None:
    now = [1_000_000.0]
    store = FileIdempotencyStore(tmp_path / "idem.json", clock=lambda: now[0])
    run_once(store, "r-1", ttl_ms=1_000)
    now[0] += 1
    assert run_once(store, "r-1", value={"fresh": 1}, input_value="b") == IdempotencyOutcome(
        {"fresh": 1}, replayed=False)


def test_a_tampered_result_fails_revalidation_and_the_tool_runs_again(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    run_once(FileIdempotencyStore(path), "r-1")
    envelope = json.loads(path.read_text())
    envelope["records"]["db_write"]["r-1"]["result"] = {"row_id": 7}
    path.write_text(json.dumps(envelope))

    def revalidate(value: Any) -> None:
        if not isinstance(value.get("row_id"), str):
            raise ValueError("db_write.output.row_id: 7 is not of type 'string'")

    warnings: list[str] = []
    store = FileIdempotencyStore(path, warn=warnings.append)
    assert run_once(store, "r-1", revalidate=revalidate) == IdempotencyOutcome(
        ROW, replayed=False)
    assert warnings == [
        "The stored result for idempotency key 'r-1' of tool 'db_write' is no longer valid "
        "(db_write.output.row_id: 7 is not of type 'string'); the tool runs again."]
    assert json.loads(path.read_text())["records"]["db_write"]["r-1"]["result"] == ROW


def test_leftover_temporary_and_claim_files_are_removed_at_startup(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    FileIdempotencyStore(path)
    (tmp_path / "idem.json.tmp-99999-deadbeef").write_text("half a write")
    (tmp_path / "idem.json.locks").mkdir(exist_ok=True)
    (tmp_path / "idem.json.locks" / "abc.lock").write_text("")
    FileIdempotencyStore(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idem.json.lock", "idem.json.locks"]
    assert list((tmp_path / "idem.json.locks").iterdir()) == []


def test_a_missing_directory_is_created(tmp_path: Path) -> None:
    store = FileIdempotencyStore(tmp_path / "state" / "luma" / "idem.json")
    run_once(store, "r-1")
    assert (tmp_path / "state" / "luma" / "idem.json").is_file()


def test_a_path_that_cannot_be_used_refuses_to_start(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreStartupError) as caught:
        FileIdempotencyStore(blocker / "idem.json")
    assert caught.value.message.startswith(
        f"Idempotency store '{blocker / 'idem.json'}' cannot be opened: ")


def test_tasks_and_threads_of_one_process_share_the_claim(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    runs: list[int] = []
    lock = threading.Lock()

    async def compute() -> Any:
        with lock:
            runs.append(1)
        await asyncio.sleep(0.02)
        return ROW

    async def calls(store: FileIdempotencyStore) -> list[IdempotencyOutcome]:
        return await asyncio.gather(*(
            store.run_once("db_write", "r-1", fp("a"), TTL, compute) for _ in range(5)))

    outcomes: list[IdempotencyOutcome] = []

    def thread_main() -> None:
        # Each thread has its own store instance: only the file locks connect them.
        outcomes.extend(asyncio.run(calls(FileIdempotencyStore(path))))

    threads = [threading.Thread(target=thread_main) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert len(runs) == 1
    assert len(outcomes) == 20 and [o.replayed for o in outcomes].count(False) == 1


# -- encryption -------------------------------------------------------------------------------

def test_encrypted_round_trip_leaves_no_plaintext_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    store = FileIdempotencyStore(path, encryption="aes-256-gcm", environ=SECRET)
    run_once(store, "REQ-KEY-4242")
    first_bytes = path.read_bytes()
    run_once(store, "REQ-KEY-4243")

    reopened = FileIdempotencyStore(path, encryption="aes-256-gcm", environ=SECRET)
    assert replay(reopened, "REQ-KEY-4242") == IdempotencyOutcome(ROW, replayed=True)
    assert replay(reopened, "REQ-KEY-4243") == IdempotencyOutcome(ROW, replayed=True)

    data = path.read_bytes()
    for clear in (b"ROW-SECRET-7731", b"REQ-KEY-4242", b"db_write", b"written",
                  fp("a").encode(), fp("a")[7:].encode(), b"a-long-and-secure-key",
                  b"fingerprint", b"expires_at_ms"):
        assert clear not in data and clear not in first_bytes
    envelope = json.loads(data)
    assert set(envelope) == {"version", "encryption", "nonce", "ciphertext"}
    assert envelope["encryption"]["algorithm"] == "aes-256-gcm"
    assert envelope["encryption"]["kdf"] == "pbkdf2-sha256"
    assert envelope["encryption"]["iterations"] == 600_000
    first = json.loads(first_bytes)
    assert first["nonce"] != envelope["nonce"]
    assert first["encryption"]["salt"] == envelope["encryption"]["salt"]


def test_a_missing_key_refuses_to_start(tmp_path: Path) -> None:
    for environ in ({}, {"LUMA_IDEMPOTENCY_KEY": ""}):
        with pytest.raises(StoreStartupError) as caught:
            FileIdempotencyStore(tmp_path / "idem.json", encryption="aes-256-gcm",
                                 environ=environ)
        assert caught.value.message == (
            'idempotency_store.encryption is "aes-256-gcm" but LUMA_IDEMPOTENCY_KEY is not set.')
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_encryption_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(StoreStartupError) as caught:
        FileIdempotencyStore(tmp_path / "idem.json", encryption="rot13", environ=SECRET)
    assert caught.value.message == (
        'idempotency_store.encryption must be "aes-256-gcm", not "rot13".')


def test_a_wrong_key_refuses_to_start_and_keeps_the_file(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    run_once(FileIdempotencyStore(path, encryption="aes-256-gcm", environ=SECRET), "r-1")
    before = path.read_bytes()
    with pytest.raises(StoreStartupError) as caught:
        FileIdempotencyStore(path, encryption="aes-256-gcm",
                             environ={"LUMA_IDEMPOTENCY_KEY": "a-long-and-secure-kee"})
    assert caught.value.message == (
        f"Idempotency store '{path}' cannot be decrypted: LUMA_IDEMPOTENCY_KEY is not the key "
        "it was written with.")
    assert path.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]


def test_an_encrypted_file_without_encryption_configured_refuses_to_start(
        tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    run_once(FileIdempotencyStore(path, encryption="aes-256-gcm", environ=SECRET), "r-1")
    with pytest.raises(StoreStartupError) as caught:
        FileIdempotencyStore(path)
    assert caught.value.message == (
        f"Idempotency store '{path}' is encrypted but idempotency_store.encryption is not set.")


def test_a_tampered_ciphertext_is_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    run_once(FileIdempotencyStore(path, encryption="aes-256-gcm", environ=SECRET), "r-1")
    envelope = json.loads(path.read_text())
    ciphertext = bytearray(base64.b64decode(envelope["ciphertext"]))
    ciphertext[3] ^= 0x01
    envelope["ciphertext"] = base64.b64encode(bytes(ciphertext)).decode()
    path.write_text(json.dumps(envelope))

    warnings: list[str] = []
    store = FileIdempotencyStore(path, encryption="aes-256-gcm", environ=SECRET,
                                 warn=warnings.append)
    assert len(warnings) == 1 and "is corrupt (its ciphertext fails authentication)" in warnings[0]
    assert run_once(store, "r-1").replayed is False


def test_a_changed_encryption_header_fails_authentication(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    run_once(FileIdempotencyStore(path, encryption="aes-256-gcm", environ=SECRET), "r-1")
    envelope = json.loads(path.read_text())
    envelope["version"] = 1
    envelope["encryption"]["algorithm"] = "aes-256-gcm"
    envelope["nonce"] = base64.b64encode(os.urandom(12)).decode()
    path.write_text(json.dumps(envelope))
    warnings: list[str] = []
    FileIdempotencyStore(path, encryption="aes-256-gcm", environ=SECRET, warn=warnings.append)
    assert len(warnings) == 1 and "its ciphertext fails authentication" in warnings[0]


def test_a_store_that_cannot_be_read_during_a_call_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    store = FileIdempotencyStore(path)
    path.mkdir()
    with pytest.raises(StoreError) as caught:
        run_once(store, "r-1")
    assert caught.value.code == "TOOL_IDEMPOTENCY_STORE_FAILED"
    assert caught.value.message == (
        f"Idempotency store '{path}' is a directory, not a regular file; it was left untouched. "
        "Point idempotency_store.path at a file Luma may create.")
    path.rmdir()
    path.write_text('{"version": 3, "records": {}}')
    with pytest.raises(StoreError) as caught:
        run_once(store, "r-1")
    assert caught.value.code == "TOOL_IDEMPOTENCY_STORE_FAILED"
    assert caught.value.message == (
        f"Idempotency store '{path}' has format version 3; this version of Luma reads "
        "version 1.")


def test_a_call_cancelled_while_writing_finishes_the_write_first(tmp_path: Path) -> None:
    path = tmp_path / "idem.json"
    store = FileIdempotencyStore(path)

    async def compute() -> Any:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # lands on the first await after compute: the write
        return ROW

    async def scenario() -> None:
        task = asyncio.create_task(store.run_once("db_write", "r-1", fp("a"), TTL, compute))
        with pytest.raises(asyncio.CancelledError):
            await task
        # The record is on disk by the time the cancellation surfaces.
        assert json.loads(path.read_text())["records"]["db_write"]["r-1"]["result"] == ROW

    asyncio.run(scenario())
    assert replay(store, "r-1") == IdempotencyOutcome(ROW, replayed=True)
