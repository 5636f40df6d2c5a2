"""The child process of a ``"sandbox": "process"`` tool module (RUNTIME.md §6).

Started by :mod:`luma.runtime.process_modules` with a clean environment, the module's folder as
working folder and no inherited file descriptors but its three standard streams. The first line
on stdin is the start message (the module, its manifest, the policy); the child then enters an
empty network namespace when the network is not allowed, limits its address space, loads the
module under the ``strict`` rules and answers with one line: the tools it exports, or the load
error. After that every line on stdin is a call or a cancellation, every line it writes on its
protocol stream is the answer to one call. What the module prints goes to stderr.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any

from luma.runtime.process_errors import EXIT_IDLE, EXIT_MEMORY, EXIT_STOPPED

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MIB = 1024 * 1024
CPU_CHECK_S = 0.01


def main() -> None:
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # the module's print() goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    requests = sys.stdin.buffer
    start = json.loads(requests.readline())
    warnings: list[str] = []
    if not start["allow_network"]:
        problem = _leave_network()
        if problem is not None:
            warnings.append(problem)
    if start["max_memory_mb"] is not None:
        import resource

        limit = int(start["max_memory_mb"]) * MIB
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        invokers = _load(start)
    except MemoryError:
        _send(protocol, threading.Lock(), {"load_error": {
            "message": f"Tool module '{start['written']}' could not be loaded: it went past "
                       f"tool_module_policy.max_memory_mb ({start['max_memory_mb']} MB).",
            "line": None}})
        return
    except Exception as exc:
        _send(protocol, threading.Lock(), {"load_error": {
            "message": getattr(exc, "message", str(exc)), "line": getattr(exc, "line", None)}})
        return
    _send(protocol, threading.Lock(), {"ready": sorted(invokers), "warnings": warnings})
    Child(protocol, invokers, start).serve(requests)


def _leave_network() -> str | None:
    """Enter a new user and network namespace (only a loopback that is down): a connection
    fails. The reason, when the kernel refuses."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
            return os.strerror(ctypes.get_errno())
    except (OSError, AttributeError) as exc:
        return str(exc)
    return None


def _load(start: dict[str, Any]) -> dict[str, Any]:
    from luma.runtime.handlers import HandlerInvoker
    from luma.runtime.manifests import ModuleRequest, load_requested

    request = ModuleRequest(start["key"], start["written"], Path(start["file"]),
                            start["version"], start["integrity"],
                            tuple(start["dependencies"]) if start["dependencies"] is not None
                            else None,
                            Path(start["dependency_root"]) if start["dependency_root"] else None)
    policy = SimpleNamespace(sandbox="strict", allow_builtins=start["allow_builtins"],
                             allow_env=start["allow_env"], allow_network=start["allow_network"])
    module = load_requested(request, Path(start["project"]), policy)
    if module.datasources:
        from luma.runtime.modules import ToolModuleError

        names = ", ".join(sorted(module.datasources))
        raise ToolModuleError(f"Tool module '{start['written']}' exports datasource bridges "
                              f"({names}), which sandbox 'process' does not run: use a "
                              "built-in bridge (datasources in luma.config.json), or a "
                              "tool_module_policy without 'process'.",
                              start["written"])
    return {name: HandlerInvoker(handler, name) for name, handler in module.handlers.items()}


#: One encoder for every answer (``json.dumps`` with options builds a new one per call).
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def _send(protocol: IO[str], lock: threading.Lock, message: dict[str, Any]) -> None:
    line = _ENCODER.encode(message) + "\n"
    with lock:
        protocol.write(line)  # the stream is line-buffered: this line goes out at once


class Child:
    """Runs the calls that arrive, each as its own task on one event loop (a sync handler in a
    worker thread), and answers each with one line.

    A call with a ``deadline`` (the milliseconds its timeout leaves) fires its ``Signal`` (and
    cancels an async handler) when that time is up, and is answered ``timeout`` whatever the
    handler does after; its CPU time is limited to the same milliseconds (:class:`CpuWatch`).
    With ``max_concurrency`` 1, a sync handler that takes no ``Signal`` and has no deadline runs
    on the loop itself: nothing could reach it while it runs, and the hop to a worker thread is
    most of a call's cost in the child."""

    def __init__(self, protocol: IO[str], invokers: dict[str, Any], start: dict[str, Any]) -> None:
        self.protocol = protocol
        self.invokers = invokers
        self.start = start
        self.lock = threading.Lock()
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.signals: dict[int, Any] = {}
        self.is_async: dict[int, bool] = {}
        concurrency = int(start.get("max_concurrency") or 1)
        self.inline = concurrency == 1
        self.pool = ThreadPoolExecutor(max_workers=concurrency + 1,
                                       thread_name_prefix="luma-tool-")
        self.loop_clock = time.pthread_getcpuclockid(threading.get_ident())
        self.watch = CpuWatch(self.past_cpu_limit)
        self.retiring = False  # a call went past its CPU time limit: end when the rest are done
        # the calls that have not been answered (but the one stopped at its CPU limit)
        self.running: set[int] = set()

    def serve(self, requests: IO[bytes]) -> None:
        loop = asyncio.new_event_loop()
        done: asyncio.Future[None] = loop.create_future()
        fd = requests.fileno()
        os.set_blocking(fd, False)
        buffer = bytearray()

        def readable() -> None:  # the requests are read on the loop: no thread in between
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:
                loop.remove_reader(fd)
                _finish(done)
                return
            buffer.extend(chunk)
            while (end := buffer.find(b"\n")) >= 0:
                line = bytes(buffer[:end])
                del buffer[:end + 1]
                self.arrived(loop, json.loads(line))

        loop.add_reader(fd, readable)
        loop.run_until_complete(done)
        os._exit(0)  # handlers still running in threads are abandoned with the process

    def arrived(self, loop: asyncio.AbstractEventLoop, message: dict[str, Any]) -> None:
        if "cancel" in message:
            from luma.runtime.signal import fire

            signal = self.signals.get(message["cancel"])
            if signal is not None:
                fire(signal, message.get("reason", "cancelled"))
            task = self.tasks.get(message["cancel"])
            if task is not None and self.is_async.get(message["cancel"]):
                # an async handler stops at its next await; a sync one has only its Signal,
                # and its answer waits until it returns (or the parent kills this process)
                task.cancel()
            return
        call_id = message["id"]
        invoker = self.invokers[message["tool"]]
        with self.lock:
            refused = self.retiring
            if not refused:
                self.running.add(call_id)
        if refused:  # this process is ending: the call has not begun, a new process takes it
            _send(self.protocol, self.lock, {"id": call_id, "resend": True})
            return
        if (self.inline and not invoker.is_async and not invoker.wants_signal
                and "deadline" not in message):
            try:
                raw = invoker.call(message["input"], None, message.get("needs"))
            except BaseException as exc:
                self.answer(call_id, self.failed(exc))
                return
            if not inspect.isawaitable(raw):
                self.answer(call_id, _result(raw))
                return
            self.tasks[call_id] = loop.create_task(self.finish(call_id, raw))
            return
        self.tasks[call_id] = loop.create_task(self.call(call_id, invoker, message))

    async def finish(self, call_id: int, awaitable: Any) -> None:
        """A sync handler run inline returned an awaitable."""
        try:
            answer = _result(await awaitable)
        except BaseException as exc:
            answer = self.failed(exc)
        self.tasks.pop(call_id, None)
        self.answer(call_id, answer)

    async def call(self, call_id: int, invoker: Any, message: dict[str, Any]) -> None:
        from luma.runtime.signal import Signal, fire

        loop = asyncio.get_running_loop()
        signal = Signal() if invoker.wants_signal else None
        self.signals[call_id] = signal
        self.is_async[call_id] = invoker.is_async
        deadline = message.get("deadline")
        limit = None if deadline is None else deadline / 1000
        expired = [False]
        timer = None
        if limit is not None:
            task = asyncio.current_task()

            def expire() -> None:
                expired[0] = True
                if signal is not None:
                    fire(signal, "timeout")
                if invoker.is_async and task is not None:
                    task.cancel()

            timer = loop.call_later(limit, expire)
        answer: dict[str, Any]
        try:
            if invoker.is_async:
                if limit is not None:
                    self.watch.start(call_id, self.loop_clock, limit)
                raw = await invoker.call(message["input"], signal, message.get("needs"))
            else:  # a worker thread, so that calls run side by side
                raw = await loop.run_in_executor(self.pool, self.work, call_id, invoker,
                                                 message, signal, limit)
                if inspect.isawaitable(raw):
                    raw = await raw
        except asyncio.CancelledError:
            answer = {"cancelled": True}
        except BaseException as exc:
            answer = self.failed(exc)
        else:
            answer = _result(raw)
        if timer is not None:
            timer.cancel()
            if invoker.is_async:  # a sync handler's worker thread has stopped its watch
                self.watch.stop(call_id)
        if expired[0]:
            answer = {"timeout": True}  # the call ended at its deadline, whatever came after
        self.tasks.pop(call_id, None)
        self.signals.pop(call_id, None)
        self.is_async.pop(call_id, None)
        self.answer(call_id, answer)

    def work(self, call_id: int, invoker: Any, message: dict[str, Any], signal: Any,
             limit: float | None) -> Any:
        """A sync handler on its worker thread, whose CPU clock counts against the limit."""
        if limit is not None:
            self.watch.start(call_id, time.pthread_getcpuclockid(threading.get_ident()), limit)
        try:
            return invoker.call(message["input"], signal, message.get("needs"))
        finally:
            if limit is not None:
                self.watch.stop(call_id)

    def failed(self, exc: BaseException) -> dict[str, Any]:
        from luma.runtime.errors import LumaToolError

        if isinstance(exc, LumaToolError):
            return {"tool_error": {"code": exc.code, "message": exc.message,
                                   "retryable": exc.retryable, "details": exc.details,
                                   "extra": exc.extra}}
        if isinstance(exc, MemoryError):
            limit = self.start["max_memory_mb"]
            return {"failure": f"MemoryError: the handler went past "
                               f"tool_module_policy.max_memory_mb ({limit} MB)",
                    "exception": "MemoryError", "restart": True}
        return {"failure": _failure_text(exc), "exception": type(exc).__name__}

    def answer(self, call_id: int, answer: dict[str, Any]) -> None:
        self.running.discard(call_id)
        answer["id"] = call_id
        try:
            _send(self.protocol, self.lock, answer)
        except (TypeError, ValueError) as exc:  # a typed error whose fields are not JSON
            _send(self.protocol, self.lock, {"id": call_id, "failure": f"the handler's "
                  f"LumaToolError cannot be sent: {exc}", "exception": "LumaToolError"})
        if answer.get("restart"):
            os._exit(EXIT_MEMORY)
        if self.retiring:
            self.end_if_idle()

    def past_cpu_limit(self, call_id: int, clock: int) -> None:
        """A call (its thread's CPU ``clock``) used more CPU time than its timeout: a thread
        cannot be stopped, the process can. It says so (the parent sends the next call to a
        new process), lets the other calls in it finish (unless the call holds the event
        loop, which they need), and ends."""
        with self.lock:
            if self.retiring:
                return
            self.retiring = True
            self.running.discard(call_id)  # answered now: the parent drops a later answer
        _send(self.protocol, self.lock, {"id": call_id, "cpu_limit": True, "restart": True})
        if clock == self.loop_clock:  # the other calls in it, if any, end with it
            os._exit(EXIT_STOPPED)
        self.end_if_idle()

    def end_if_idle(self) -> None:
        with self.lock:
            idle = not self.running
        if idle:  # every call it took has been answered
            os._exit(EXIT_IDLE)


class CpuWatch:
    """The CPU time limit of the calls that have a deadline: every :data:`CPU_CHECK_S` a thread
    of its own reads the CPU clock of the thread running each such call (a sync handler's
    worker thread, or the event loop's for an async one) and calls ``expired(id, clock)`` for
    a call past its limit. The thread starts with the first such call."""

    def __init__(self, expired: Any) -> None:
        self.expired = expired
        self.calls: dict[int, tuple[int, float]] = {}  # id -> (CPU clock, CPU time to stop at)
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, call_id: int, clock: int, limit: float) -> None:
        until = time.clock_gettime(clock) + limit
        with self.lock:
            self.calls[call_id] = (clock, until)
            self.wake.set()
            if self.thread is None:
                self.thread = threading.Thread(target=self.run, daemon=True,
                                               name="luma-cpu-watch")
                self.thread.start()

    def stop(self, call_id: int) -> None:
        with self.lock:
            self.calls.pop(call_id, None)

    def run(self) -> None:
        while True:
            self.wake.wait()
            with self.lock:
                watched = list(self.calls.items())
                if not watched:
                    self.wake.clear()
                    continue
            for call_id, (clock, until) in watched:
                try:
                    used = time.clock_gettime(clock)
                except OSError:
                    continue  # its thread has just ended
                if used >= until:
                    self.expired(call_id, clock)
            time.sleep(CPU_CHECK_S)


def _result(raw: Any) -> dict[str, Any]:
    from luma.runtime.values import json_problem, plain_json

    subclasses = [False]
    problem = json_problem(raw, subclasses)
    if problem is not None:
        return {"invalid": list(problem)}
    return {"ok": plain_json(raw) if subclasses[0] else raw}


def _finish(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _failure_text(exc: BaseException) -> str:
    """What the in-process pipeline would say about ``exc`` (before redaction)."""
    name = type(exc).__name__
    text = " ".join(str(exc).split())
    if isinstance(exc, SystemExit):
        return f"the handler called exit({exc.code!r})"
    if isinstance(exc, KeyboardInterrupt):
        return "the handler raised KeyboardInterrupt"
    if not text:
        return name
    if isinstance(exc, LookupError) or not isinstance(exc, Exception):
        return f"{name}: {text}"
    return text
