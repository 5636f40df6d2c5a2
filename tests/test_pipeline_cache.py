"""The cache with single-flight (step 8) and idempotency (step 9) of the tool pipeline."""

from __future__ import annotations

import asyncio
import json
import time

from luma.runtime.errors import LumaToolError
from luma.runtime.stores import MemoryIdempotencyStore
from runtime.harness import call, call_error, context, last_event, program, runtime, tool_events

CACHED = """
schema CalcResult { result: float }
tool calculate(a: float, b: float, operation: enum["add", "multiply"] @default("add")) -> CalcResult {
  side_effects: "none"
  cache: true
}
tool uncached(a: float) -> CalcResult {}
"""


def counting(delay: float = 0.0, fail_first: int = 0):
    calls: list[dict] = []

    async def calculate(input):
        calls.append(input)
        if delay:
            await asyncio.sleep(delay)
        if len(calls) <= fail_first:
            raise LumaToolError(code="BUSY", message="busy")
        return {"result": input["a"] + input["b"]}

    return calculate, calls


# cache ------------------------------------------------------------------------------------------


def test_second_identical_call_is_a_hit():
    handler, calls = counting()
    rt = runtime(program(CACHED), {"calculate": handler})
    assert call(rt, "calculate", {"a": 1, "b": 2}) == {"result": 3}
    assert call(rt, "calculate", {"b": 2, "a": 1, "operation": "add"}) == {"result": 3}
    assert len(calls) == 1
    first, second = tool_events(rt)
    assert (first["cache"], first["attempts"]) == ("miss", 1)
    assert (second["cache"], second["attempts"], second["single_flight"]) == ("hit", 0, False)


def test_the_key_is_the_validated_input():
    handler, calls = counting()
    rt = runtime(program(CACHED), {"calculate": handler})
    call(rt, "calculate", {"a": 1, "b": 2})
    call(rt, "calculate", {"a": 1.0, "b": 2, "operation": "add"})  # same JSON value
    call(rt, "calculate", {"a": 1, "b": 3})
    assert len(calls) == 2


def test_a_hit_is_a_copy():
    handler, _ = counting()
    rt = runtime(program(CACHED), {"calculate": handler})
    first = call(rt, "calculate", {"a": 1, "b": 2})
    first["result"] = 99
    assert call(rt, "calculate", {"a": 1, "b": 2}) == {"result": 3}


def test_errors_are_not_cached():
    handler, calls = counting(fail_first=1)
    rt = runtime(program(CACHED), {"calculate": handler})
    assert call_error(rt, "calculate", {"a": 1, "b": 2}).code == "BUSY"
    assert call(rt, "calculate", {"a": 1, "b": 2}) == {"result": 3}
    assert len(calls) == 2


def test_uncached_tool_reports_cache_off():
    rt = runtime(program(CACHED), {"uncached": lambda input: {"result": 1}})
    call(rt, "uncached", {"a": 1})
    call(rt, "uncached", {"a": 1})
    assert [e["cache"] for e in tool_events(rt)] == ["off", "off"]


def test_concurrent_identical_calls_share_one_execution():
    handler, calls = counting(delay=0.05)
    rt = runtime(program(CACHED), {"calculate": handler})

    async def scenario():
        ctx = context(rt)
        return await asyncio.gather(*[rt.pipeline.call("calculate", {"a": 1, "b": 2}, ctx)
                                      for _ in range(5)])

    results = asyncio.run(scenario())
    assert results == [{"result": 3}] * 5
    assert len(calls) == 1
    events = tool_events(rt)
    assert [e["single_flight"] for e in events].count(True) == 4
    leader = next(e for e in events if not e["single_flight"])
    assert (leader["cache"], leader["attempts"]) == ("miss", 1)
    assert all(e["attempts"] == 0 for e in events if e["single_flight"])


def test_sharers_of_a_failed_execution_get_the_error_and_nothing_is_cached():
    handler, calls = counting(delay=0.05, fail_first=1)
    rt = runtime(program(CACHED), {"calculate": handler})

    async def scenario():
        ctx = context(rt)
        return await asyncio.gather(*[rt.pipeline.call("calculate", {"a": 1, "b": 2}, ctx)
                                      for _ in range(3)], return_exceptions=True)

    errors = asyncio.run(scenario())
    assert [e.code for e in errors] == ["BUSY"] * 3
    assert len({id(e) for e in errors}) == 3  # each call raises its own instance
    assert call(rt, "calculate", {"a": 1, "b": 2}) == {"result": 3}
    assert len(calls) == 2


def test_cancelling_one_sharer_does_not_cancel_the_execution():
    handler, calls = counting(delay=0.1)
    rt = runtime(program(CACHED), {"calculate": handler})

    async def scenario():
        ctx = context(rt)
        leader = asyncio.ensure_future(rt.pipeline.call("calculate", {"a": 1, "b": 2}, ctx))
        sharer = asyncio.ensure_future(rt.pipeline.call("calculate", {"a": 1, "b": 2}, ctx))
        await asyncio.sleep(0.02)
        leader.cancel()
        return await sharer

    assert asyncio.run(scenario()) == {"result": 3}
    assert len(calls) == 1
    assert call(rt, "calculate", {"a": 1, "b": 2}) == {"result": 3}
    assert len(calls) == 1  # the shared execution's result was cached


# idempotency ------------------------------------------------------------------------------------

IDEMPOTENT = """
schema DbResult { id: string, value: string }
tool db_write(request_id: string, value: string) -> DbResult {
  side_effects: "write"
  idempotent: true
  idempotency_key: request_id
  idempotency_ttl_ms: 200
}
tool nested_write(request: Request, value: string) -> DbResult {
  side_effects: "write"
  idempotent: true
  idempotency_key: input.request.id
}
tool optional_key(request_id?: string, value: string) -> DbResult {
  side_effects: "write"
  idempotent: true
  idempotency_key: request_id
}
schema Request { id: string }
"""


def writer():
    calls: list[dict] = []

    def write(input):
        calls.append(input)
        return {"id": str(len(calls)), "value": input["value"]}

    return write, calls


def idempotent_runtime(**kwargs):
    handler, calls = writer()
    rt = runtime(program(IDEMPOTENT), {"db_write": handler, "nested_write": handler,
                                      "optional_key": handler}, **kwargs)
    return rt, calls


def test_same_key_same_input_replays():
    rt, calls = idempotent_runtime()
    first = call(rt, "db_write", {"request_id": "r-1", "value": "v"})
    second = call(rt, "db_write", {"request_id": "r-1", "value": "v"})
    assert first == second == {"id": "1", "value": "v"}
    assert len(calls) == 1
    replay = last_event(rt)
    assert (replay["idempotent_replay"], replay["attempts"], replay["outcome"]) == (True, 0, "ok")
    assert tool_events(rt)[0]["idempotent_replay"] is False


def test_same_key_different_input_conflicts():
    rt, calls = idempotent_runtime()
    call(rt, "db_write", {"request_id": "r-1", "value": "v"})
    err = call_error(rt, "db_write", {"request_id": "r-1", "value": "other"})
    assert (err.code, err.message, err.retryable, err.tool) == (
        "TOOL_IDEMPOTENCY_CONFLICT",
        "Idempotency key 'r-1' of tool 'db_write' was already used with a different input.",
        False, "db_write")
    assert len(calls) == 1


def test_records_expire_after_the_ttl():
    rt, calls = idempotent_runtime()
    call(rt, "db_write", {"request_id": "r-1", "value": "v"})
    time.sleep(0.25)
    assert call(rt, "db_write", {"request_id": "r-1", "value": "other"}) == {"id": "2",
                                                                             "value": "other"}
    assert len(calls) == 2


def test_key_path_with_input_prefix_and_nesting():
    rt, calls = idempotent_runtime()
    call(rt, "nested_write", {"request": {"id": "n-1"}, "value": "v"})
    call(rt, "nested_write", {"request": {"id": "n-1"}, "value": "v"})
    assert len(calls) == 1
    assert call_error(rt, "nested_write", {"request": {"id": "n-1"}, "value": "w"}).code == \
        "TOOL_IDEMPOTENCY_CONFLICT"


def test_keys_are_per_tool():
    rt, calls = idempotent_runtime()
    call(rt, "db_write", {"request_id": "k", "value": "v"})
    call(rt, "optional_key", {"request_id": "k", "value": "w"})
    assert len(calls) == 2


def test_absent_key_runs_without_idempotency():
    rt, calls = idempotent_runtime()
    call(rt, "optional_key", {"value": "v"})
    call(rt, "optional_key", {"value": "v"})
    assert len(calls) == 2


def test_a_failed_call_stores_nothing():
    attempts = []

    def db_write(input):
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("disk full")
        return {"id": "ok", "value": input["value"]}

    rt = runtime(program(IDEMPOTENT), {"db_write": db_write})
    assert call_error(rt, "db_write", {"request_id": "r", "value": "v"}).code == "TOOL_FAILED"
    assert call(rt, "db_write", {"request_id": "r", "value": "v"}) == {"id": "ok", "value": "v"}


def test_invalid_output_is_not_stored():
    outputs = [{"id": 1}, {"id": "2", "value": "v"}]
    rt = runtime(program(IDEMPOTENT), {"db_write": lambda input: outputs.pop(0)})
    assert call_error(rt, "db_write", {"request_id": "r", "value": "v"}).code == \
        "TOOL_OUTPUT_INVALID"
    assert call(rt, "db_write", {"request_id": "r", "value": "v"}) == {"id": "2", "value": "v"}


def test_concurrent_calls_with_one_key_run_the_handler_once():
    calls = []

    async def db_write(input):
        calls.append(1)
        await asyncio.sleep(0.05)
        return {"id": "x", "value": input["value"]}

    rt = runtime(program(IDEMPOTENT), {"db_write": db_write})

    async def scenario():
        ctx = context(rt)
        return await asyncio.gather(*[
            rt.pipeline.call("db_write", {"request_id": "r", "value": "v"}, ctx)
            for _ in range(4)])

    assert asyncio.run(scenario()) == [{"id": "x", "value": "v"}] * 4
    assert len(calls) == 1
    assert sorted(e["idempotent_replay"] for e in tool_events(rt)) == [False] + [True] * 3


def test_memory_store_is_the_default():
    rt, _ = idempotent_runtime()
    assert isinstance(rt.pipeline.idempotency_store, MemoryIdempotencyStore)


def test_file_store_from_the_config_replays_across_runtimes(tmp_path):
    config = {"idempotency_store": {"backend": "file", "path": "ids.json"}}
    rt, calls = idempotent_runtime(config=config, base_dir=str(tmp_path))
    call(rt, "db_write", {"request_id": "r-9", "value": "v"})
    again, calls_again = idempotent_runtime(config=config, base_dir=str(tmp_path))
    assert call(again, "db_write", {"request_id": "r-9", "value": "v"}) == {"id": "1",
                                                                            "value": "v"}
    assert calls_again == [] and last_event(again)["idempotent_replay"] is True
    assert (tmp_path / "ids.json").is_file()


def test_a_tampered_stored_result_is_validated_again(tmp_path):
    config = {"idempotency_store": {"backend": "file", "path": "ids.json"}}
    rt, _ = idempotent_runtime(config=config, base_dir=str(tmp_path))
    call(rt, "db_write", {"request_id": "r-9", "value": "v"})
    path = tmp_path / "ids.json"
    data = json.loads(path.read_text())
    record = data["records"]["db_write"]["r-9"]
    if isinstance(record["result"], str):
        record["result"] = json.dumps({"id": 666})
    else:
        record["result"] = {"id": 666}
    path.write_text(json.dumps(data))
    again, calls = idempotent_runtime(config=config, base_dir=str(tmp_path))
    assert call(again, "db_write", {"request_id": "r-9", "value": "v"}) == {"id": "1",
                                                                            "value": "v"}
    assert len(calls) == 1  # the bad record was not replayed: the tool ran again
    assert "warning[IDEMPOTENCY_STORE]" in again.stderr.getvalue()
    assert "db_write.output" in again.stderr.getvalue()


def test_store_that_cannot_open_stops_the_runtime(tmp_path):
    import pytest

    from luma.runtime.errors import LumaError

    config = {"idempotency_store": {"backend": "file", "path": "ids.json",
                                    "encryption": "aes-256-gcm"}}
    with pytest.raises(LumaError) as caught:
        idempotent_runtime(config=config, base_dir=str(tmp_path))
    assert caught.value.code == "IDEMPOTENCY_STORE_UNAVAILABLE"
    assert "LUMA_IDEMPOTENCY_KEY" in caught.value.message


def test_retries_of_an_idempotent_write_happen_inside_one_claim():
    attempts = []

    def db_write(input):
        attempts.append(1)
        if len(attempts) < 3:
            raise LumaToolError(code="DB_TIMEOUT", message="timed out", retryable=True)
        return {"id": "x", "value": input["value"]}

    prog = program("""
schema DbResult { id: string, value: string }
tool db_write(request_id: string, value: string) -> DbResult {
  side_effects: "write"
  idempotent: true
  idempotency_key: request_id
  retries: 3
}
""")
    rt = runtime(prog, {"db_write": db_write})
    assert call(rt, "db_write", {"request_id": "r", "value": "v"}) == {"id": "x", "value": "v"}
    assert call(rt, "db_write", {"request_id": "r", "value": "v"}) == {"id": "x", "value": "v"}
    assert len(attempts) == 3
    assert [e["attempts"] for e in tool_events(rt)] == [3, 0]
