"""``luma.Signal``, the cancellation signal a tool handler receives (RUNTIME.md §1)."""

from __future__ import annotations

import threading
import time

import pytest

import luma
from luma.runtime.signal import Signal, SignalAborted, fire


def test_exported_as_luma_signal() -> None:
    assert luma.Signal is Signal


def test_fresh_signal_is_not_aborted() -> None:
    signal = Signal()
    assert signal.aborted is False
    assert signal.reason is None
    assert signal.wait(timeout=0.01) is False
    signal.throw_if_aborted()
    assert repr(signal) == "Signal(not aborted)"


def test_abort_sets_reason_once() -> None:
    signal = Signal()
    signal.abort("timeout")
    signal.abort("cancelled")
    assert signal.aborted is True
    assert signal.reason == "timeout"
    assert signal.wait() is True
    assert repr(signal) == "Signal(aborted, reason='timeout')"


def test_throw_if_aborted_raises_with_the_reason() -> None:
    signal = Signal()
    signal.abort("timeout")
    with pytest.raises(SignalAborted) as info:
        signal.throw_if_aborted()
    assert info.value.reason == "timeout"
    assert str(info.value) == "The tool call was aborted: timeout."


def test_wait_wakes_a_thread_when_aborted_from_another() -> None:
    signal = Signal()
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(signal.wait(timeout=10)))
    waiter.start()
    time.sleep(0.05)
    assert waiter.is_alive()
    signal.abort("cancelled")
    waiter.join(timeout=5)
    assert woke == [True]


def test_listeners_run_once_and_late_listeners_run_at_once() -> None:
    signal = Signal()
    calls: list[str] = []
    signal.add_listener(lambda: calls.append(f"first:{signal.reason}"))
    signal.add_listener(lambda: calls.append("second"))
    signal.abort("timeout")
    signal.abort("again")
    assert calls == ["first:timeout", "second"]
    signal.add_listener(lambda: calls.append("late"))
    assert calls == ["first:timeout", "second", "late"]


def test_a_failing_listener_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    signal = Signal()
    calls: list[str] = []

    def broken() -> None:
        raise RuntimeError("listener bug")

    signal.add_listener(broken)
    signal.add_listener(lambda: calls.append("ran"))
    fire(signal, "cancelled")
    assert calls == ["ran"]
    assert signal.aborted
    # one line, without a traceback: the listener is the handler's code, not Luma's
    assert [r.getMessage() for r in caplog.records] == [
        "A Signal listener raised an exception: RuntimeError: listener bug"]
    assert all(r.exc_info is None for r in caplog.records)


def test_abort_returns_what_the_listeners_raised() -> None:
    signal = Signal()
    signal.add_listener(lambda: 1 / 0)
    failures = signal.abort("timeout")
    assert [type(f) for f in failures] == [ZeroDivisionError]
    assert signal.abort("again") == []


def test_concurrent_aborts_and_listeners_call_each_listener_once() -> None:
    for _ in range(50):
        signal = Signal()
        counts = [0] * 20
        lock = threading.Lock()

        def listener(i: int) -> None:
            with lock:
                counts[i] += 1

        adders = [
            threading.Thread(target=signal.add_listener, args=(lambda i=i: listener(i),))
            for i in range(20)
        ]
        aborters = [threading.Thread(target=signal.abort, args=(f"r{i}",)) for i in range(4)]
        for t in adders + aborters:
            t.start()
        for t in adders + aborters:
            t.join()
        assert counts == [1] * 20
        assert signal.reason in {"r0", "r1", "r2", "r3"}
