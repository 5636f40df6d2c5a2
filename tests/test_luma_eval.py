"""``luma eval``: tool selection, arguments and answers on a golden set, per model, with the
offline and scripted models; --min-accuracy as a CI gate."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runner import luma

PROGRAM = "tests/luma_test/orders.luma"
CASES = "tests/luma_test/orders_cases.jsonl"
TOOLS = "tests/luma_test/orders_tools.py"


def test_models_side_by_side_with_precision_recall_and_the_offline_note() -> None:
    done = luma("eval", PROGRAM, "--agent", "Support", "--cases", CASES, "--model", "test",
                "--model", "Picky", "--tool-module", TOOLS)
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    latency = [line for line in lines if line.startswith(("latency p50 (ms)",
                                                          "latency p95 (ms)"))]
    assert len(latency) == 2  # the durations of the runs, which vary
    # the column widths follow the widest cell; the cells, in order:
    assert [" ".join(line.split()) for line in lines if line not in latency] == [
        "2 cases x 1 on 2 models",
        "test Picky",
        "tool selection (exact set) 0.0% 50.0%",
        "argument match 100.0% 100.0%",
        "final answer match 100.0% 100.0%",
        "runs that failed 0/2 0/2",
        "invalid answers 0 0",
        "invalid tool inputs 0 0",
        "re-asked after an invalid one 0 0",
        "tokens per run 0 0",
        "cancel_order: precision 0.0% -",
        "cancel_order: recall - -",
        "find_orders: precision 50.0% 50.0%",
        "find_orders: recall 100.0% 100.0%",
        "note: test is the offline model: this measures the harness (the contract and the "
        "cases), not a model",
        "note: Picky is the offline model: this measures the harness (the contract and the "
        "cases), not a model",
    ]


def test_json_report_and_the_confusion_of_a_case_answered_with_a_tool() -> None:
    done = luma("eval", PROGRAM, "--agent", "Support", "--cases", CASES, "--model", "Picky",
                "--tool-module", TOOLS, "--repeat", "2", "--format", "json")
    assert done.code == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["cases"], report["repeat"]) == (2, 2)
    (picky,) = report["models"]
    assert picky["runs"] == 4 and picky["tool_accuracy"] == 0.5
    assert picky["tools"] == {"find_orders": {"precision": 0.5, "recall": 1.0}}
    assert picky["confusion"] == {}  # nothing expected was missed; "Hello" got an extra call
    assert picky["accuracy_spread"] == [0.5, 0.5] and picky["retries"] == 0
    assert picky["latency_ms"]["p50"] <= picky["latency_ms"]["p95"]


def test_invalid_answers_and_tool_inputs_and_the_requests_they_cost_are_counted() -> None:
    # per case, Clumsy calls find_orders with a number for the customer id, then answers with a
    # number for the status: each is rejected, and the model is asked again (retries: 1)
    done = luma("eval", PROGRAM, "--agent", "Support", "--cases", CASES, "--model", "Clumsy",
                "--model", "Picky", "--tool-module", TOOLS)
    assert done.code == 0, done.stderr
    rows = [" ".join(line.split()) for line in done.stdout.splitlines()]
    assert [r for r in rows if r.startswith(("invalid", "re-asked", "runs that failed"))] == [
        "runs that failed 0/2 0/2",
        "invalid answers 2 0",
        "invalid tool inputs 2 0",
        "re-asked after an invalid one 4 0",
    ]
    report = json.loads(luma("eval", PROGRAM, "--agent", "Support", "--cases", CASES, "--model",
                             "Clumsy", "--tool-module", TOOLS, "--format", "json").stdout)
    (clumsy,) = report["models"]
    assert clumsy["validation_failures"] == {"answers": 2, "tool_inputs": 2}
    assert (clumsy["retries"], clumsy["errors"], clumsy["answer_match"]) == (4, 0, 1.0)


def test_min_accuracy_is_a_ci_gate() -> None:
    done = luma("eval", PROGRAM, "--agent", "Support", "--cases", CASES, "--model", "Picky",
                "--tool-module", TOOLS, "--min-accuracy", "0.9")
    assert done.code == 1
    assert done.stderr == ("luma eval: Picky: tool-selection accuracy 0.5 is below "
                           "--min-accuracy 0.9\n")


def test_a_bad_case_line_is_named(tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"input": {"question": "x"}}\n{"expect_tool": ["a"]}\nnot json\n')
    done = luma("eval", PROGRAM, "--agent", "Support", "--cases", str(cases), "--model", "Picky")
    assert done.code == 2
    assert done.stderr == (
        f"luma eval: {cases}:2: unknown key 'expect_tool' (a case has input, expect_tools, "
        "expect_args, expect)\n"
        f"luma eval: {cases}:3: not valid JSON: Expecting value\n")


def test_an_unknown_agent_or_model_is_a_usage_error() -> None:
    done = luma("eval", PROGRAM, "--agent", "Nobody", "--cases", CASES, "--model", "Picky")
    assert done.code == 2
    assert done.stderr.endswith(f"luma eval: error: --agent Nobody: {PROGRAM} has no agent of "
                                "that name with a run method\n")
    done = luma("eval", PROGRAM, "--agent", "Support", "--cases", CASES, "--model", "Nope")
    assert done.code == 2
    assert "--model Nope: " in done.stderr


def test_a_real_provider_recorded_once_and_replayed(tmp_path: Path) -> None:
    from providers import openai_fake

    text = (Path(PROGRAM).read_text(encoding="utf-8") if Path(PROGRAM).is_absolute()
            else (Path(__file__).parents[1] / PROGRAM).read_text(encoding="utf-8"))
    (tmp_path / "orders_tools.py").write_text(
        (Path(__file__).parents[1] / TOOLS).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "orders_turns.json").write_text("[]", encoding="utf-8")
    (tmp_path / "orders_clumsy_turns.json").write_text("[]", encoding="utf-8")
    with openai_fake.server() as server:
        server.reply(openai_fake.completion(tool_calls=[("c1", "find_orders",
                                                         {"customer_id": "c-100"})]))
        server.reply(openai_fake.completion('{"status": "open"}'))
        server.reply(openai_fake.completion('{"status": "hello"}'))
        program = tmp_path / "orders.luma"
        program.write_text(text + f'''
model Gpt {{
  provider: "openai"
  name: "gpt-test"
  base_url: "{server.base_url}/v1"
}}
''', encoding="utf-8")
        args = ("eval", str(program), "--agent", "Support", "--cases",
                str(Path(__file__).parents[1] / CASES), "--model", "Gpt", "--tool-module",
                str(tmp_path / "orders_tools.py"), "--format", "json")
        recorded = luma(*args, "--record", str(tmp_path / "rec"),
                        env={"OPENAI_API_KEY": openai_fake.KEY})
        assert recorded.code == 0, recorded.stderr
        assert len(server.requests) == 3
    (gpt,) = json.loads(recorded.stdout)["models"]
    assert gpt["tokens"] > 0 and gpt["retries"] == 0
    assert (gpt["offline"], gpt["tool_accuracy"], gpt["argument_match"], gpt["answer_match"]) == (
        False, 1.0, 1.0, 1.0)
    replayed = luma(*args, "--replay", str(tmp_path / "rec"), env={"OPENAI_API_KEY": ""})
    assert replayed.code == 0, replayed.stderr
    timeless = lambda out: [{k: v for k, v in m.items() if k != "latency_ms"}  # noqa: E731
                            for m in json.loads(out)["models"]]
    assert timeless(replayed.stdout) == timeless(recorded.stdout)
