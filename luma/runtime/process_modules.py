"""Tool modules under ``"sandbox": "process"``: each in its own child process (RUNTIME.md §6).

A :class:`ProcessModule` starts the child (:mod:`luma.runtime.process_child`) when the program
starts, and hands the tool pipeline one ``async`` proxy handler per tool. A call is one JSON line
to the child (``id``, ``tool``, ``input``, ``needs`` and, with a timeout, ``deadline``: the
milliseconds left); the child answers with one line carrying the same ``id`` and a result
(``ok``), a typed error (``tool_error``), output that is not JSON (``invalid``), a failure,
``timeout`` or ``cpu_limit``. Calls are multiplexed over the pipes by ``id``; the answers are
read by the event loop of the run that waits for them (no thread in between); a thread of
Luma's waits for each child to end.

The child gets a clean environment, the module's folder as its working folder, no file
descriptor but its standard streams, ``max_memory_mb`` as its ``RLIMIT_AS`` and, while
``allow_network`` is false, an empty network namespace. A child that ends (a crash, the memory
or CPU time limit, a kill) fails the calls in flight with ``TOOL_FAILED`` and is started again
for the next call. A call that is given up (its timeout, a cancellation) is cancelled in the
child, whose ``Signal`` fires; a child that still has not answered :data:`KILL_GRACE_S` later
is killed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal as signals
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from luma.runtime.errors import LumaError, LumaToolError
from luma.runtime.handlers import CALL_DEADLINE, HandlerTimeout
from luma.runtime.modules import ToolModule, ToolModuleError
from luma.runtime.process_errors import EXIT_IDLE, RemoteFailure, RemoteOutputInvalid

KILL_GRACE_S = 0.5
SETTLE_WAIT_S = 0.05
SETTLE_POLL_S = 0.005

#: How a call stopped at its CPU time limit ends its ``TOOL_TIMEOUT`` message.
CPU_LIMIT_TEXT = (": the handler used more CPU time than its timeout, and its process was "
                  "stopped")
START_TIMEOUT_S = 30.0

#: The whole environment of a child: no variable of Luma's process reaches it.
CLEAN_ENVIRONMENT = {"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8",
                     "PYTHONDONTWRITEBYTECODE": "1", "MALLOC_ARENA_MAX": "2"}

#: One encoder for every call (``json.dumps`` with options builds a new one each time).
_ENCODER = json.JSONEncoder(ensure_ascii=False)

_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from luma.runtime.process_child import main; main()")
_LUMA_ROOT = str(Path(__file__).resolve().parents[2])


class _Child:
    """One start of a module's process, the calls waiting for its answers, and the reading of
    them: on the event loop of each run that calls it (``add_reader``), no thread in between."""

    def __init__(self, process: subprocess.Popen[bytes], module: ProcessModule,
                 rest: bytes) -> None:
        assert process.stdout is not None
        self.process = process
        self.lock = module.lock  # the module's: it guards ``pending`` and ``module.child`` too
        # weakly: a module nobody uses any more is collected, and its finalizer ends the child
        self.module = weakref.ref(module)
        self.limit: int | None = module.start_message["max_memory_mb"]
        self.out = process.stdout.fileno()
        os.set_blocking(self.out, False)
        self.buffer = bytearray(rest)  # the start of an answer not yet whole
        self.pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = {}
        # the loops that read its answers; a registration holds this object, and so the pipe:
        # its descriptor's number cannot go to another file while a loop still watches it
        self.watching: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
        self.retiring = False  # it said it will end (past its memory or CPU time limit)
        self.ended = False  # the process has ended, and the calls left were failed

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read the answers on ``loop`` from now on (a loop with a call waiting reads them, so
        an answer never waits for another thread, nor for a loop that is not running)."""
        if loop not in self.watching:
            loop.add_reader(self.out, self.readable, loop)
            with self.lock:
                self.watching.add(loop)

    def readable(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.read(loop):  # the end of its output: nothing more to watch for
            loop.remove_reader(self.out)
            with self.lock:
                self.watching.discard(loop)

    def read(self, loop: asyncio.AbstractEventLoop | None = None) -> bool:
        """Hand each answer the child has written to the call waiting for it (from any thread;
        ``loop`` is the one running here); returns whether its output has ended."""
        with self.lock:
            chunk = self._chunk()
            answers = self._answers(chunk)
        for waiting, message in answers:
            _settle(waiting, message, loop)
        return chunk == b""

    def finish(self) -> None:
        """Wait (on a thread of its own) for the child to end; then hand out what it wrote
        before it ended and fail the calls still waiting."""
        code = self.process.wait()
        answers = []
        with self.lock:
            while chunk := self._chunk():
                answers += self._answers(chunk)
            self.ended = True
            module = self.module()
            if module is not None and module.child is self:
                module.child = None
            left, self.pending = self.pending, {}
        del module
        for waiting, message in answers:
            _settle(waiting, message)
        text = f"the tool module's process ended ({_ending(code)})"
        if self.limit is not None and code in (-signals.SIGSEGV, -signals.SIGABRT,
                                               -signals.SIGBUS):
            text += (f"; its memory is limited by tool_module_policy.max_memory_mb "
                     f"({self.limit} MB)")
        # ended past a CPU limit with every call it took answered: the rest never reached it
        ending = {"resend": True} if code == EXIT_IDLE else {"failure": text,
                                                              "exception": "ProcessEnded"}
        for waiting in left.values():
            _settle(waiting, ending)

    def _chunk(self) -> bytes | None:
        """What the pipe holds (``b""`` at its end, ``None`` when it is empty); under the
        lock."""
        try:
            return os.read(self.out, 1 << 16)
        except BlockingIOError:  # nothing yet, or another loop has read it
            return None
        except OSError:
            return b""

    def _answers(self, chunk: bytes | None) -> list[tuple[tuple[asyncio.AbstractEventLoop,
                                                               asyncio.Future[Any]],
                                                         dict[str, Any]]]:
        """The calls ``chunk`` completes answers for, with their answers; under the lock."""
        if not chunk:
            return []
        self.buffer += chunk
        answers = []
        while (end := self.buffer.find(b"\n")) >= 0:
            message = _parse(self.buffer[:end])
            del self.buffer[:end + 1]
            if message is None or "id" not in message:
                continue
            if message.get("restart"):
                self.retiring = True  # the next call starts a new process
            waiting = self.pending.pop(message["id"], None)
            if waiting is not None:
                answers.append((waiting, message))
        return answers


class ProcessModule:
    """One tool module's child process, started again after it ends."""

    def __init__(self, start: dict[str, Any], written: str, folder: Path,
                 command: list[str] | None = None) -> None:
        self.command = command or [sys.executable, "-I", "-c", _BOOT, _LUMA_ROOT]
        # A Node.js child runs every handler on its one JavaScript thread: a handler that spins
        # holds up every call sent after it. A Python child has a spare worker thread for them.
        self.one_thread = command is not None
        self.start_message = start
        self.written = written
        self.folder = folder
        self.lock = threading.Lock()
        self.start_lock = threading.Lock()
        self.ids = itertools.count(1)
        self.child: _Child | None = None
        self.children: list[_Child] = []  # every start, for the finalizer
        self.tools: list[str] = []
        self.warnings: list[str] = []

    # ------------------------------------------------------------------ the child process

    def launch(self) -> _Child:
        """Start the child and wait for its first line; raises :class:`ToolModuleError` when
        the module does not load there."""
        process = subprocess.Popen(
            self.command, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=None, cwd=self.folder, env=dict(CLEAN_ENVIRONMENT),
            close_fds=True, start_new_session=True)
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps(self.start_message).encode() + b"\n")
            process.stdin.flush()
        except OSError:
            pass  # the child is gone already: its first line says why
        line, rest = _first_line(process.stdout.fileno())
        first = _parse(line)
        if first is None or "ready" not in first:
            process.kill()
            process.wait()
            if first is not None and "load_error" in first:
                error = first["load_error"]
                raise ToolModuleError(error["message"], self.written, error.get("line"))
            raise ToolModuleError(f"Tool module '{self.written}' could not be started in its "
                                  f"process: {_ending(process.returncode)}.", self.written)
        self.tools = list(first["ready"])
        self.warnings = list(first.get("warnings", []))
        child = _Child(process, self, rest)
        with self.lock:
            self.child = child
        threading.Thread(target=child.finish, daemon=True,
                         name=f"luma-process-{self.written}").start()
        self.children[:] = [c for c in self.children if not c.ended] + [child]
        return child

    def _running(self) -> _Child:
        with self.start_lock:  # calls that find the child gone start one new child
            with self.lock:
                child = self.child
            if child is None or child.retiring or child.ended:
                return self.launch()  # started again for this call
            return child

    def stop(self) -> None:
        with self.lock:
            self.child = None
        _stop_all(self.children)

    def _write(self, child: _Child, message: dict[str, Any]) -> bool:
        stdin = child.process.stdin
        assert stdin is not None
        data = _ENCODER.encode(message).encode("utf-8") + b"\n"
        try:
            with self.lock:
                stdin.write(data)
                stdin.flush()
        except (OSError, ValueError):  # it has ended, or its input is closed (retired)
            return False
        return True

    # ------------------------------------------------------------------------------ calls

    async def call(self, tool: str, value: Any, signal: Any, needs: Any) -> Any:
        # a process that is ending hands back a call it has not begun (``resend``): the call goes
        # to the next process (once more at most: a process ends so only past a CPU limit)
        for _ in range(2):
            answer = await self._call_once(tool, value, signal, needs)
            if "resend" not in answer:
                break
        else:
            raise RemoteFailure("the tool module's process ended before the call began, "
                                "twice", "ProcessEnded")
        return _answer(answer)

    async def _call_once(self, tool: str, value: Any, signal: Any, needs: Any) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        child = self._running()
        if self.one_thread and child.pending and _given_up(child):
            child = await self._settled(child)
        child.watch(loop)
        call_id = next(self.ids)
        future: asyncio.Future[Any] = loop.create_future()
        with self.lock:
            ended = child.ended
            if not ended:
                child.pending[call_id] = (loop, future)
        message = {"id": call_id, "tool": tool, "input": value, "needs": needs}
        deadline = CALL_DEADLINE.get()
        if deadline is not None:  # the milliseconds left: the child's clock and CPU limit
            message["deadline"] = max(0, round((deadline - time.monotonic()) * 1000))
        if ended or not self._write(child, message):
            with self.lock:
                child.pending.pop(call_id, None)
            raise RemoteFailure(f"the tool module's process ended "
                                f"({_ending(child.process.wait())})", "ProcessEnded")
        try:
            answer: dict[str, Any] = await future
        except asyncio.CancelledError:
            reason = getattr(signal, "reason", None) or "cancelled"
            self._write(child, {"cancel": call_id, "reason": reason})
            timer = threading.Timer(KILL_GRACE_S, self._kill_if_pending, (child, call_id))
            timer.daemon = True
            timer.start()
            raise
        return answer

    async def _settled(self, child: _Child) -> _Child:
        """A call that finds a given-up call still in a Node.js process waits a moment
        (:data:`SETTLE_WAIT_S`) for its answer: a handler that heeds its Signal answers at
        once. One that does not may spin on the one JavaScript thread until the process is
        stopped, taking the new call down with it, so the process is retired (its input
        closed: it ends) and the new call starts a new one."""
        waited = 0.0
        while _given_up(child) and not child.ended and waited < SETTLE_WAIT_S:
            await asyncio.sleep(SETTLE_POLL_S)
            waited += SETTLE_POLL_S
        if _given_up(child):
            with self.start_lock, self.lock:
                if not child.retiring:
                    child.retiring = True
                    try:
                        assert child.process.stdin is not None
                        child.process.stdin.close()
                    except OSError:
                        pass
        return self._running()

    def _kill_if_pending(self, child: _Child, call_id: int) -> None:
        """The child has not answered a cancelled call in time: it ignores its Signal."""
        child.read()  # an answer no loop is watching for any more (its run has ended)
        with self.lock:
            still = call_id in child.pending  # the answer removes it
        if still and child.process.poll() is None:
            child.process.kill()

    def handler(self, tool: str) -> Any:
        async def handler(input: Any, signal: Any, needs: Any) -> Any:
            return await self.call(tool, input, signal, needs)

        handler.__name__ = tool
        return handler


NODE_RUNNER = Path(__file__).resolve().parent / "node" / "runner.mjs"
NODE_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts")


#: Starts a Node.js module's child: leaves the network (when asked) and becomes ``node``.
_NODE_BOOT = """
import ctypes, ctypes.util, json, os, sys
node, runner, isolate, heap = json.loads(sys.argv[1])
warning = ""
if isolate:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.unshare(0x10000000 | 0x40000000) != 0:
            warning = os.strerror(ctypes.get_errno())
    except (OSError, AttributeError) as exc:
        warning = str(exc)
flags = [f"--max-old-space-size={heap}"] if heap else []
os.execv(node, [node, "--no-warnings", *flags, runner, warning])
"""


def node_command(written: str, policy: Any) -> list[str]:
    """How a JavaScript or TypeScript module's child starts: ``node`` and the runner, in an
    empty network namespace while the policy's ``allow_network`` is false, with
    ``max_memory_mb`` as the V8 heap limit."""
    import shutil

    node = shutil.which("node")
    if node is None:
        raise ToolModuleError(f"Tool module '{written}' is JavaScript or TypeScript, and running "
                              "it needs Node.js: 'node' was not found on PATH.", written)
    isolate = policy is not None and not policy.allow_network
    heap = policy.max_memory_mb if policy is not None else None
    return [sys.executable, "-I", "-c", _NODE_BOOT,
            json.dumps([node, str(NODE_RUNNER), isolate, heap])]


def start_process_module(start: dict[str, Any], written: str, folder: Path,
                         command: list[str] | None = None) -> tuple[ToolModule, ProcessModule]:
    """Start the module's child and build its proxy handlers."""
    module = ProcessModule(start, written, folder, command)
    module.launch()
    weakref.finalize(module, _stop_all, module.children)  # also at exit
    handlers = {name: module.handler(name) for name in module.tools}
    return ToolModule(written, handlers, "process"), module


def _given_up(child: _Child) -> bool:
    """Whether a call sent to ``child`` was given up here (its timeout, a cancellation: its
    future is done) and not answered yet."""
    return any(future.done() for _, future in list(child.pending.values()))


def _stop_all(children: list[_Child]) -> None:
    """End every child still running: the end of its input first, then a kill."""
    for child in children:
        process = child.process
        if process.poll() is not None:
            continue
        try:
            assert process.stdin is not None
            process.stdin.close()  # the child ends at the end of its input
            process.wait(timeout=1.0)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
    children.clear()


def _answer(answer: dict[str, Any]) -> Any:
    if "ok" in answer:
        return answer["ok"]
    if "tool_error" in answer:
        e = answer["tool_error"]
        raise LumaToolError(e["code"], e["message"], e["retryable"], e["details"],
                            **(e.get("extra") or {}))
    if "invalid" in answer:
        raise RemoteOutputInvalid(*answer["invalid"])
    if "timeout" in answer:  # its deadline came in the child
        raise HandlerTimeout()
    if "cpu_limit" in answer:
        raise HandlerTimeout(CPU_LIMIT_TEXT)
    if "cancelled" in answer:
        raise asyncio.CancelledError()
    raise RemoteFailure(answer.get("failure", "no answer"), answer.get("exception", "Exception"))


def _settle(waiting: tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]],
            message: dict[str, Any], running: asyncio.AbstractEventLoop | None = None) -> None:
    loop, future = waiting
    if loop is running:  # read on the call's own loop: no hop
        if not future.done():
            future.set_result(message)
        return

    def land() -> None:
        if not future.done():
            future.set_result(message)

    try:
        loop.call_soon_threadsafe(land)
    except RuntimeError:
        pass  # that run's loop has closed


def _first_line(fd: int) -> tuple[bytes, bytes]:
    """The child's first line (its tools, or why it did not load), and what came after it."""
    data = b""
    while b"\n" not in data:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    line, _, rest = data.partition(b"\n")
    return line, rest


def _parse(line: bytes | bytearray) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _ending(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signals.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
