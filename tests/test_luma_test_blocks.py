"""``luma test``: mocks, asserts and checks in the blocks of a test, and ``calls("tool")``
holding each call's input as it was given (by a scripted model, or by the code)."""

from __future__ import annotations

import json

from cli_runner import luma

BLOCKS = "tests/luma_test/blocks.luma"
CALLS = "tests/luma_test/calls.luma"


def test_asserts_and_checks_in_blocks_report_their_operands_in_the_round_that_failed() -> None:
    done = luma("test", BLOCKS)
    assert done.code == 1, done.stderr
    assert done.stdout.splitlines()[:16] == [
        f"FAILED       an assert in a loop stops at the round that fails  ({BLOCKS}:12)",
        f'    {BLOCKS}:16: assert stats.words < 3, "fewer than three words"',
        "      left: 3, right: 3",
        "      fewer than three words",
        f"NEEDS REVIEW a check in a loop reports every round that fails  ({BLOCKS}:20)",
        f'    {BLOCKS}:23: check tool text_stats({{ text: "x" }}).words == 2, "two words"',
        "      left: 1, right: 2",
        "      two words",
        f'    {BLOCKS}:23: check tool text_stats({{ text: "x" }}).words == 2, "two words"',
        "      left: 3, right: 2",
        "      two words",
        f"PASSED       a mock in an if applies from there on  ({BLOCKS}:28)",
        f"FAILED       an assert in a try is not caught by its catch  ({BLOCKS}:46)",
        f'    {BLOCKS}:49: assert 1 + 1 == 3, "arithmetic"',
        "      left: 2, right: 3",
        "      arithmetic",
    ]
    assert done.stdout.splitlines()[16].startswith("4 tests: 1 passed, 2 failed, 1 needs review")


def test_a_failed_assert_in_a_loop_is_in_the_json_report_with_its_line() -> None:
    done = luma("test", BLOCKS, "-k", "assert in a loop", "--format", "json")
    assert done.code == 1
    (test,) = json.loads(done.stdout)["tests"]
    assert test["findings"] == [{"kind": "assert", "line": 16,
                                 "source": 'assert stats.words < 3, "fewer than three words"',
                                 "details": ["left: 3, right: 3", "fewer than three words"]}]


def test_calls_holds_each_input_as_given_with_its_output_and_mode() -> None:
    done = luma("test", CALLS, "--tool-module", "tests/luma_test/calls_tools.py")
    assert done.code == 0, done.stdout + done.stderr
    assert [line.split("  (")[0].rstrip() for line in done.stdout.splitlines()[:2]] == [
        "PASSED       calls holds the input as the model and the code gave it",
        "PASSED       calls holds an input that failed validation, and its error",
    ]
