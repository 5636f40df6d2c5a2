"""``luma batch``: one agent method over many inputs (docs/batch.md).

Each input line is the method's arguments; each output line is the row's outcome, written as the
row finishes: ``{"index": N, "ok": true, "result": ...}`` or
``{"index": N, "ok": false, "error": {"code", "message"}}``. The output is appended to and
fsynced regularly, so a run that stops (Ctrl-C, a crash) leaves a file ``--resume`` continues.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from luma.batch_rows import (choose_agent, ends_with_newline, finished_indices, input_rows,
                             prepare, run_row)
from luma.cli_common import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from luma.cli_parser import _Parser

INTERRUPTED = 130
DEFAULT_MAX_WAIT_S = 300.0
_FSYNC_EVERY_S = 1.0


def batch_parser() -> _Parser:
    parser = _Parser(prog="luma batch", description="Run one agent method over every line of a "
                     "JSON Lines file, writing one result line per input line.")
    parser.add_argument("program", metavar="PROGRAM.luma")
    parser.add_argument("--input", required=True, metavar="FILE",
                        help="JSON Lines: each line is the method's arguments (an object)")
    parser.add_argument("--output", required=True, metavar="FILE",
                        help="JSON Lines: one row per input line, in the order rows finish")
    parser.add_argument("--tool-module", action="append", default=[], metavar="FILE",
                        dest="tool_modules", help="a Python tool module (repeatable)")
    parser.add_argument("--config", metavar="FILE", help="the config file (default: "
                        "luma.config.json beside the program)")
    parser.add_argument("--agent", metavar="NAME", help="the agent (default: the only one)")
    parser.add_argument("--fn", default="run", metavar="NAME",
                        help="the agent's method (default: run)")
    parser.add_argument("--concurrency", type=_positive, default=8, metavar="N",
                        help="rows running at once (default: 8)")
    parser.add_argument("--resume", action="store_true",
                        help="skip the rows already in the output file and append the others")
    parser.add_argument("--fail-fast", action="store_true",
                        help="stop taking new rows after the first failed one")
    parser.add_argument("--model", metavar="NAME", help="the model of an ask that names none")
    parser.add_argument("--progress-every", type=_positive_seconds, default=10.0,
                        metavar="SECONDS", help="a progress line on stderr this often "
                        "(default: 10)")
    parser.add_argument("--max-wait", type=_positive_seconds, default=DEFAULT_MAX_WAIT_S,
                        metavar="SECONDS", help="how long a row waits out a provider's rate "
                        f"limit (HTTP 429) before it fails (default: {DEFAULT_MAX_WAIT_S:g})")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="run the rows in this process (local, the default) or as Ray "
                        "actor calls (ray: pip install 'luma[ray]')")
    parser.add_argument("--ray-address", metavar="ADDR", help="the Ray cluster to run on "
                        "(default: a local Ray instance; with --engine ray)")
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got '{text}'") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


@dataclass
class _Tally:
    total: int = 0
    skipped: int = 0
    done: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    tokens_in: int = 0
    tokens_out: int = 0

    def tokens(self) -> str:
        return (f"{self.tokens_in + self.tokens_out} tokens ({self.tokens_in} in, "
                f"{self.tokens_out} out)")


def batch_command(argv: Sequence[str]) -> int:
    options = batch_parser().parse_checked(argv)
    err = sys.stderr

    def start_error(message: str) -> int:
        err.write(f"luma batch: error: {message}\n")
        return EXIT_USAGE

    output = Path(options.output)
    try:
        rows = list(input_rows(Path(options.input)))
    except OSError as exc:
        return start_error(f"cannot read {options.input}: {exc.strerror or exc}")
    done: set[int] = set()
    if output.exists():
        if not options.resume:
            return start_error(f"{options.output} already exists; add --resume to continue it, "
                               "or choose another --output (it is never overwritten)")
        try:
            done = finished_indices(output)
        except OSError as exc:
            return start_error(f"cannot read {options.output}: {exc.strerror or exc}")
    if options.ray_address is not None and options.engine != "ray":
        return start_error("--ray-address needs --engine ray")
    if options.engine == "ray":
        from luma.batch_ray import ray_missing

        missing = ray_missing()
        if missing is not None:
            return start_error(missing)
    import luma.api as api

    try:
        program = api.load(options.program, tool_modules=options.tool_modules,
                           config=options.config, model=options.model)
    except api.CompileError as exc:
        err.write(exc.rendered if exc.rendered.endswith("\n") else exc.rendered + "\n")
        return EXIT_USAGE
    except api.LoadError as exc:
        for problem in exc.problems:
            err.write(f"luma batch: error: {problem}\n")
        return EXIT_USAGE
    prepare(program, options.concurrency, options.max_wait)
    try:
        agent = choose_agent(program, options.agent, options.fn)
        if isinstance(agent, str):
            return start_error(agent)
        if options.engine == "ray":
            from luma.batch_ray import RayEngine, StartProblem

            try:
                engine = RayEngine(program, options, agent[0])
            except StartProblem as exc:
                return start_error(str(exc))
            program.close()  # the workers load their own; this one was for the checks
        try:
            sink = open(output, "a", encoding="utf-8")
        except OSError as exc:
            return start_error(f"cannot write {options.output}: {exc.strerror or exc}")
        with sink:
            tally = _Tally(total=len(rows), skipped=sum(1 for i, _ in rows if i in done))
            todo = [(i, text) for i, text in rows if i not in done]
            if options.engine == "ray":
                try:
                    engine.start(err)
                except StartProblem as exc:
                    engine.stop()
                    return start_error(str(exc))
                try:
                    interrupted = write_rows(engine.run, todo, sink, output, options, tally, err)
                finally:
                    engine.stop()
            else:
                def run(index: int, text: str) -> Any:
                    return run_row(program, agent[0], options.fn, index, text)

                interrupted = write_rows(run, todo, sink, output, options, tally, err)
    finally:
        program.close()
    return finish(tally, interrupted, err)


def write_rows(start: Any, todo: list[tuple[int, str]], sink: IO[str], output: Path,
               options: argparse.Namespace, tally: _Tally, err: IO[str]) -> bool:
    """Run ``todo`` (``start(index, text)`` → an awaitable of ``(row, tokens_in, tokens_out)``)
    and append the rows to ``sink``; True when a Ctrl-C stopped the batch."""
    if sink.tell() > 0 and not ends_with_newline(output):
        sink.write("\n")  # a row cut short by a crash stays apart from the next one
    return asyncio.run(_run_rows(start, todo, sink, options.concurrency, options.fail_fast,
                                 tally, err, options.progress_every))


def finish(tally: _Tally, interrupted: bool, err: IO[str]) -> int:
    _summary(tally, interrupted, err)
    if interrupted:
        return INTERRUPTED
    return EXIT_FAILED if tally.failed else EXIT_OK


async def _run_rows(start: Any, todo: list[tuple[int, str]], sink: IO[str], concurrency: int,
                    fail_fast: bool, tally: _Tally, err: IO[str], progress_every: float) -> bool:
    """Run the rows; True when a Ctrl-C stopped the batch."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    running: set[asyncio.Task[None]] = set()
    interrupts = [0]
    last_sync = [time.monotonic()]
    began = time.monotonic()
    last_progress = [began]

    bar = _Bar(tally, err) if _on_a_terminal(err) else None

    def on_interrupt() -> None:
        interrupts[0] += 1
        stopping.set()
        if interrupts[0] == 1:
            message = ("luma batch: interrupted: no new rows; waiting for the "
                       f"{len(running)} running (Ctrl-C again to cancel them)")
            if bar is not None:
                bar.say(message)
            else:
                err.write(message + "\n")
        else:
            for task in running:
                task.cancel()

    def write(row: dict[str, Any]) -> None:
        sink.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
        sink.flush()
        now = time.monotonic()
        if now - last_sync[0] >= _FSYNC_EVERY_S:
            os.fsync(sink.fileno())
            last_sync[0] = now
        if bar is not None:
            bar.update(now - began)
        elif now - last_progress[0] >= progress_every:
            last_progress[0] = now
            _progress(tally, now - began, err)

    async def one(index: int, text: str) -> None:
        row, tokens_in, tokens_out = await start(index, text)
        tally.done += 1
        tally.tokens_in += tokens_in
        tally.tokens_out += tokens_out
        if not row["ok"]:
            tally.failed[row["error"]["code"]] += 1
            if fail_fast:
                stopping.set()
        write(row)

    slots = asyncio.Semaphore(concurrency)

    broken: list[BaseException] = []

    def finished(task: asyncio.Task[None]) -> None:
        running.discard(task)
        slots.release()
        if not task.cancelled() and task.exception() is not None:
            broken.append(task.exception())  # type: ignore[arg-type]
            stopping.set()

    with_handler = True
    try:
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
    except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
        with_handler = False
    try:
        for index, text in todo:
            await slots.acquire()
            if stopping.is_set():
                slots.release()
                break
            task = asyncio.ensure_future(one(index, text))
            running.add(task)
            task.add_done_callback(finished)
        while running:
            await asyncio.wait(set(running))
        if broken:
            raise broken[0]  # a bug in luma, not in a row: the command's internal error
    finally:
        if bar is not None:
            bar.stop()
        if with_handler:
            loop.remove_signal_handler(signal.SIGINT)
        sink.flush()
        os.fsync(sink.fileno())
    return interrupts[0] > 0


def _on_a_terminal(err: IO[str]) -> bool:
    try:
        return err.isatty() and os.environ.get("TERM") != "dumb"
    except ValueError:  # a closed stream
        return False


class _Bar:
    """A ``rich`` progress bar on a terminal: rows done / total, rate, time left, failures,
    tokens."""

    def __init__(self, tally: _Tally, err: IO[str]) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeRemainingColumn)

        self._tally = tally
        self._progress = Progress(
            TextColumn("luma batch"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]} rows/s"), TimeRemainingColumn(),
            TextColumn("{task.fields[failed]} failed"), TextColumn("{task.fields[tokens]}"),
            console=Console(file=err, no_color="NO_COLOR" in os.environ), transient=True)
        self._task = self._progress.add_task("rows", total=tally.total - tally.skipped,
                                             rate="0.0", failed=0, tokens=tally.tokens())
        self._progress.start()

    def update(self, elapsed: float) -> None:
        tally = self._tally
        rate = tally.done / elapsed if elapsed > 0 else 0.0
        self._progress.update(self._task, completed=tally.done, rate=f"{rate:.1f}",
                              failed=sum(tally.failed.values()), tokens=tally.tokens())

    def say(self, message: str) -> None:
        self._progress.console.print(message, markup=False, highlight=False)

    def stop(self) -> None:
        self._progress.stop()


def _progress(tally: _Tally, elapsed: float, err: IO[str]) -> None:
    todo = tally.total - tally.skipped
    rate = tally.done / elapsed if elapsed > 0 else 0.0
    eta = f", about {int((todo - tally.done) / rate)} s left" if rate > 0 else ""
    err.write(f"luma batch: {tally.done}/{todo} rows, {sum(tally.failed.values())} failed, "
              f"{rate:.1f} rows/s, {tally.tokens()}{eta}\n")


def _summary(tally: _Tally, interrupted: bool, err: IO[str]) -> None:
    failed = sum(tally.failed.values())
    parts = [f"{tally.done - failed} succeeded", f"{failed} failed"]
    if tally.skipped:
        parts.append(f"{tally.skipped} already done")
    left = tally.total - tally.skipped - tally.done
    if left:
        parts.append(f"{left} not run")
    line = "luma batch: " + ", ".join(parts)
    if tally.failed:
        line += " (" + ", ".join(f"{code}: {count}" for code, count in
                                 sorted(tally.failed.items())) + ")"
    if tally.tokens_in or tally.tokens_out:
        line += "; " + tally.tokens()
    if interrupted or left:
        line += "; continue with --resume"
    err.write(line + "\n")
