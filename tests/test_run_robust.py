"""Bad input and misbehaving handlers at run time: a located Luma error, never a traceback, and
a run that ends. Every test runs the real ``luma`` command in a child process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from cli_runner import luma


def _write(tmp_path: Path, program: str, tools: str = "") -> tuple[str, str]:
    (tmp_path / "prog.luma").write_text(textwrap.dedent(program), encoding="utf-8")
    (tmp_path / "tools.py").write_text(textwrap.dedent(tools), encoding="utf-8")
    return str(tmp_path / "prog.luma"), str(tmp_path / "tools.py")


def _clean(stderr: str) -> None:
    assert "Traceback" not in stderr
    assert "internal error" not in stderr


# ------------------------------------------------------------------------------ fn parameters

def test_a_fn_parameter_of_a_schema_type_is_validated_against_that_schema(tmp_path: Path) -> None:
    prog, _ = _write(tmp_path, """\
        schema Item { sku: string }
        schema Order { id: string, qty: int, items?: Item[] }
        agent Shop {
          fn run(order: Order) -> int {
            order.qty
          }
        }
        """)
    r = luma(prog, "--input", '{"order": {"id": "o-1", "qty": 3, "items": [{"sku": "a"}]}}')
    assert (r.code, r.stdout, r.stderr) == (0, "3\n", "")
    r = luma(prog, "--input", '{"order": {"id": "o-1", "qty": 3, "items": [{"sku": 1}]}}')
    assert r.code == 1
    assert r.stderr.splitlines()[0] == \
        "error[ARGUMENT_INVALID]: Shop.run.input.order.items[0].sku: expected string, got int"
    _clean(r.stderr)


# ------------------------------------------------------------------ the JSON boundary of output

_ANY_TOOL = """\
    schema Out { v: any }
    tool produce() -> Out {
      description: "Return what the handler makes."
    }
    r = tool produce({})
    "got {r.v}"
    """

_NOT_JSON = {
    "a set": ("{1, 2}", "produce.output.v: a Python set is not a JSON value"),
    "bytes": ("b'x'", "produce.output.v: a Python bytes is not a JSON value"),
    "nan": ("float('nan')", "produce.output.v: nan is not a JSON number"),
    "infinity": ("[1, float('-inf')]", "produce.output.v[1]: -inf is not a JSON number"),
    "a datetime": ("datetime.datetime(2026, 1, 1)",
                   "produce.output.v: a Python datetime.datetime is not a JSON value"),
    "a decimal": ("decimal.Decimal('1.5')",
                  "produce.output.v: a Python decimal.Decimal is not a JSON value"),
    "a uuid": ("uuid.UUID(int=1)", "produce.output.v: a Python uuid.UUID is not a JSON value"),
    "an object": ("Thing()", "produce.output.v: a Python tools.Thing is not a JSON value"),
    "a circular dict": ("circular()",
                        "produce.output.v.again.self: the value contains itself (a circular "
                        "reference)"),
    "a lone surrogate": ("{'text': '\\ud800'}",
                         "produce.output.v.text: the string is not valid Unicode (it holds a "
                         "lone surrogate)"),
    "an int beyond the range of numbers": ("[1, -10 ** 400]",
                                           "produce.output.v[1]: an int of about 401 digits is "
                                           "beyond ±1.8e308, the range of a JSON number"),
    "a key that is not a string": ("{1: 'one'}",
                                   "produce.output.v: the key 1 is a Python int, not a string"),
    "too deep": ("deep(500)", "produce.output.v[0][0][0][0][0]...(191 more)...[0][0][0]: "
                              "the value nests deeper than 200 levels"),
}

_NOT_JSON_TOOLS = """\
    import datetime, decimal, uuid

    SHARED = [1]

    class Thing:
        pass

    def circular():
        d = {}
        d["self"] = d
        return {"again": d}

    def deep(n):
        v = []
        for _ in range(n):
            v = [v]
        return v

    def produce(input):
        return {"v": VALUE}
    """


def test_a_handler_result_that_is_not_json_is_tool_output_invalid_naming_path_and_type(
        tmp_path: Path) -> None:
    for what, (value, message) in _NOT_JSON.items():
        prog, tools = _write(tmp_path, _ANY_TOOL, _NOT_JSON_TOOLS.replace("VALUE", value))
        r = luma(prog, "--tool-module", tools)
        assert r.code == 1, (what, r.stdout, r.stderr)
        assert r.stderr.splitlines()[0] == f"error[TOOL_OUTPUT_INVALID]: {message}", what
        _clean(r.stderr)


def test_json_values_of_every_kind_still_pass_an_any_field(tmp_path: Path) -> None:
    prog, tools = _write(tmp_path, _ANY_TOOL, _NOT_JSON_TOOLS.replace(
        "VALUE", "{'a': [1, 2.5, None, True, 'é'], 'b': {}, 'shared': [SHARED, SHARED]}"
    ))
    r = luma(prog, "--tool-module", tools)
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout) == 'got {"a":[1,2.5,null,true,"é"],"b":{},"shared":[[1],[1]]}'


def test_a_typed_error_that_is_not_json_or_has_no_string_code_is_tool_error_invalid(
        tmp_path: Path) -> None:
    program = """\
        schema Out { v: int }
        tool produce() -> Out {
          description: "Fail."
        }
        try {
          tool produce({})
        } catch e {
          e
        }
        """
    cases = {
        "LumaToolError(code=123, message=None)":
            "produce.error.code: expected a non-empty string, got int",
        "LumaToolError(code='BAD', message=b'x')":
            "produce.error.message: expected string, got bytes",
        "LumaToolError(code='BAD', details={'at': {1, 2}})":
            "produce.error.details.at: a Python set is not a JSON value",
        "LumaToolError(code='BAD', status=float('nan'))":
            "produce.error.status: nan is not a JSON number",
        "LumaToolError(code='BAD', message='\\ud800')":
            "produce.error.message: the string is not valid Unicode (it holds a lone surrogate)",
    }
    for raised, message in cases.items():
        prog, tools = _write(tmp_path, program, f"""\
            from luma import LumaToolError

            def produce(input):
                raise {raised}
            """)
        r = luma(prog, "--tool-module", tools)
        assert r.code == 0, (raised, r.stderr)
        assert json.loads(r.stdout) == {"code": "TOOL_ERROR_INVALID", "retryable": False,
                                        "tool": "produce",
                                        "message": f"[TOOL_ERROR_INVALID] {message}"}, raised
        _clean(r.stderr)


def test_nan_and_infinity_in_the_arguments_are_bad_json(tmp_path: Path) -> None:
    prog, _ = _write(tmp_path, """\
        agent A {
          fn run(x: any) -> any {
            x
          }
        }
        """)
    r = luma(prog, "--input", '{"x": NaN}')
    assert (r.code, r.stderr) == (2, "error: --input is not valid JSON: NaN is not a JSON "
                                     "number\n")
    r = luma(prog, "--input", '{"x": 1e999}')
    assert (r.code, r.stderr) == (2, "error: --input is not valid JSON: 1e999 is not a finite "
                                     "number\n")
    r = luma(prog, "--arg", "x=-Infinity")
    assert (r.code, r.stderr) == (2, "error: --arg x: -Infinity is not a JSON number\n")
    r = luma(prog, "--arg", "x=[1e999]")
    assert (r.code, r.stderr) == (2, "error: --arg x: 1e999 is not a finite number\n")
    r = luma(prog, "--arg", "x=" + "9" * 5000)
    assert (r.code, r.stderr) == (2, "error: --arg x: an int of 5000 digits is beyond ±1.8e308, "
                                     "the range of a JSON number\n")
    r = luma(prog, "--arg", "x=[" + "9" * 400 + "]")
    assert (r.code, r.stderr) == (2, "error: --arg x: an int of 400 digits is beyond ±1.8e308, "
                                     "the range of a JSON number\n")
    r = luma(prog, "--arg", "x=NaNa")  # not JSON at all: the text itself
    assert (r.code, json.loads(r.stdout)) == (0, "NaNa")
    deep = tmp_path / "deep.json"
    deep.write_text('{"x": ' + "[" * 100000 + "]" * 100000 + "}")
    r = luma(prog, "--input", f"@{deep}")
    assert r.code == 2
    assert r.stderr == "error: --input is not valid JSON: the value nests deeper than 200 levels\n"
    r = luma(prog, "--arg", "x=" + "[" * 300 + "]" * 300)
    assert r.stderr == "error: --arg x: the value nests deeper than 200 levels\n"


# --------------------------------------------------------------- what a handler raises or does

_RAISES = """\
    schema Out { v: int }
    tool fail() -> Out {
      description: "Fail."
    }
    try {
      tool fail({})
    } catch e {
      e
    }
    """


def test_any_base_exception_from_a_handler_is_tool_failed(tmp_path: Path) -> None:
    cases = {
        "def fail(input):\n    raise asyncio.CancelledError()":
            ("Tool 'fail' failed: CancelledError", "CancelledError"),
        "async def fail(input):\n    raise asyncio.CancelledError()":
            ("Tool 'fail' failed: CancelledError", "CancelledError"),
        "def fail(input):\n    raise GeneratorExit('closed')":
            ("Tool 'fail' failed: GeneratorExit: closed", "GeneratorExit"),
        "def fail(input):\n    raise KeyboardInterrupt()":
            ("Tool 'fail' failed: the handler raised KeyboardInterrupt", "KeyboardInterrupt"),
        "async def fail(input):\n    raise KeyboardInterrupt()":
            ("Tool 'fail' failed: the handler raised KeyboardInterrupt", "KeyboardInterrupt"),
        "class Odd(BaseException):\n    pass\n\ndef fail(input):\n    raise Odd('strange')":
            ("Tool 'fail' failed: Odd: strange", "Odd"),
        "class Mute(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\n\n"
        "def fail(input):\n    raise Mute()":
            ("Tool 'fail' failed: Mute (its message could not be read)", "Mute"),
        "def fail(input):\n    raise ValueError('bad \\ud800 text')":
            ("Tool 'fail' failed: bad \\ud800 text", "ValueError"),
    }
    for timeout in ("", ",\n  timeout: 5000"):
        program = _RAISES.replace('description: "Fail."', f'description: "Fail."{timeout}')
        for handler, (message, exception) in cases.items():
            prog, tools = _write(tmp_path, program, f"import asyncio\n\n{handler}\n")
            r = luma(prog, "--tool-module", tools)
            assert r.code == 0, (handler, timeout, r.stderr)
            assert json.loads(r.stdout) == {"code": "TOOL_FAILED", "message": message,
                                            "retryable": False, "tool": "fail",
                                            "details": {"exception": exception}}, handler
            assert r.stderr == "", (handler, timeout)


# ---------------------------------------------------------------------------- numeric limits

def test_huge_retry_counts_cost_nothing_until_used(tmp_path: Path) -> None:
    for retries in ("1100", "100000000", "9007199254740993"):
        prog, tools = _write(tmp_path, f"""\
            schema Out {{ attempts: int }}
            tool flaky() -> Out {{
              description: "Fails twice, then works.",
              retries: {retries},
              retry_backoff: "exponential",
              retry_delay: 1
            }}
            tool flaky({{}})
            """, """\
            from luma import LumaToolError

            calls = []

            def flaky(input):
                calls.append(1)
                if len(calls) < 3:
                    raise LumaToolError(code="BUSY", message="busy", retryable=True)
                return {"attempts": len(calls)}
            """)
        r = luma(prog, "--tool-module", tools, timeout=20)
        assert (r.code, r.stderr) == (0, ""), retries
        assert json.loads(r.stdout) == {"attempts": 3}


def test_a_timeout_and_a_delay_too_large_for_a_float_are_no_crash(tmp_path: Path) -> None:
    huge = "1" + "0" * 400
    prog, tools = _write(tmp_path, f"""\
        schema Out {{ attempts: int }}
        tool flaky() -> Out {{
          description: "Fails once, then works.",
          timeout: {huge},
          retries: 1,
          retry_backoff: "none",
          retry_delay: {huge}
        }}
        tool flaky({{}})
        """, """\
        from luma import LumaToolError

        calls = []

        def flaky(input):
            calls.append(1)
            if len(calls) < 2:
                raise LumaToolError(code="BUSY", message="busy", retryable=True)
            return {"attempts": len(calls)}
        """)
    r = luma(prog, "--tool-module", tools, timeout=20)
    assert (r.code, r.stdout, r.stderr) == (0, '{\n  "attempts": 2\n}\n', "")


def test_the_exponential_backoff_stops_growing_at_an_hour() -> None:
    from luma.runtime.pipeline import MAX_RETRY_DELAY_S, retry_delay
    from luma.runtime.settings import ToolSettings

    settings = ToolSettings("t", retry_delay_ms=100, retry_backoff="exponential")
    assert [retry_delay(settings, n) for n in (1, 2, 3, 4)] == [0.1, 0.2, 0.4, 0.8]
    assert retry_delay(settings, 1100) == MAX_RETRY_DELAY_S == 3600.0
    assert retry_delay(settings, 9007199254740993) == 3600.0
    fixed = ToolSettings("t", retry_delay_ms=10 ** 400, retry_backoff="fixed")
    assert retry_delay(fixed, 1) == 3600.0


def _run_top(tmp_path: Path, program: str) -> tuple[int, str, str]:
    prog, _ = _write(tmp_path, program)
    r = luma(prog)
    _clean(r.stderr)
    return r.code, r.stdout, r.stderr.splitlines()[0] if r.stderr else ""


def test_arithmetic_that_leaves_the_range_of_numbers_is_arithmetic_overflow(
        tmp_path: Path) -> None:
    assert _run_top(tmp_path, "x = 1e308 * 10\nx\n") == (
        1, "", "error[ARITHMETIC_OVERFLOW]: 1e+308 * 10 overflows: a number must stay within "
               "±1.8e308")
    assert _run_top(tmp_path, "0 - 1.7e308 - 1.7e308\n")[2] == (
        "error[ARITHMETIC_OVERFLOW]: -1.7e+308 - 1.7e+308 overflows: a number must stay within "
        "±1.8e308")
    assert _run_top(tmp_path, "1e308 / 0.5\n")[2].startswith("error[ARITHMETIC_OVERFLOW]: ")
    # an int that keeps doubling stops at the same bound instead of eating memory
    code, _, line = _run_top(tmp_path, "n = 1\nfor i in range(2000) {\n  n = n * 2\n}\nn\n")
    assert (code, line.split(" overflows")[0][:28]) == (1, "error[ARITHMETIC_OVERFLOW]: ")
    assert line.endswith("* 2 overflows: a number must stay within ±1.8e308")
    assert _run_top(tmp_path, 'int("1' + "0" * 400 + '")\n')[2] == (
        'error[ARITHMETIC_OVERFLOW]: int() cannot convert "1' + "0" * 75 + '...: a number '
        'must stay within ±1.8e308')
    # exact int division stays exact; big ints within the bound are fine
    assert _run_top(tmp_path, "(9007199254740993 * 3) / 3\n") == (0, "9007199254740993\n", "")


def test_lists_and_strings_the_program_builds_have_a_documented_limit(tmp_path: Path) -> None:
    assert _run_top(tmp_path, "range(100000000000000000000)\n")[2] == (
        "error[LIMIT]: range() would make a list of 100000000000000000000 items; a list the "
        "program builds holds at most 1,000,000")
    assert _run_top(tmp_path, "range(5, 100000000005)\n")[2] == (
        "error[LIMIT]: range() would make a list of 100000000000 items; a list the program "
        "builds holds at most 1,000,000")
    assert _run_top(tmp_path, "len(range(-10000000000, -9999999998))\n") == (0, "2\n", "")
    doubling = "x = [1]\nfor i in range(40) {\n  x = x + x\n}\nlen(x)\n"
    assert _run_top(tmp_path, doubling)[2] == (
        "error[LIMIT]: '+' would make a list of 1048576 items; a list the program builds holds "
        "at most 1,000,000")
    text = 's = "ab"\nfor i in range(40) {\n  s = "{s}{s}"\n}\nlen(s)\n'
    assert _run_top(tmp_path, text)[2] == (
        "error[LIMIT]: the string would be 16777216 characters long; a string the program "
        "builds holds at most 10,000,000")
    text = 's = "ab"\nfor i in range(40) {\n  s = s + s\n}\nlen(s)\n'
    assert _run_top(tmp_path, text)[2].startswith("error[LIMIT]: the string would be 16777216 ")


def test_unbounded_recursion_is_call_depth_not_a_python_recursion_error(tmp_path: Path) -> None:
    prog, _ = _write(tmp_path, """\
        agent A {
          fn f(n: int) -> int {
            return 1 + (((f(n + 1) * 2) - 1) + 0) * 1
          }
          fn run() -> int {
            f(0)
          }
        }
        """)
    r = luma(prog)
    assert r.code == 1
    assert r.stderr.splitlines()[:2] == [
        "error[CALL_DEPTH]: A.f: calls nested deeper than 200 levels (unbounded recursion?)",
        f"  --> {prog}:3:5"]
    _clean(r.stderr)
    # 200 levels, the most there may be, run to the end
    prog, _ = _write(tmp_path, """\
        agent A {
          fn f(n: int) -> int {
            if n >= 199 {
              return n
            }
            return 1 + (((f(n + 1) * 1) - 1) + 0) * 1
          }
          fn run() -> int {
            f(0)
          }
        }
        """)
    r = luma(prog)
    assert (r.code, r.stdout, r.stderr) == (0, "199\n", "")


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
    return _write(tmp_path, _ONE_TOOL.replace("TIMEOUT", timeout and f",\n  timeout: {timeout}"),
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
    prog, tools_path = _write(tmp_path, program, tools)
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


def test_the_json_check_tells_a_cycle_from_a_shared_value() -> None:
    from luma.runtime.values import json_problem

    shared = [1]
    assert json_problem({"a": shared, "b": [shared, {"c": shared}]}) is None
    inner: list[object] = []
    inner.append([inner])
    assert json_problem({"k": inner}) == ("k[0][0]", "the value contains itself (a circular "
                                                     "reference)")
    wide: list[object] = [1]
    for _ in range(60):  # 2**60 paths through one shared list: walked once
        wide = [wide, wide]
    assert json_problem(wide) is None
    assert json_problem({"a b": {"x": 1e400}}) == ('["a b"].x', "inf is not a JSON number")


def test_the_result_is_utf_8_whatever_the_locale(tmp_path: Path) -> None:
    prog, _ = _write(tmp_path, '"café ✓"\n')
    r = luma(prog, env={"PYTHONIOENCODING": "latin-1", "LC_ALL": "C"})
    assert (r.code, r.stderr) == (0, "")
    assert r.stdout_bytes == '"café ✓"\n'.encode()


def test_deep_values_the_program_builds_compare_and_render(tmp_path: Path) -> None:
    build = "x = []\nfor i in range(3000) {\n  x = [x]\n}\n"
    assert _run_top(tmp_path, build + "y = []\nfor i in range(3000) {\n  y = [y]\n}\nx == y\n") \
        == (0, "true\n", "")
    assert _run_top(tmp_path, build + 'len("{x}")\n') == (0, "6002\n", "")
    assert _run_top(tmp_path, build + "x\n")[2] == (
        "error[RESULT_INVALID]: the program's result is not a JSON value at "
        "[0][0][0][0][0][0]...(191 more)...[0][0][0]: the value nests deeper than 200 levels")


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


def test_rendering_a_value_that_is_not_json_is_type_invalid_not_a_crash() -> None:
    from luma.runtime.errors import LumaError
    from luma.runtime.values import json_text, render

    for value, message in ((float("nan"), "cannot write the value as JSON: nan is not a JSON "
                                          "number"),
                           ({"when": {1, 2}}, "cannot write the value as JSON at when: a Python "
                                              "set is not a JSON value")):
        for write in (render, json_text):
            try:
                write(value)
            except LumaError as err:
                assert (err.code, err.message) == ("TYPE_INVALID", message)
            else:
                raise AssertionError(f"{write.__name__}({value!r}) did not fail")
    assert render({"a": [1, "é"]}) == '{"a":[1,"é"]}'


def test_subclasses_of_json_types_come_out_as_plain_values(tmp_path: Path) -> None:
    prog, tools = _write(tmp_path, """\
        schema Out { kind: string, n: int, x: float, meta: any }
        tool produce() -> Out {
          description: "Return enum members and friends."
        }
        r = tool produce({})
        { sum: r.n + 1, half: r.x / 2, kind: "{r.kind}!", same: r.kind == "big", meta: r.meta }
        """, """\
        import collections, enum

        class Kind(enum.StrEnum):
            BIG = "big"

        class Level(enum.IntEnum):
            HIGH = 3

        class Ratio(float):
            pass

        def produce(input):
            return collections.OrderedDict(kind=Kind.BIG, n=Level.HIGH, x=Ratio(5.0),
                                           meta=[Level.HIGH])
        """)
    r = luma(prog, "--tool-module", tools)
    assert (r.code, r.stderr) == (0, "")
    assert json.loads(r.stdout) == {"sum": 4, "half": 2.5, "kind": "big!", "same": True,
                                    "meta": [3]}


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
