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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MIB = 1024 * 1024


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


def _send(protocol: IO[str], lock: threading.Lock, message: dict[str, Any]) -> None:
    line = json.dumps(message, ensure_ascii=False, allow_nan=False)
    with lock:
        protocol.write(line + "\n")
        protocol.flush()


class Child:
    """Runs the calls that arrive, each as its own task on one event loop (a sync handler in a
    worker thread), and answers each with one line."""

    def __init__(self, protocol: IO[str], invokers: dict[str, Any], start: dict[str, Any]) -> None:
        self.protocol = protocol
        self.invokers = invokers
        self.start = start
        self.lock = threading.Lock()
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.signals: dict[int, Any] = {}
        self.is_async: dict[int, bool] = {}
        self.pool = ThreadPoolExecutor(max_workers=int(start.get("max_concurrency") or 1) + 1,
                                       thread_name_prefix="luma-tool-")

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
        self.tasks[call_id] = loop.create_task(self.call(call_id, message))

    async def call(self, call_id: int, message: dict[str, Any]) -> None:
        from luma.runtime.errors import LumaToolError
        from luma.runtime.values import json_problem, plain_json

        from luma.runtime.signal import Signal

        invoker = self.invokers[message["tool"]]
        signal = Signal() if invoker.wants_signal else None
        self.signals[call_id] = signal
        self.is_async[call_id] = invoker.is_async
        answer: dict[str, Any]
        try:
            if invoker.is_async:
                raw = await invoker.call(message["input"], signal, message.get("needs"))
            else:  # a worker thread, so that calls run side by side
                raw = await asyncio.get_running_loop().run_in_executor(
                    self.pool, invoker.call, message["input"], signal, message.get("needs"))
                if inspect.isawaitable(raw):
                    raw = await raw
        except asyncio.CancelledError:
            answer = {"cancelled": True}
        except LumaToolError as exc:
            answer = {"tool_error": {"code": exc.code, "message": exc.message,
                                     "retryable": exc.retryable, "details": exc.details,
                                     "extra": exc.extra}}
        except MemoryError:
            limit = self.start["max_memory_mb"]
            answer = {"failure": f"MemoryError: the handler went past "
                                 f"tool_module_policy.max_memory_mb ({limit} MB)",
                      "exception": "MemoryError", "restart": True}
        except BaseException as exc:
            answer = {"failure": _failure_text(exc), "exception": type(exc).__name__}
        else:
            subclasses = [False]
            problem = json_problem(raw, subclasses)
            if problem is not None:
                answer = {"invalid": list(problem)}
            else:
                answer = {"ok": plain_json(raw) if subclasses[0] else raw}
        self.tasks.pop(call_id, None)
        self.signals.pop(call_id, None)
        self.is_async.pop(call_id, None)
        answer["id"] = call_id
        try:
            _send(self.protocol, self.lock, answer)
        except (TypeError, ValueError) as exc:  # a typed error whose fields are not JSON
            _send(self.protocol, self.lock, {"id": call_id, "failure": f"the handler's "
                  f"LumaToolError cannot be sent: {exc}", "exception": "LumaToolError"})
        if answer.get("restart"):
            self.protocol.flush()
            os._exit(70)


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
