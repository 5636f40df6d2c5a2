"""``luma batch --engine ray``: the rows as calls of Ray actors, one actor per worker, each
holding one loaded program (docs/batch.md). The driver — the ``luma batch`` process — reads the
input, keeps at most ``--concurrency`` rows in flight, writes every row to the output as it
comes back, and runs again a row whose worker died (a restarted worker loads the program
again). The program's folder travels to the workers as Ray's ``working_dir``."""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
import time
from pathlib import Path
from typing import Any

RAY_MISSING = "--engine ray needs Ray, an optional extra: pip install 'luma[ray]'"
BATCH_WORKER_LOST = "BATCH_WORKER_LOST"
WORKER_RETRIES = 3
"""How many times a row runs again after its worker died, before it is an error row."""
UNAVAILABLE_WAIT_S = 120.0
"""How long a row waits for a worker that Ray reports as restarting."""
SHARED_BACKENDS = ("postgres", "redis")


class StartProblem(Exception):
    """A reason the Ray batch cannot start: a one-line start error."""


def ray_missing() -> str | None:
    """The start error when Ray cannot be imported."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return RAY_MISSING
    return None


def store_problem(program: Any) -> str | None:
    """The workers are separate processes, often on separate machines: the idempotency records
    of one must be seen by all, so a program with an idempotent tool needs a shared store."""
    from luma.runtime.settings import any_idempotent

    if not any_idempotent(program._program.tools):
        return None
    config = getattr(program.config, "idempotency_store", None)
    backend = getattr(config, "backend", None) or "memory"
    if backend in SHARED_BACKENDS:
        return None
    return (f"--engine ray needs a shared idempotency store: the program has idempotent tools "
            f"and its store is '{backend}', which each worker would keep on its own; set "
            "idempotency_store.backend to 'postgres' or 'redis' in the config")


class RayEngine:
    """Starts the workers, runs rows on them and stops them; see the module docstring."""

    def __init__(self, program: Any, options: argparse.Namespace, agent: str) -> None:
        problem = store_problem(program)
        if problem is not None:
            raise StartProblem(problem)
        self.options = options
        self.agent = agent
        self.folder = Path(program.path).resolve().parent
        self.program_file = self._inside(options.program, "the program")
        self.tool_modules = [self._inside(m, "the tool module") for m in options.tool_modules]
        self.config = self._inside(options.config, "the config") if options.config else None
        self.actors: list[Any] = []
        self.in_flight: list[int] = []
        self.err: Any = sys.stderr
        self._stdout: Any = None

    def _inside(self, path: str, what: str) -> str:
        """``path`` relative to the program's folder, the worker's working directory."""
        full = Path(path).resolve()
        try:
            return str(full.relative_to(self.folder))
        except ValueError:
            raise StartProblem(f"{what} {path} is outside the program's folder {self.folder}, "
                               "the folder that travels to the Ray workers; move it into that "
                               "folder") from None

    def start(self, err: Any) -> None:
        import logging

        import ray

        # Ray's own warnings (token authentication, a busy node) are not the batch's output
        logging.getLogger("ray").addHandler(logging.NullHandler())

        options = self.options
        self.err = err
        # Ray prints its workers' deaths to stdout, which is no part of a batch's output: the
        # batch says it itself, on stderr, in one line
        self._stdout, sys.stdout = sys.stdout, io.StringIO()
        runtime_env = {"working_dir": str(self.folder)}
        try:
            if options.ray_address is None:
                ray.init(num_cpus=min(os.cpu_count() or 1, options.concurrency),
                         runtime_env=runtime_env, include_dashboard=False,
                         log_to_driver=False, configure_logging=False)
            elif options.ray_address.startswith("ray://"):  # Ray Client takes fewer options
                ray.init(address=options.ray_address, runtime_env=runtime_env)
            else:
                ray.init(address=options.ray_address, runtime_env=runtime_env,
                         log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise StartProblem(f"cannot start Ray at {options.ray_address or 'this machine'}: "
                               f"{' '.join(str(exc).split())}") from None
        api: Any = ray  # Ray's stubs do not cover these calls
        cpus = int(api.cluster_resources().get("CPU", 1))
        count = max(1, min(cpus, options.concurrency))
        per_actor = -(-options.concurrency // count)
        # one CPU each, so one worker per CPU of the cluster; a dead one is restarted (its
        # rows are run again by the driver, not by Ray)
        worker = api.remote(_Worker).options(num_cpus=1, max_restarts=-1, max_task_retries=0,
                                             max_concurrency=per_actor)
        self.actors = [worker.remote(self.program_file, self.tool_modules, self.config,
                                     options.model, per_actor, options.max_wait)
                       for _ in range(count)]
        self.in_flight = [0] * count
        try:
            ray.get([actor.ready.remote() for actor in self.actors])
        except ray.exceptions.RayError as exc:  # the program did not load on a worker
            self.stop()
            reason = " ".join(str(exc).split())[:300]
            raise StartProblem(f"a Ray worker could not load the program: {reason}") from None

    async def run(self, index: int, text: str) -> tuple[dict[str, Any], int, int]:
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        deaths = 0
        unavailable_since: float | None = None
        while True:
            slot = self.in_flight.index(min(self.in_flight))
            self.in_flight[slot] += 1
            ref = self.actors[slot].run.remote(self.agent, self.options.fn, index, text)
            try:
                row: tuple[dict[str, Any], int, int] = await ref
                return row
            except ActorUnavailableError as exc:
                # the worker is restarting (or its connection broke): wait, then run the row
                # again, as long as it comes back within UNAVAILABLE_WAIT_S
                self._say_lost(index, deaths == 0 and unavailable_since is None)
                now = time.monotonic()
                unavailable_since = now if unavailable_since is None else unavailable_since
                if now - unavailable_since > UNAVAILABLE_WAIT_S:
                    return _lost_row(index, exc)
                await asyncio.sleep(0.5)
            except RayActorError as exc:  # the worker died with the row; Ray restarts it
                self._say_lost(index, deaths == 0 and unavailable_since is None)
                deaths += 1
                if deaths > WORKER_RETRIES:
                    return _lost_row(index, exc)
            except asyncio.CancelledError:
                ray.cancel(ref)
                raise
            finally:
                self.in_flight[slot] -= 1

    def _say_lost(self, index: int, first: bool) -> None:
        sys.stdout.seek(0)
        sys.stdout.truncate()
        if first:
            self.err.write(f"luma batch: the Ray worker running input line {index + 1} died; "
                           "the row runs again\n")

    def stop(self) -> None:
        import ray

        for actor in self.actors:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001 - a worker already gone
                pass
        self.actors = []
        ray.shutdown()
        if self._stdout is not None:
            sys.stdout, self._stdout = self._stdout, None


def _lost_row(index: int, exc: BaseException) -> tuple[dict[str, Any], int, int]:
    return {"index": index, "ok": False, "error": {
        "code": BATCH_WORKER_LOST,
        "message": f"input line {index + 1}: the Ray workers running the row kept dying "
                   f"({_reason(exc)})"}}, 0, 0


def _reason(exc: BaseException) -> str:
    """The first line of Ray's message about a lost worker, shortened."""
    text = " ".join(str(exc).split("\n")[0].split())
    return text if len(text) <= 160 else text[:157] + "..."


class _Worker:
    """One Ray actor: the program loaded once (its tool modules imported once), the rows run
    on it concurrently on the actor's event loop."""

    def __init__(self, program: str, tool_modules: list[str], config: str | None,
                 model: str | None, concurrency: int, max_wait: float) -> None:
        import luma.api as api
        from luma.batch_rows import prepare

        try:
            self.program = api.load(program, tool_modules=tool_modules, config=config,
                                    model=model)
        except api.CompileError as exc:
            raise StartProblem(exc.rendered.strip().splitlines()[0]) from None
        except api.LoadError as exc:
            raise StartProblem("; ".join(exc.problems)) from None
        prepare(self.program, concurrency, max_wait)

    def ready(self) -> int:
        return os.getpid()

    async def run(self, agent: str, fn: str, index: int,
                  text: str) -> tuple[dict[str, Any], int, int]:
        from luma.batch_rows import run_row

        return await run_row(self.program, agent, fn, index, text)
