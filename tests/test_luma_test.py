"""``luma test``: the test declarations of a program run on the offline and scripted models,
each in a fresh runtime, with the report and the exit status a CI system reads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from cli_runner import ROOT, luma

HERE = ROOT / "tests" / "luma_test"
OUTCOMES = "tests/luma_test/outcomes.luma"
RUNTIME = "tests/luma_test/runtime.luma"


def _status_lines(stdout: str) -> list[str]:
    return [line.split("  (")[0].rstrip() for line in stdout.splitlines()
            if line and not line.startswith(" ") and "  (" in line]


def test_each_test_gets_a_line_and_a_failed_assert_shows_its_operands() -> None:
    done = luma("test", OUTCOMES)
    assert done.code == 1, done.stderr
    assert done.stdout.splitlines()[:9] == [
        f"PASSED       passes  ({OUTCOMES}:12)",
        f"FAILED       fails with operands  ({OUTCOMES}:18)",
        f'    {OUTCOMES}:21: assert stats.words == 2, "two words"',
        "      left: 3, right: 2",
        "      two words",
        f"NEEDS REVIEW needs review  ({OUTCOMES}:25)",
        f'    {OUTCOMES}:29: check stats.characters > 10, "long enough"',
        "      left: 8, right: 10",
        "      long enough",
    ]
    assert done.stdout.splitlines()[9].startswith("3 tests: 1 passed, 1 failed, 1 needs review")
    # a test's print() and the offline model's notice are not part of the report
    assert "tests print" not in done.stdout + done.stderr


def test_only_a_check_that_did_not_hold_exits_3() -> None:
    done = luma("test", OUTCOMES, "-k", "REVIEW")
    assert done.code == 3, done.stdout + done.stderr
    assert _status_lines(done.stdout) == ["NEEDS REVIEW needs review"]


def test_every_test_passed_exits_0() -> None:
    done = luma("test", OUTCOMES, "-k", "passes")
    assert (done.code, _status_lines(done.stdout)) == (0, ["PASSED       passes"])


def test_no_test_matched_exits_4() -> None:
    done = luma("test", OUTCOMES, "-k", "nothing")
    assert done.code == 4
    assert done.stderr == f"luma test: no test matching 'nothing' in {OUTCOMES}\n"


def test_a_scripted_model_drives_a_native_tool_flow_and_calls_shows_it() -> None:
    done = luma("test", RUNTIME, "-k", "the model calls lookup")
    assert (done.code, _status_lines(done.stdout)) == (0, ["PASSED       the model calls lookup"])


def test_no_cache_state_leaks_from_one_test_to_the_next() -> None:
    # both call text_stats({text: "same"}) on a cached tool with different mocks
    done = luma("test", RUNTIME, "-k", "cache")
    assert (done.code, _status_lines(done.stdout)) == (
        0, ["PASSED       cache one", "PASSED       cache two"])


def test_a_mock_that_breaks_the_contract_fails_the_test() -> None:
    done = luma("test", RUNTIME, "-k", "breaks the contract")
    assert done.code == 1
    assert done.stdout.splitlines()[1:3] == [
        f'    {RUNTIME}:58: tool text_stats({{ text: "x" }})',
        "      [TOOL_OUTPUT_INVALID] text_stats.output.words: 15 is greater than the maximum of 10",
    ]


def test_a_tool_without_a_handler_or_a_mock_says_how_to_mock_it() -> None:
    done = luma("test", RUNTIME, "-k", "unmocked")
    assert done.code == 1
    assert done.stdout.splitlines()[2] == (
        "      [TOOL_FAILED] Tool 'lookup' failed: no handler is registered for this test: mock "
        "it (mock tool lookup returns ...) or give its tool module with --tool-module")


def test_a_mock_that_throws_raises_a_typed_error(tmp_path: Path) -> None:
    done = luma("test", "examples/testing/stats.luma")
    assert (done.code, _status_lines(done.stdout)) == (
        0, ["PASSED       adds words and characters", "PASSED       a failing stats tool surfaces"])


def test_a_file_with_errors_is_reported_and_nothing_runs(tmp_path: Path) -> None:
    bad = tmp_path / "bad.luma"
    bad.write_text('test "x" {\n  assert nope\n}\n', encoding="utf-8")
    done = luma("test", str(bad))
    assert done.code == 2
    assert "error[E038]: Unknown name 'nope'." in done.stderr
    assert done.stderr.endswith("luma test: 1 file with errors; no test ran\n")
    assert done.stdout == ""


def test_an_unknown_model_is_a_usage_error() -> None:
    done = luma("test", RUNTIME, "--model", "Nope")
    assert done.code == 2
    assert done.stderr.endswith(f"luma test: error: --model Nope: {RUNTIME} declares no model of "
                                "that name (models: Scripted, test)\n")


def test_junit_and_json_reports() -> None:
    done = luma("test", OUTCOMES, "--format", "junit")
    assert done.code == 1
    root = ET.fromstring(done.stdout)
    suite = root.find("testsuite")
    assert suite is not None and suite.get("tests") == "3" and suite.get("failures") == "1"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    failure = cases["fails with operands"].find("failure")
    assert failure is not None and failure.get("message") == "two words"
    assert "left: 3, right: 2" in (failure.text or "")
    review = cases["needs review"].find("system-out")
    assert review is not None and "long enough" in (review.text or "")
    report = json.loads(luma("test", OUTCOMES, "--format", "json").stdout)
    assert report["summary"] == {"passed": 1, "failed": 1, "needs_review": 1}
    assert [t["status"] for t in report["tests"]] == ["passed", "failed", "needs_review"]
    assert report["tests"][1]["findings"][0]["details"] == ["left: 3, right: 2", "two words"]


def test_tests_run_in_parallel_with_the_same_report() -> None:
    one = luma("test", RUNTIME, "--format", "json")
    many = luma("test", RUNTIME, "--format", "json", "--jobs", "3")
    strip = lambda r: [(t["name"], t["status"], t["findings"]) for t in json.loads(r)["tests"]]  # noqa: E731
    assert strip(many.stdout) == strip(one.stdout)
    assert many.code == one.code == 1


def test_running_the_program_never_runs_its_tests(tmp_path: Path) -> None:
    program = tmp_path / "p.luma"
    program.write_text('x = 1 + 1\ntest "t" {\n  print("a test ran")\n  assert false\n}\n',
                       encoding="utf-8")
    done = luma(str(program))
    assert (done.code, done.stdout.strip()) == (0, "2")
    assert "a test ran" not in done.stderr


@pytest.mark.parametrize("folder", ["tests/luma_test"])
def test_a_folder_is_searched_for_tests(folder: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / folder, tmp_path / "suite")
    (tmp_path / "suite" / "broken.luma").write_text("schema {\n", encoding="utf-8")
    (tmp_path / "suite" / "plain.luma").write_text("x = 1\n", encoding="utf-8")
    done = luma("test", "suite", cwd=tmp_path)
    assert done.code == 1, done.stderr
    assert len(_status_lines(done.stdout)) == 14  # the broken and test-less files are skipped


def test_a_suite_recorded_once_replays_without_a_key_or_the_network(tmp_path: Path) -> None:
    from providers import openai_fake

    with openai_fake.server() as server:
        server.reply(openai_fake.completion('{"team": "billing"}'))
        server.reply(openai_fake.completion('{"team": "sales"}'))
        program = tmp_path / "triage.luma"
        program.write_text(f'''schema Route {{
  team: string
}}

model Gpt {{
  provider: "openai"
  name: "gpt-test"
  base_url: "{server.base_url}/v1"
}}

test "billing" {{
  route = ask "Who handles a double charge?" -> Route
  assert route.team == "billing"
}}

test "sales" {{
  route = ask "Who handles a new contract?" -> Route
  assert route.team == "sales"
}}
''', encoding="utf-8")
        recorded = luma("test", str(program), "--model", "Gpt", "--record", str(tmp_path / "rec"),
                        env={"OPENAI_API_KEY": openai_fake.KEY})
        assert recorded.code == 0, recorded.stdout + recorded.stderr
        assert len(server.requests) == 2
    files = sorted(p.name for p in (tmp_path / "rec").iterdir())
    assert files == ["triage--billing.json", "triage--sales.json"]
    assert openai_fake.KEY not in "".join((tmp_path / "rec" / f).read_text() for f in files)
    # the server is gone and there is no key: each test is served from its own recording
    replayed = luma("test", str(program), "--model", "Gpt", "--replay", str(tmp_path / "rec"),
                    env={"OPENAI_API_KEY": ""})
    assert (replayed.code, _status_lines(replayed.stdout)) == (
        0, ["PASSED       billing", "PASSED       sales"]), replayed.stdout + replayed.stderr
