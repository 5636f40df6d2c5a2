"""The golden set in examples/eval/: the documented ``luma eval --replay`` runs without a key
and reports what its recordings hold; ``--jobs`` changes nothing in the report; the
recordings are what tests/eval_golden.py builds from the recorded OpenAI responses."""

from __future__ import annotations

import json
from pathlib import Path

import eval_golden
from cli_runner import ROOT, luma

COMMAND = ("eval", "examples/eval/triage.luma", "--agent", "Triage", "--cases",
           "examples/eval/golden.jsonl", "--model", "GPT54Mini", "--model", "GPT54",
           "--tool-module", "examples/eval/triage_tools.py", "--replay", "examples/eval/recordings")
NO_KEY = {"OPENAI_API_KEY": ""}


def test_the_documented_replay_reports_both_models_side_by_side() -> None:
    done = luma(*COMMAND, env=NO_KEY)
    assert done.code == 0, done.stderr
    rows = [" ".join(line.split()) for line in done.stdout.splitlines()
            if not line.startswith("latency")]
    assert rows == [
        "10 cases x 1 on 2 models",
        "GPT54Mini GPT54",
        "tool selection (exact set) 80.0% 100.0%",
        "argument match 77.8% 100.0%",
        "final answer match 90.0% 100.0%",
        "runs that failed 0/10 0/10",
        "invalid answers 1 0",
        "invalid tool inputs 1 0",
        "re-asked after an invalid one 2 0",
        "tokens per run 532 472",
        "find_orders: precision 80.0% 100.0%",
        "find_orders: recall 100.0% 100.0%",
        "get_invoice: precision 100.0% 100.0%",
        "get_invoice: recall 66.7% 100.0%",
        "open_ticket: precision 100.0% 100.0%",
        "open_ticket: recall 50.0% 100.0%",
        "GPT54Mini: expected get_invoice, chose find_orders x1",
        "GPT54Mini: expected open_ticket, chose (none) x1",
    ]


def test_concurrent_cases_give_the_same_report() -> None:
    def timeless(stdout: str) -> list[dict[str, object]]:
        return [{k: v for k, v in m.items() if k != "latency_ms"}
                for m in json.loads(stdout)["models"]]

    one = luma(*COMMAND, "--format", "json", env=NO_KEY)
    four = luma(*COMMAND, "--format", "json", "--jobs", "4", env=NO_KEY)
    assert one.code == four.code == 0, one.stderr + four.stderr
    assert timeless(four.stdout) == timeless(one.stdout)
    (mini, full) = timeless(one.stdout)
    assert mini["validation_failures"] == {"answers": 1, "tool_inputs": 1}
    assert (mini["retries"], full["retries"]) == (2, 0)


def test_the_test_of_the_contract_replays_from_its_recording() -> None:
    done = luma("test", "examples/eval/triage.luma", "--tool-module",
                "examples/eval/triage_tools.py", "--replay", "examples/eval/recordings",
                env=NO_KEY)
    assert done.code == 0, done.stdout + done.stderr
    assert done.stdout.startswith("PASSED       a lost parcel goes to shipping  "
                                  "(examples/eval/triage.luma:")


def test_min_accuracy_gates_the_weaker_model() -> None:
    done = luma(*COMMAND, "--min-accuracy", "0.9", env=NO_KEY)
    assert done.code == 1
    assert done.stderr == ("luma eval: GPT54Mini: tool-selection accuracy 0.8 is below "
                           "--min-accuracy 0.9\n")


def test_the_recordings_are_the_ones_the_builder_makes(tmp_path: Path) -> None:
    eval_golden.build(tmp_path / "built")
    committed = ROOT / "examples" / "eval" / "recordings"
    names = sorted(p.name for p in committed.iterdir())
    assert names == sorted(p.name for p in (tmp_path / "built").iterdir())
    assert len(names) == 21  # 10 cases on 2 models, and the test of triage.luma

    def content(path: Path) -> list[object]:
        # the client's own headers (its version, the body's length) may differ
        return [(e["url"], e["request"]["body"], e["response"])
                for e in json.loads(path.read_text(encoding="utf-8"))["exchanges"]]

    for name in names:
        assert content(committed / name) == content(tmp_path / "built" / name), name
