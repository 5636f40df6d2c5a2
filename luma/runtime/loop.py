"""The event loop of one run (CLI.md "Running a program"): start it, watch it, interrupt it,
and end it within a bounded time whatever the handlers do.

- **Handler output.** While the program runs, ``sys.stdout`` writes to stderr, in every thread,
  so a handler's ``print`` cannot corrupt the JSON result; the result goes to the real stdout.
- **Ctrl-C.** The first one cancels the run; when a sync handler is running on the loop's
  thread (Python cannot interrupt it), the run says that it waits for it, and a second Ctrl-C
  quits at once (exit code 130).
- **A blocked loop.** A watchdog thread notices when an ``async`` handler keeps the loop busy
  (``time.sleep`` in an ``async def``) and a warning names it.
- **Shutdown.** What is still running when the program ends is cancelled and given
  :data:`SHUTDOWN_GRACE_S` to stop; what does not stop (a handler that ignores cancellation, a
  sync handler's thread) is abandoned, named on stderr, and does not hold the exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import signal
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from types import CodeType, FrameType
from typing import IO, TYPE_CHECKING, Any, NoReturn

from luma.runtime.handlers import HANDLER_TASK_PREFIX, running_handler_threads

if TYPE_CHECKING:
    from luma.runtime.engine import Runtime

SHUTDOWN_GRACE_S = 1.0
"""How long cancelled work left at the end of a run may take to stop before it is abandoned."""
BLOCKED_LOOP_S = 1.0
"""A step of an ``async`` handler that holds the event loop this long gets a warning."""
_BEAT_S = 0.1  # how often the loop says it is alive (the precision of the measured stall)
_WATCH_S = 0.25  # how often the watchdog looks
EXIT_INTERRUPTED = 130


class Interrupted(Exception):
    """The run was interrupted with Ctrl-C (it ended cancelled)."""


class RunLoop:
    """One run's event loop; :meth:`run` the program, then :meth:`close`."""

    def __init__(self, runtime: Runtime, stderr: IO[str]) -> None:
        self.runtime = runtime
        self.stderr = stderr
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(self._loop_error)
        self.interrupts = 0
        self._main: asyncio.Task[Any] | None = None
        self._sigint_owned = False
        self._watchdog: _Watchdog | None = None

    def run(self, program: Coroutine[Any, Any, Any]) -> Any:
        """Run ``program`` to its end; raises what it raises, or :class:`Interrupted`."""
        loop = self.loop
        asyncio.set_event_loop(loop)
        main = self._main = loop.create_task(program)
        codes = _async_handler_codes(self.runtime)
        if codes:
            self._watchdog = _Watchdog(loop, codes, self.runtime)
        self._own_sigint(main)  # until close(): a Ctrl-C while work is abandoned quits
        try:
            return _complete(loop, main, self._stopped_by_handler)
        except asyncio.CancelledError:
            if self.interrupts:
                raise Interrupted() from None
            raise

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """What asyncio would log with a traceback (a background task a handler started that
        failed and nobody awaited): one line on stderr."""
        exc = context.get("exception")
        what = context.get("message") or "error in the event loop"
        task = context.get("task") or context.get("future")
        coro = getattr(task, "get_coro", lambda: None)()
        name = getattr(coro, "__qualname__", None)
        where = f" ({name}())" if name else ""
        detail = ""
        if isinstance(exc, BaseException):
            try:
                text = str(exc)
            except Exception:
                text = ""
            detail = f": {type(exc).__name__}" + (f": {text}" if text else "")
        try:
            self.runtime.warn("ASYNC_TASK", f"{what}{where}{detail}")
        except Exception:  # late, at interpreter exit: stderr may be gone
            pass

    def _stopped_by_handler(self) -> None:
        self.runtime.warn("EVENT_LOOP", "a tool handler stopped the event loop; the run went on")

    def close(self) -> list[str]:
        """Cancel what is still running, give it :data:`SHUTDOWN_GRACE_S` to stop, close the
        loop; returns what was abandoned (for the stderr line), never waiting longer."""
        try:
            return self._shut_down()
        finally:
            self._release_sigint()

    def _shut_down(self) -> list[str]:
        loop = self.loop
        if self._watchdog is not None:
            self._watchdog.stop()
        abandoned: list[str] = []
        deadline = time.monotonic() + SHUTDOWN_GRACE_S
        if loop.is_closed():
            return abandoned
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                _complete(loop, asyncio.wait(pending, timeout=SHUTDOWN_GRACE_S))
            for task in pending:
                if not task.done():
                    # abandoned on purpose: no "Task was destroyed but it is pending" at exit
                    task._log_destroy_pending = False  # type: ignore[attr-defined]
                    abandoned.append(_describe_task(task))
                elif not task.cancelled():
                    task.exception()  # retrieved, so asyncio does not log it
            _complete(loop, _bounded(loop.shutdown_asyncgens()))
            if not _complete(loop, _bounded(loop.shutdown_default_executor())):
                abandoned.append("a worker thread of the run (an approval prompt, a file "
                                 "store wait) still running")
        finally:
            asyncio.set_event_loop(None)
            loop.close()
        while running_handler_threads() and time.monotonic() < deadline:
            time.sleep(0.02)  # a thread that is about to finish is not worth a word
        abandoned += [f"tool '{name}' (a sync handler still running in its thread)"
                      for name in running_handler_threads()]
        return abandoned

    def _own_sigint(self, main: asyncio.Task[Any]) -> None:
        if threading.current_thread() is not threading.main_thread() \
                or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return  # someone else owns Ctrl-C (an embedding program): leave it alone
        loop = self.loop

        def on_sigint(signum: int, frame: FrameType | None) -> None:
            self.interrupts += 1
            if self.interrupts > 1 or main.done():
                self._quit()
            busy = self.runtime.inline_handler
            if busy is not None:
                self._say(f"luma: interrupted; waiting for tool '{busy}' to finish (Python "
                          "cannot stop a running sync handler); press Ctrl-C again to quit")
            else:
                loop.call_soon_threadsafe(loop.call_later, SHUTDOWN_GRACE_S,
                                          self._still_waiting, main)
            main.cancel()  # at once, so that a handler's late result is not stored
            loop.call_soon_threadsafe(lambda: None)  # wake the loop if it is waiting

        signal.signal(signal.SIGINT, on_sigint)
        self._sigint_owned = True

    def _release_sigint(self) -> None:
        if self._sigint_owned:
            self._sigint_owned = False
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def _still_waiting(self, main: asyncio.Task[Any]) -> None:
        if not main.done():
            self._say("luma: interrupted; still waiting for the running tool calls to stop; "
                      "press Ctrl-C again to quit")

    def _say(self, line: str) -> None:
        try:
            self.stderr.write(line + "\n")
            self.stderr.flush()
        except (OSError, ValueError):
            pass

    def _quit(self) -> NoReturn:
        """A second Ctrl-C: leave now, without waiting for anything."""
        import os

        self._say("luma: interrupted")
        with contextlib.suppress(Exception):
            self.runtime.telemetry.close()
        for stream in (sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.flush()
        os._exit(EXIT_INTERRUPTED)


def report_abandoned(abandoned: list[str], stderr: IO[str]) -> None:
    """The stderr line that names the work a run left behind."""
    if abandoned:
        stderr.write(f"luma: did not wait for {len(abandoned)} unfinished "
                     f"{'piece' if len(abandoned) == 1 else 'pieces'} of work at exit: "
                     f"{'; '.join(abandoned)}\n")
        stderr.flush()


def _complete(loop: asyncio.AbstractEventLoop, work: Any, stopped: Any = None) -> Any:
    """``loop.run_until_complete(work)``, going on when a handler calls ``loop.stop()``."""
    future = asyncio.ensure_future(work, loop=loop)
    warned = False
    while True:
        try:
            return loop.run_until_complete(future)
        except RuntimeError:
            if future.done() or loop.is_closed():
                raise
            if stopped is not None and not warned:
                warned = True
                stopped()


async def _bounded(step: Coroutine[Any, Any, None]) -> bool:
    """Whether ``step`` finished within SHUTDOWN_GRACE_S."""
    try:
        await asyncio.wait_for(step, SHUTDOWN_GRACE_S)
    except asyncio.TimeoutError:  # a stuck executor thread or generator
        return False
    except Exception:
        pass
    return True


def _describe_task(task: asyncio.Task[Any]) -> str:
    name = task.get_name()
    if name.startswith(HANDLER_TASK_PREFIX):
        return f"tool '{name[len(HANDLER_TASK_PREFIX):]}' (an async handler that ignored its " \
               "cancellation)"
    coro = task.get_coro()
    what = getattr(coro, "__qualname__", None) or type(coro).__name__
    return f"a task running {what}() (it ignored its cancellation)"


# ------------------------------------------------------------------------- handler output


class HandlerStdout(io.TextIOBase):
    """What ``sys.stdout`` is while a program runs: text written to it goes to stderr. It cannot
    be closed by a handler (the result still has to be written)."""

    def __init__(self, target: IO[str]) -> None:
        super().__init__()
        self._target = target

    def write(self, text: str) -> int:
        self._target.write(text)
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            self._target.flush()

    def close(self) -> None:
        self.flush()  # Luma's stream, not the handler's: it stays open

    @property
    def closed(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._target.fileno()

    def isatty(self) -> bool:
        try:
            return self._target.isatty()
        except (AttributeError, ValueError):
            return False

    @property
    def buffer(self) -> Any:
        return getattr(self._target, "buffer", None)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._target, "encoding", None) or "utf-8"


@contextlib.contextmanager
def handler_stdout_to(stderr: IO[str]) -> Iterator[None]:
    """``sys.stdout`` writes to ``stderr`` inside the block (all threads)."""
    saved = sys.stdout
    sys.stdout = HandlerStdout(stderr)
    try:
        yield
    finally:
        if isinstance(sys.stdout, HandlerStdout):
            sys.stdout = saved


# ---------------------------------------------------------------------------- the watchdog


class _Watchdog:
    """Notices a step of an ``async`` handler that holds the event loop for BLOCKED_LOOP_S or
    more. The loop beats every _BEAT_S; a thread looks every _WATCH_S, and when the beat is late
    it reads the loop thread's stack for a handler's frame. When the loop beats again, the stall
    is reported with its length (to within _BEAT_S)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, codes: dict[CodeType, str],
                 runtime: Runtime) -> None:
        self.loop = loop
        self.codes = codes
        self.runtime = runtime
        self.loop_thread = threading.get_ident()
        self.last = time.monotonic()
        self.culprit: str | None = None
        self._stopped = threading.Event()
        self._handle: asyncio.TimerHandle | None = loop.call_later(_BEAT_S, self._beat)
        threading.Thread(target=self._watch, name="luma-watchdog", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()
        if self._handle is not None:
            self._handle.cancel()

    def _beat(self) -> None:
        now = time.monotonic()
        stalled = now - self.last - _BEAT_S / 2  # the stall began within the last beat period
        culprit, self.culprit = self.culprit, None
        self.last = now
        if culprit is not None and stalled >= BLOCKED_LOOP_S:
            self.runtime.warn(
                "EVENT_LOOP_BLOCKED",
                f"handler '{culprit}' blocked the event loop for {stalled:.1f} s; every other "
                "call and timeout waited meanwhile. An async handler must not call blocking "
                "code: use 'await asyncio.to_thread(...)', or write it as a plain def")
        if not self._stopped.is_set():
            self._handle = self.loop.call_later(_BEAT_S, self._beat)

    def _watch(self) -> None:
        while not self._stopped.wait(_WATCH_S):
            if time.monotonic() - self.last < BLOCKED_LOOP_S / 2 or self.culprit is not None:
                continue
            frame = sys._current_frames().get(self.loop_thread)
            while frame is not None:
                name = self.codes.get(frame.f_code)
                if name is not None:
                    self.culprit = name
                    break
                frame = frame.f_back


def _async_handler_codes(runtime: Runtime) -> dict[CodeType, str]:
    """The code objects of the program's async handlers, by tool name (how the watchdog knows a
    handler's frame on the loop's stack)."""
    import inspect

    from luma.runtime.handlers import _is_async

    codes: dict[CodeType, str] = {}
    for name, handler in runtime.handlers.items():
        if name not in runtime.tools or not _is_async(handler):
            continue
        function = inspect.unwrap(handler)
        if not inspect.isfunction(function):
            function = getattr(type(function), "__call__", None)
        code = getattr(function, "__code__", None)
        if isinstance(code, CodeType):
            codes[code] = name
    return codes
