"""Retries with each backoff, timeouts for async and sync handlers (the Signal, the discarded
late result) and the circuit breaker (RUNTIME.md §3 steps 10 and 12)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from luma.runtime.errors import LumaError, LumaToolError
from luma.runtime.interpreter import Interpreter, MethodCall
from runtime.harness import call, call_error, context, last_event, program, runtime, tool_events

SCHEMAS = """
schema HttpResult { status: int }
schema ToolError {
  code: string
  message: string
  retryable: bool
  details?: any
}
"""


def flaky(failures: int, *, retryable: bool = True):
    """A handler that fails ``failures`` times, then answers; it records when it was called."""
    times: list[float] = []

    def http_get(input):
        times.append(time.monotonic())
        if len(times) <= failures:
            raise LumaToolError(code="HTTP_503", message="Service unavailable",
                                retryable=retryable)
        return {"status": 200}

    return http_get, times


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


def retry_program(backoff: str, retries: int = 3, delay: int = 100) -> str:
    return SCHEMAS + f"""
tool http_get(url: string) -> HttpResult {{
  error: ToolError
  retries: {retries}
  retry_backoff: "{backoff}"
  retry_delay: {delay}
}}
"""


# retries ------------------------------------------------------------------------------------


def test_no_backoff_retries_at_once():
    handler, times = flaky(3)
    rt = runtime(program(retry_program("none", delay=500)), {"http_get": handler})
    assert call(rt, "http_get", {"url": "u"}) == {"status": 200}
    assert len(times) == 4 and all(g < 0.1 for g in gaps(times))
    assert last_event(rt)["attempts"] == 4


def test_fixed_backoff_waits_the_same_each_time():
    handler, times = flaky(3)
    rt = runtime(program(retry_program("fixed", delay=60)), {"http_get": handler})
    assert call(rt, "http_get", {"url": "u"}) == {"status": 200}
    waits = gaps(times)
    assert len(waits) == 3
    assert all(0.055 <= w < 0.3 for w in waits), waits


def test_exponential_backoff_doubles():
    handler, times = flaky(3)
    rt = runtime(program(retry_program("exponential", delay=40)), {"http_get": handler})
    assert call(rt, "http_get", {"url": "u"}) == {"status": 200}
    first, second, third = gaps(times)
    assert 0.035 <= first < 0.2 and 0.075 <= second < 0.3 and 0.155 <= third < 0.5
    assert second > first * 1.5 and third > second * 1.5


def test_retries_run_out_and_the_last_error_surfaces():
    handler, times = flaky(10)
    rt = runtime(program(retry_program("none", retries=2)), {"http_get": handler})
    err = call_error(rt, "http_get", {"url": "u"})
    assert (err.code, err.message, err.retryable) == ("HTTP_503", "Service unavailable", True)
    assert len(times) == 3 and last_event(rt)["attempts"] == 3


def test_a_non_retryable_error_is_not_retried():
    handler, times = flaky(1, retryable=False)
    rt = runtime(program(retry_program("none")), {"http_get": handler})
    assert call_error(rt, "http_get", {"url": "u"}).code == "HTTP_503"
    assert len(times) == 1


def test_a_plain_exception_is_not_retried():
    calls = []

    def http_get(input):
        calls.append(1)
        raise ConnectionError("refused")

    rt = runtime(program(retry_program("none")), {"http_get": http_get})
    err = call_error(rt, "http_get", {"url": "u"})
    assert (err.code, err.message) == ("TOOL_FAILED", "Tool 'http_get' failed: refused")
    assert len(calls) == 1


# timeouts -----------------------------------------------------------------------------------


def timeout_program(tool_timeout: str = "timeout: 50", agent: str = "") -> str:
    return SCHEMAS + f"""
tool http_get(url: string) -> HttpResult {{
  error: ToolError
  {tool_timeout}
}}
{agent}
"""


def test_async_handler_is_cancelled_on_timeout():
    seen: dict[str, object] = {}

    async def http_get(input, signal):
        seen["signal"] = signal
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            seen["cancelled_with_signal"] = signal.aborted
            raise
        return {"status": 200}

    rt = runtime(program(timeout_program()), {"http_get": http_get})
    started = time.monotonic()
    err = call_error(rt, "http_get", {"url": "u"})
    assert time.monotonic() - started < 1
    assert (err.code, err.message, err.retryable) == (
        "TOOL_TIMEOUT", "Tool 'http_get' timed out after 50 ms.", True)
    signal = seen["signal"]
    assert signal.aborted and signal.reason == "timeout"  # type: ignore[attr-defined]
    assert seen["cancelled_with_signal"] is True
    assert last_event(rt)["outcome"] == "TOOL_TIMEOUT"


def test_sync_handler_timeout_returns_at_once_and_discards_the_late_result():
    prog = program(SCHEMAS + """
tool slow(url: string) -> HttpResult {
  timeout: 50
  cache: true
}
""")
    finished = threading.Event()
    runs: list[str] = []

    reasons: list[object] = []

    def slow(input, signal):
        runs.append(threading.current_thread().name)
        signal.wait(2)  # the Signal fires on timeout: the handler may watch it
        reasons.append(signal.reason)
        time.sleep(0.1)
        finished.set()
        return {"status": 200}

    rt = runtime(prog, {"slow": slow})
    started = time.monotonic()
    err = call_error(rt, "slow", {"url": "u"})
    assert time.monotonic() - started < 1.5  # not the handler's 2 s
    assert err.message == "Tool 'slow' timed out after 50 ms."
    assert runs == ["luma-tool-slow"]  # it ran in a worker thread
    assert finished.wait(2)
    assert reasons == ["timeout"]
    time.sleep(0.05)
    assert len(rt.pipeline.cache) == 0  # the late result was never cached
    assert call_error(rt, "slow", {"url": "u"}).code == "TOOL_TIMEOUT"
    assert len(runs) == 2


def test_sync_handler_without_timeout_runs_inline():
    threads = []

    def http_get(input):
        threads.append(threading.current_thread())
        return {"status": 200}

    rt = runtime(program(SCHEMAS + "tool http_get(url: string) -> HttpResult {}"),
                 {"http_get": http_get})
    call(rt, "http_get", {"url": "u"})
    assert threads == [threading.main_thread()]


def test_sync_handler_within_its_timeout_returns_its_result():
    def http_get(input):
        time.sleep(0.01)
        return {"status": 201}

    rt = runtime(program(timeout_program("timeout: 2000")), {"http_get": http_get})
    assert call(rt, "http_get", {"url": "u"}) == {"status": 201}


def test_sync_handler_error_in_its_thread():
    def http_get(input):
        raise LumaToolError(code="E", message="from the thread")

    rt = runtime(program(timeout_program("timeout: 2000")), {"http_get": http_get})
    err = call_error(rt, "http_get", {"url": "u"})
    assert (err.code, err.message) == ("E", "from the thread")


def test_timeout_is_retried():
    attempts = []

    async def http_get(input):
        attempts.append(1)
        if len(attempts) < 3:
            await asyncio.sleep(1)
        return {"status": 200}

    prog = program(SCHEMAS + """
tool http_get(url: string) -> HttpResult {
  timeout: 30
  retries: 2
}
""")
    rt = runtime(prog, {"http_get": http_get})
    assert call(rt, "http_get", {"url": "u"}) == {"status": 200}
    assert last_event(rt)["attempts"] == 3


@pytest.mark.parametrize("tool_timeout, agent_keys, expected_ms", [
    ("", "tool_timeout: 40", 40),
    ("timeout: 40", "tool_timeout: 5000", 40),
    ("timeout: 5000", "tool_timeout_max: 40", 40),
    ("", "tool_timeout: 5000, tool_timeout_max: 40", 40),
    ("", "tool_timeout_max: 40", 40),
])
def test_effective_timeout(tool_timeout, agent_keys, expected_ms):
    async def http_get(input):
        await asyncio.sleep(2)
        return {"status": 200}

    prog = program(timeout_program(tool_timeout, f"agent A {{ tools: [http_get], {agent_keys} }}"))
    rt = runtime(prog, {"http_get": http_get})
    err = call_error(rt, "http_get", {"url": "u"}, context(rt, "A"))
    assert err.message == f"Tool 'http_get' timed out after {expected_ms} ms."


def test_no_timeout_anywhere_means_no_timeout():
    async def http_get(input):
        await asyncio.sleep(0.15)
        return {"status": 200}

    prog = program(timeout_program("", "agent A { tools: [http_get] }"))
    rt = runtime(prog, {"http_get": http_get})
    assert call(rt, "http_get", {"url": "u"}, context(rt, "A")) == {"status": 200}


def test_cancelling_the_call_fires_the_signal_with_cancelled():
    signals = []

    async def http_get(input, signal):
        signals.append(signal)
        await asyncio.sleep(5)

    rt = runtime(program(timeout_program("timeout: 3000")), {"http_get": http_get})

    async def scenario():
        task = asyncio.ensure_future(rt.pipeline.call("http_get", {"url": "u"}, context(rt)))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert signals[0].aborted and signals[0].reason == "cancelled"
    assert last_event(rt)["outcome"] == "cancelled"


# circuit breaker ------------------------------------------------------------------------------

RESILIENT = SCHEMAS + """
tool http_get(url: string) -> HttpResult { error: ToolError }
tool other(url: string) -> HttpResult {}
agent Resilient {
  tools: [http_get, other]
  tool_failure_limit: 3
}
"""


def test_circuit_opens_at_the_limit_and_stays_open():
    handler, times = flaky(100, retryable=True)
    rt = runtime(program(RESILIENT), {"http_get": handler, "other": lambda input: {"status": 1}})
    ctx = context(rt, "Resilient")
    assert call_error(rt, "http_get", {"url": "u"}, ctx).code == "HTTP_503"
    assert call_error(rt, "http_get", {"url": "u"}, ctx).code == "HTTP_503"
    err = call_error(rt, "http_get", {"url": "u"}, ctx)
    assert (err.code, err.message, err.retryable) == (
        "TOOL_CIRCUIT_OPEN", "Tool 'http_get' failed 3 times in agent 'Resilient'; the circuit "
        "is open.", False)
    assert err.details == {"code": "HTTP_503", "message": "Service unavailable"}
    assert len(times) == 3
    # every later call in this method call fails the same way, without running
    later = call_error(rt, "other", {"url": "u"}, ctx)
    assert (later.code, later.message) == (err.code, err.message)
    assert len(times) == 3 and last_event(rt)["attempts"] == 0
    # a new method call starts with a closed circuit
    assert call(rt, "other", {"url": "u"}, context(rt, "Resilient")) == {"status": 1}


def test_input_and_output_failures_count_too():
    rt = runtime(program(RESILIENT), {"http_get": lambda input: {"status": "x"},
                                      "other": lambda input: {"status": 1}})
    ctx = context(rt, "Resilient")
    assert call_error(rt, "other", {"nope": 1}, ctx).code == "TOOL_INPUT_INVALID"
    assert call_error(rt, "http_get", {"url": "u"}, ctx).code == "TOOL_OUTPUT_INVALID"
    assert ctx.method.failures == 2
    assert call_error(rt, "other", {}, ctx).code == "TOOL_CIRCUIT_OPEN"


def test_successes_do_not_reset_the_count():
    handler, _ = flaky(100)
    rt = runtime(program(RESILIENT), {"http_get": handler, "other": lambda input: {"status": 1}})
    ctx = context(rt, "Resilient")
    call_error(rt, "http_get", {"url": "u"}, ctx)
    call(rt, "other", {"url": "u"}, ctx)
    call_error(rt, "http_get", {"url": "u"}, ctx)
    assert call_error(rt, "http_get", {"url": "u"}, ctx).code == "TOOL_CIRCUIT_OPEN"


def test_no_limit_means_no_circuit():
    handler, times = flaky(100)
    prog = program(SCHEMAS + """
tool http_get(url: string) -> HttpResult {}
agent A { tools: [http_get] }
""")
    rt = runtime(prog, {"http_get": handler})
    ctx = context(rt, "A")
    for _ in range(5):
        assert call_error(rt, "http_get", {"url": "u"}, ctx).code == "HTTP_503"
    assert ctx.method.failures == 5


def test_circuit_in_a_running_program_is_per_method_call():
    attempts = []

    def http_get(input):
        attempts.append(input["url"])
        raise LumaToolError(code="DOWN", message="down")

    prog = program(SCHEMAS + """
tool http_get(url: string) -> HttpResult {}
agent Resilient {
  tools: [http_get]
  tool_failure_limit: 2

  fn run() {
    codes = []
    for url in ["a", "b", "c"] {
      try { tool http_get({ url: url }) } catch err { codes = codes + [err.code] }
    }
    codes + [again()]
  }

  fn again() {
    try { tool http_get({ url: "d" }) } catch err { return err.code }
  }
}
""")
    rt = runtime(prog, {"http_get": http_get})
    result = asyncio.run(Interpreter(rt).call_method("Resilient", "run", {}))
    assert result == ["DOWN", "TOOL_CIRCUIT_OPEN", "TOOL_CIRCUIT_OPEN", "DOWN"]
    assert attempts == ["a", "b", "d"]


def test_circuit_error_is_a_fresh_error_each_time():
    handler, _ = flaky(100)
    rt = runtime(program(RESILIENT), {"http_get": handler, "other": lambda input: {"status": 1}})
    method = MethodCall(None, "run")
    ctx = context(rt, "Resilient", method=method)
    errors = [call_error(rt, "http_get", {"url": "u"}, ctx) for _ in range(5)]
    assert len({id(e) for e in errors}) == 5
    assert isinstance(method.open_error, LumaError)
    assert [e["outcome"] for e in tool_events(rt)] == ["HTTP_503", "HTTP_503"] + \
        ["TOOL_CIRCUIT_OPEN"] * 3
