"""Bad values at run time: what a handler returns or raises, the command line's arguments, the
numbers and sizes a program makes. Each is a located Luma error, never a traceback. The tests run
the real ``luma`` command in a child process."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runner import luma
from run_programs import assert_no_traceback, write_program


# ------------------------------------------------------------------------------ fn parameters


def test_a_fn_parameter_of_a_schema_type_is_validated_against_that_schema(tmp_path: Path) -> None:
    prog, _ = write_program(tmp_path, """\
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
    assert r.code == 2  # arguments that do not fit the method are a bad command line
    assert r.stderr.splitlines()[0] == \
        "error[ARGUMENT_INVALID]: Shop.run.input.order.items[0].sku: expected string, got int"
    assert_no_traceback(r.stderr)


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
        prog, tools = write_program(tmp_path, _ANY_TOOL, _NOT_JSON_TOOLS.replace("VALUE", value))
        r = luma(prog, "--tool-module", tools)
        assert r.code == 1, (what, r.stdout, r.stderr)
        assert r.stderr.splitlines()[0] == f"error[TOOL_OUTPUT_INVALID]: {message}", what
        assert_no_traceback(r.stderr)


def test_json_values_of_every_kind_still_pass_an_any_field(tmp_path: Path) -> None:
    prog, tools = write_program(tmp_path, _ANY_TOOL, _NOT_JSON_TOOLS.replace(
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
        prog, tools = write_program(tmp_path, program, f"""\
            from luma import LumaToolError

            def produce(input):
                raise {raised}
            """)
        r = luma(prog, "--tool-module", tools)
        assert r.code == 0, (raised, r.stderr)
        assert json.loads(r.stdout) == {"code": "TOOL_ERROR_INVALID", "retryable": False,
                                        "tool": "produce",
                                        "message": f"[TOOL_ERROR_INVALID] {message}"}, raised
        assert_no_traceback(r.stderr)


def test_nan_and_infinity_in_the_arguments_are_bad_json(tmp_path: Path) -> None:
    prog, _ = write_program(tmp_path, """\
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
            prog, tools = write_program(tmp_path, program, f"import asyncio\n\n{handler}\n")
            r = luma(prog, "--tool-module", tools)
            assert r.code == 0, (handler, timeout, r.stderr)
            assert json.loads(r.stdout) == {"code": "TOOL_FAILED", "message": message,
                                            "retryable": False, "tool": "fail",
                                            "details": {"exception": exception}}, handler
            assert r.stderr == "", (handler, timeout)


# ---------------------------------------------------------------------------- numeric limits


def test_retry_counts_timeouts_and_delays_have_a_static_limit(tmp_path: Path) -> None:
    """The checker refuses what no run could use (docs/language.md "Limits"); the runtime still
    works delays out one retry at a time and caps them (the unit tests below)."""
    prog, tools = write_program(tmp_path, """\
        schema Out { attempts: int }
        tool flaky() -> Out {
          description: "Fails twice, then works.",
          retries: 9007199254740991,
          timeout: 10000000000000,
          retry_delay: 10000000000000
        }
        tool flaky({})
        """, "def flaky(input):\n    return {'attempts': 1}\n")
    r = luma(prog, "--tool-module", tools, timeout=20)
    assert r.code == 2 and r.stdout == ""
    assert [line.split(": ", 1)[1] for line in r.stderr.splitlines() if "error[" in line] == [
        "error[E009]: 'retries' of tool 'flaky' must be at most 100, not 9007199254740991.",
        "error[E009]: 'timeout' of tool 'flaky' must be at most 86400000 milliseconds, not "
        "10000000000000.",
        "error[E009]: 'retry_delay' of tool 'flaky' must be at most 3600000 milliseconds, not "
        "10000000000000."]
    assert_no_traceback(r.stderr)


def test_the_most_retries_cost_nothing_until_used(tmp_path: Path) -> None:
    prog, tools = write_program(tmp_path, """\
        schema Out { attempts: int }
        tool flaky() -> Out {
          description: "Fails twice, then works.",
          retries: 100,
          retry_backoff: "exponential",
          retry_delay: 1
        }
        tool flaky({})
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
    assert (r.code, r.stderr) == (0, "")
    assert json.loads(r.stdout) == {"attempts": 3}


def test_a_timeout_too_large_for_a_float_is_no_crash() -> None:
    from luma.runtime.pipeline import _seconds

    assert _seconds(10 ** 400) == _seconds(10 ** 20) > 3e10  # a thousand years, not inf
    assert _seconds(1500) == 1.5


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
    prog, _ = write_program(tmp_path, program)
    r = luma(prog)
    assert_no_traceback(r.stderr)
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
    # an int just beyond the largest float, which could not be mixed with a float
    code, _, line = _run_top(
        tmp_path, "n = 1\nfor i in range(1023) {\n  n = n * 2\n}\nm = n + (n - 1)\nm + 0.5\n")
    assert (code, line.split(":")[0]) == (1, "error[ARITHMETIC_OVERFLOW]"), line
    assert line.endswith("overflows: a number must stay within ±1.8e308")
    # exact int division stays exact; big ints within the bound are fine
    assert _run_top(tmp_path, "((9007199254740991 + 2) * 3) / 3\n") == (
        0, "9007199254740993\n", "")


def test_lists_and_strings_the_program_builds_have_a_documented_limit(tmp_path: Path) -> None:
    assert _run_top(tmp_path, "range(9007199254740991 * 100)\n")[2] == (
        "error[LIMIT]: range() would make a list of 900719925474099100 items; a list the "
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
    prog, _ = write_program(tmp_path, """\
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
    assert_no_traceback(r.stderr)
    # 200 levels, the most there may be, run to the end
    prog, _ = write_program(tmp_path, """\
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
    prog, _ = write_program(tmp_path, '"café ✓"\n')
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
    prog, tools = write_program(tmp_path, """\
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
