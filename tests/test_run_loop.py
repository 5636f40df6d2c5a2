"""The run's event loop: a handler's output, a handler that blocks, stops or outlives the loop,
work left running at exit, and Ctrl-C. The tests run the real ``luma`` command in a child
process (Ctrl-C is a real SIGINT)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from cli_runner import luma
from run_programs import write_program


# ------------------------------------------------------------------ the run's stdout and loop


_ONE_TOOL = """\
    schema Out { v: int }
    tool work() -> Out {
      description: "Do the work."TIMEOUT
    }
    r = 0
    try {
      out = tool work({})
      r = out.v
    } catch e {
      r = e.code
    }
    r
    """


def _one_tool(tmp_path: Path, handler: str, timeout: str = "") -> tuple[str, str]:
    return write_program(tmp_path, _ONE_TOOL.replace("TIMEOUT", timeout and f",\n  timeout: {timeout}"),
                  handler)


def test_what_a_handler_prints_goes_to_stderr_from_any_thread(tmp_path: Path) -> None:
    prog, tools = _one_tool(tmp_path, """\
        import sys, threading

        def work(input):
            print("from the handler")
            t = threading.Thread(target=lambda: print("from its thread"))
            t.start()
            t.join()
            sys.stdout.write("written\\n")
            return {"v": 7}
        """)
    for timeout in ("", "5000"):
        prog, tools = _one_tool(tmp_path, Path(tools).read_text(), timeout)
        r = luma(prog, "--tool-module", tools)
        assert (r.code, r.stdout) == (0, "7\n")
        assert r.stderr == "from the handler\nfrom its thread\nwritten\n"


def test_a_handler_that_closes_stdout_or_stops_the_loop_does_not_break_the_run(
        tmp_path: Path) -> None:
    prog, tools = _one_tool(tmp_path, """\
        import sys

        def work(input):
            sys.stdout.close()
            print("still printing")
            return {"v": 1}
        """)
    r = luma(prog, "--tool-module", tools)
    assert (r.code, r.stdout, r.stderr) == (0, "1\n", "still printing\n")
    prog, tools = _one_tool(tmp_path, """\
        import asyncio

        async def work(input):
            asyncio.get_running_loop().stop()
            await asyncio.sleep(0.05)
            return {"v": 2}
        """)
    r = luma(prog, "--tool-module", tools)
    assert (r.code, r.stdout) == (0, "2\n")
    assert r.stderr == "warning[EVENT_LOOP] a tool handler stopped the event loop; the run went on\n"


_STUBBORN = """\
    import asyncio

    async def work(input):
        while True:
            try:
                await asyncio.sleep(30)
            except BaseException:
                pass
    """


def test_a_timed_out_async_handler_that_ignores_cancellation_does_not_hold_the_exit(
        tmp_path: Path) -> None:
    prog, tools = _one_tool(tmp_path, _STUBBORN, "300")
    started = time.monotonic()
    r = luma(prog, "--tool-module", tools, timeout=20)
    assert time.monotonic() - started < 8
    assert (r.code, r.stdout) == (0, '"TOOL_TIMEOUT"\n')
    assert r.stderr == ("luma: did not wait for 1 unfinished piece of work at exit: tool 'work' "
                        "(an async handler that ignored its cancellation)\n")


def test_a_background_task_that_ignores_cancellation_does_not_hold_the_exit(
        tmp_path: Path) -> None:
    prog, tools = _one_tool(tmp_path, """\
        import asyncio

        async def forever():
            while True:
                try:
                    await asyncio.sleep(30)
                except BaseException:
                    pass

        async def work(input):
            asyncio.get_running_loop().create_task(forever())
            return {"v": 3}
        """)
    started = time.monotonic()
    r = luma(prog, "--tool-module", tools, timeout=20)
    assert time.monotonic() - started < 8
    assert (r.code, r.stdout) == (0, "3\n")
    assert r.stderr == ("luma: did not wait for 1 unfinished piece of work at exit: a task "
                        "running forever() (it ignored its cancellation)\n")


def test_a_timed_out_sync_handler_still_running_is_named_at_exit(tmp_path: Path) -> None:
    prog, tools = _one_tool(tmp_path, """\
        import threading

        def work(input):
            threading.Event().wait(30)
            return {"v": 1}
        """, "200")
    started = time.monotonic()
    r = luma(prog, "--tool-module", tools, timeout=20)
    assert time.monotonic() - started < 8
    assert (r.code, r.stdout) == (0, '"TOOL_TIMEOUT"\n')
    assert r.stderr == ("luma: did not wait for 1 unfinished piece of work at exit: tool 'work' "
                        "(a sync handler still running in its thread)\n")


def test_an_async_handler_that_blocks_the_event_loop_is_named(tmp_path: Path) -> None:
    prog, tools = _one_tool(tmp_path, """\
        import time

        async def work(input):
            time.sleep(1.6)
            return {"v": 4}
        """)
    r = luma(prog, "--tool-module", tools, timeout=20)
    assert (r.code, r.stdout) == (0, "4\n")
    assert re.fullmatch(
        r"warning\[EVENT_LOOP_BLOCKED\] handler 'work' blocked the event loop for 1\.[5-8] s; "
        r"every other call and timeout waited meanwhile\. An async handler must not call "
        r"blocking code: use 'await asyncio\.to_thread\(\.\.\.\)', or write it as a plain def\n",
        r.stderr), r.stderr
    # a short pause is not worth a warning
    prog, tools = _one_tool(tmp_path, "import time\n\nasync def work(input):\n"
                                      "    time.sleep(0.3)\n    return {'v': 5}\n")
    r = luma(prog, "--tool-module", tools, timeout=20)
    assert (r.code, r.stdout, r.stderr) == (0, "5\n", "")


# --------------------------------------------------------------------------------- Ctrl-C


_SAVE = """\
    schema Saved { id: string }
    tool save(request_id: string) -> Saved {
      description: "Save once per request id."
      side_effects: "write"
      idempotent: true
      idempotency_key: request_id
    }
    tool save({ request_id: "r-1" })
    """


def _start(tmp_path: Path, program: str, tools: str, *args: str) -> subprocess.Popen[bytes]:
    prog, tools_path = write_program(tmp_path, program, tools)
    (tmp_path / "luma.config.json").write_text(
        '{"idempotency_store": {"backend": "file", "path": "store.json"}}')
    environ = {k: v for k, v in os.environ.items() if k not in ("LUMA_DEBUG", "NO_COLOR")}
    return subprocess.Popen([sys.executable, "-m", "luma", prog, "--tool-module", tools_path,
                             "--trace", str(tmp_path / "trace.jsonl"), *args],
                            cwd=tmp_path, env=environ, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(path: Path, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_ctrl_c_during_a_sync_handler_says_it_waits_and_stores_nothing(tmp_path: Path) -> None:
    started = tmp_path / "started"
    child = _start(tmp_path, _SAVE, f"""\
        import time

        def save(input):
            open({str(started)!r}, "w").close()
            time.sleep(1.0)
            return {{"id": "saved"}}
        """)
    _wait_for(started)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=20)
    assert child.returncode == 130
    assert out == b""
    assert err.decode() == (
        "luma: interrupted; waiting for tool 'save' to finish (Python cannot stop a running "
        "sync handler); press Ctrl-C again to quit\nluma: interrupted\n")
    store = tmp_path / "store.json"  # the cancelled call stored nothing
    assert not store.exists() or json.loads(store.read_text())["records"] in ({}, {"save": {}})
    events = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert [e["outcome"] for e in events if e["event"] == "tool.call"] == ["cancelled"]


def test_a_second_ctrl_c_quits_without_waiting(tmp_path: Path) -> None:
    started = tmp_path / "started"
    child = _start(tmp_path, _SAVE, f"""\
        import time

        def save(input):
            open({str(started)!r}, "w").close()
            time.sleep(30)
            return {{"id": "saved"}}
        """)
    _wait_for(started)
    child.send_signal(signal.SIGINT)
    time.sleep(0.3)
    began = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=20)
    assert time.monotonic() - began < 5
    assert (child.returncode, out) == (130, b"")
    assert err.decode().endswith("press Ctrl-C again to quit\nluma: interrupted\n")


def test_ctrl_c_during_an_async_handler_ends_the_run_quietly(tmp_path: Path) -> None:
    started = tmp_path / "started"
    for timeout in ("", ",\n  timeout: 60000"):
        program = _SAVE.replace('idempotency_key: request_id',
                                f'idempotency_key: request_id{timeout}')
        child = _start(tmp_path, program, f"""\
            import asyncio

            async def save(input):
                open({str(started)!r}, "w").close()
                await asyncio.sleep(30)
                return {{"id": "saved"}}
            """)
        _wait_for(started)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=20)
        started.unlink()
        assert (child.returncode, out, err.decode()) == (130, b"", "luma: interrupted\n")


def test_a_signal_listener_that_raises_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    prog, tools = _one_tool(tmp_path, """\
        import time

        def work(input, signal):
            def stop():
                raise KeyboardInterrupt()
            signal.add_listener(stop)
            signal.add_listener(lambda: 1 / 0)
            time.sleep(0.5)
            return {"v": 1}
        """, "100")
    r = luma(prog, "--tool-module", tools, timeout=20)
    assert (r.code, r.stdout) == (0, '"TOOL_TIMEOUT"\n')
    assert r.stderr == ("A Signal listener raised an exception: KeyboardInterrupt\n"
                        "A Signal listener raised an exception: ZeroDivisionError: division by "
                        "zero\n")


def test_a_failed_background_task_is_one_warning_line_not_a_traceback(tmp_path: Path) -> None:
    prog, tools = _one_tool(tmp_path, """\
        import asyncio

        async def boom():
            raise ValueError("background boom")

        async def work(input):
            asyncio.get_running_loop().create_task(boom())
            await asyncio.sleep(0.05)
            return {"v": 6}
        """)
    r = luma(prog, "--tool-module", tools, timeout=20)
    assert (r.code, r.stdout) == (0, "6\n")
    assert r.stderr == ("warning[ASYNC_TASK] Task exception was never retrieved (boom()): "
                        "ValueError: background boom\n")


def test_ctrl_c_during_a_sync_handler_in_its_thread_ends_at_once_and_names_it(
        tmp_path: Path) -> None:
    started = tmp_path / "started"
    program = _SAVE.replace("idempotency_key: request_id",
                            "idempotency_key: request_id,\n  timeout: 60000")
    child = _start(tmp_path, program, f"""\
        import threading

        def save(input):
            open({str(started)!r}, "w").close()
            threading.Event().wait(60)
            return {{"id": "saved"}}
        """)
    _wait_for(started)
    began = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=20)
    assert time.monotonic() - began < 10  # not the handler's 60 s
    assert (child.returncode, out) == (130, b"")
    assert err.decode() == ("luma: interrupted\nluma: did not wait for 1 unfinished piece of "
                            "work at exit: tool 'save' (a sync handler still running in its "
                            "thread)\n")
