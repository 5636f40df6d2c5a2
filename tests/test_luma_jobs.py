"""``luma test --jobs`` and ``luma eval --jobs`` start programs in several threads at once: a
tool module that takes a while to import is loaded once, and every program gets its handlers
(not the half-run module another thread is still importing)."""

from __future__ import annotations

from pathlib import Path

from cli_runner import luma

SLOW_MODULE = '''import time

time.sleep(0.5)  # the other programs start while this import runs


def lookup(input):
    return {"id": input["id"]}
'''

PROGRAM = '''schema Ref {
  id: string
}

tool lookup(id: string) -> Ref {
  description: "Read a reference."
}

agent Reader {
  tools: [lookup]

  fn run(id: string) -> Ref {
    return tool lookup({ id: id })
  }
}
''' + "".join(f'''
test "reads {n}" {{
  assert tool lookup({{ id: "{n}" }}).id == "{n}"
}}
''' for n in range(1, 5))


def _write(tmp_path: Path) -> None:
    (tmp_path / "slow_tools.py").write_text(SLOW_MODULE, encoding="utf-8")
    (tmp_path / "refs.luma").write_text(PROGRAM, encoding="utf-8")


def test_parallel_tests_share_a_slow_tool_module(tmp_path: Path) -> None:
    _write(tmp_path)
    done = luma("test", "refs.luma", "--tool-module", "slow_tools.py", "--jobs", "4",
                cwd=tmp_path)
    assert done.code == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 4


def test_parallel_eval_runs_share_a_slow_tool_module(tmp_path: Path) -> None:
    _write(tmp_path)
    (tmp_path / "cases.jsonl").write_text("".join(
        f'{{"input": {{"id": "{n}"}}, "expect": {{"id": "{n}"}}}}\n' for n in range(1, 5)),
        encoding="utf-8")
    done = luma("eval", "refs.luma", "--agent", "Reader", "--cases", "cases.jsonl", "--model",
                "test", "--tool-module", "slow_tools.py", "--jobs", "4", "--format", "json",
                cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert '"answer_match": 1.0' in done.stdout and '"failures": []' in done.stdout
