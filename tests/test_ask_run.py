"""``ask`` end to end through the run path (``run_checked``): the quickstart on the offline
model, the seed's multi-tool flow on scripted turns, exit codes and what stderr says."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from luma.compile import check_file
from luma.cli_run import RunOptions, run_checked

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
HERE = Path(__file__).parent / "ask"


def run(path: Path, **options: object) -> tuple[int, str, str]:
    checked = check_file(path)
    assert not checked.has_errors, [d.message for d in checked.diagnostics]
    out, err = io.StringIO(), io.StringIO()
    code = run_checked(checked, RunOptions(**options), stdout=out, stderr=err)  # type: ignore[arg-type]
    return code, out.getvalue(), err.getvalue()


def test_the_quickstart_runs_offline_with_no_key(tmp_path):
    trace = tmp_path / "trace.jsonl"
    code, out, err = run(EXAMPLES / "quickstart.luma",
                         tool_modules=[str(EXAMPLES / "quickstart_tools.py")], trace=str(trace))
    assert code == 0, err
    # The offline model calls text_stats on the prompt's text and calculate on its numbers
    # (20 and 22), then answers with what they returned: 5 words, and 42 as the "result" that
    # the description of `sum` asks for.
    assert json.loads(out) == {"summary": "Luma keeps tool contracts typed", "words": 5,
                               "sum": 42.0}
    assert "warning[OFFLINE_MODEL] No model is configured" in err
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    native = [(e["tool"], e["call_id"]) for e in events
              if e["event"] == "tool.call" and e["mode"] == "native"]
    assert sorted(native) == [("calculate", "call_1"), ("text_stats", "call_2")]  # concurrent
    asks = [(e["event"], e["turn"], e["provider"]) for e in events
            if e["event"] in ("ask.request", "ask.response")]
    assert asks == [("ask.request", 1, "test"), ("ask.response", 1, "test"),
                    ("ask.request", 2, "test"), ("ask.response", 2, "test")]


def test_the_quickstart_gives_the_same_output_every_time():
    outputs = {run(EXAMPLES / "quickstart.luma",
                   tool_modules=[str(EXAMPLES / "quickstart_tools.py")])[1] for _ in range(2)}
    assert len(outputs) == 1


def test_the_multi_tool_flow_retries_a_prose_answer_and_accepts_a_fenced_one(tmp_path):
    trace = tmp_path / "trace.jsonl"
    code, out, err = run(HERE / "multi_tool.luma",
                         tool_modules=[str(EXAMPLES / "quickstart_tools.py")], trace=str(trace))
    assert code == 0, err
    assert json.loads(out) == {"words": 2, "sum": 42}
    assert err == ""
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    invalid = [e for e in events if e["event"] == "ask.invalid_answer"]
    assert [e["errors"] for e in invalid] == [
        ["the answer is not JSON (Expecting value at line 1 column 1)"]]
    results = {e["tool"]: e["outcome"] for e in events if e["event"] == "ask.tool_result"}
    assert results == {"text_stats": "ok", "calculate": "ok"}


def test_an_answer_that_never_fits_exits_1_with_the_place_in_the_source(tmp_path):
    program = tmp_path / "bad.luma"
    program.write_text("""model Scripted {
  provider: "test"
  responses: "turns.json"
}
schema Score { score: int @range(0, 100) }
agent Judge {
  model: Scripted
  fn run() -> Score {
    ask "Score it." -> Score
  }
}
""", encoding="utf-8")
    (tmp_path / "turns.json").write_text('[{"content": {"score": 250}}]', encoding="utf-8")
    code, out, err = run(program)
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "error[ASK_OUTPUT_INVALID]: The model's answer to Judge.run.ask does not fit Score "
        "after 1 attempt: score: 250 is greater than the maximum of 100",
        f"  --> {program}:9:5",
        '   | ask "Score it." -> Score']


def test_an_unknown_model_on_the_command_line_cannot_start():
    code, out, err = run(EXAMPLES / "quickstart.luma", model="Nope",
                         tool_modules=[str(EXAMPLES / "quickstart_tools.py")])
    assert (code, out) == (2, "")
    assert err == "error: --model: there is no model named 'Nope' (models: test)\n"


def test_the_offline_path_never_imports_httpx():
    script = (
        "import sys, io\n"
        "from luma.compile import check_file\n"
        "from luma.cli_run import RunOptions, run_checked\n"
        f"code = run_checked(check_file({str(EXAMPLES / 'quickstart.luma')!r}), "
        f"RunOptions(tool_modules=[{str(EXAMPLES / 'quickstart_tools.py')!r}]), "
        "stdout=io.StringIO(), stderr=io.StringIO())\n"
        "print(code, 'httpx' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert done.stdout.split() == ["0", "False"], done.stderr
