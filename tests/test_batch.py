"""``luma batch``: rows in, rows out, resume, bad lines, exit codes, Ctrl-C (docs/batch.md)."""

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
from run_programs import assert_no_traceback

PROGRAM = """\
schema Out { doubled: int }
tool double(n: int) -> Out { description: "Twice n." }
agent Calc {
  tools: [double]
  fn run(n: int) -> Out { return tool double({ n: n }) }
}
"""

TOOLS = """\
import asyncio
import os

async def double(input):
    with open(os.environ["RUNS_FILE"], "a") as f:
        f.write(f"{input['n']}\\n")
    await asyncio.sleep(float(os.environ.get("ROW_SECONDS", "0")))
    if input["n"] == 99:
        raise ValueError("unlucky")
    return {"doubled": input["n"] * 2}
"""


def project(tmp: Path, lines: list[str]) -> dict[str, str]:
    (tmp / "calc.luma").write_text(PROGRAM)
    (tmp / "tools.py").write_text(TOOLS)
    (tmp / "in.jsonl").write_text("".join(line + "\n" for line in lines))
    return {"RUNS_FILE": str(tmp / "runs.txt")}


def rows(path: Path) -> dict[int, dict[str, object]]:
    found = [json.loads(line) for line in path.read_text().splitlines()]
    by_index = {row["index"]: row for row in found}
    assert len(by_index) == len(found)  # no row twice
    return by_index


def batch(tmp: Path, env: dict[str, str], *more: str) -> tuple[int, str]:
    done = luma("batch", "calc.luma", "--tool-module", "tools.py", "--input", "in.jsonl",
                "--output", "out.jsonl", *more, cwd=tmp, env=env)
    assert done.stdout == ""
    assert_no_traceback(done.stderr)
    return done.code, done.stderr


def test_every_row_succeeds(tmp_path: Path) -> None:
    env = project(tmp_path, [json.dumps({"n": n}) for n in range(20)])
    code, err = batch(tmp_path, env, "--concurrency", "4")
    assert (code, err) == (0, "luma batch: 20 succeeded, 0 failed\n")
    assert rows(tmp_path / "out.jsonl") == {
        n: {"index": n, "ok": True, "result": {"doubled": 2 * n}} for n in range(20)}


def test_failed_rows_and_bad_lines_are_error_rows_not_the_end(tmp_path: Path) -> None:
    env = project(tmp_path, ['{"n": 1}', '{"n": 99}', "not json", "[1]", "", '{"n": "x"}',
                             '{"n": 2}'])
    code, err = batch(tmp_path, env)
    assert code == 1
    assert err == ("luma batch: 2 succeeded, 4 failed (ARGUMENT_INVALID: 1, "
                   "BATCH_INPUT_INVALID: 2, TOOL_FAILED: 1)\n")
    out = rows(tmp_path / "out.jsonl")
    assert sorted(out) == [0, 1, 2, 3, 5, 6]  # the blank line 5 is no row
    assert out[1] == {"index": 1, "ok": False, "error": {
        "code": "TOOL_FAILED", "message": "Tool 'double' failed: unlucky"}}
    assert out[2]["error"]["code"] == "BATCH_INPUT_INVALID"  # type: ignore[index]
    assert out[2]["error"]["message"].startswith(  # type: ignore[index]
        "input line 3: the line is not JSON (")
    assert out[3]["error"] == {  # type: ignore[index]
        "code": "BATCH_INPUT_INVALID",
        "message": "input line 4: the line must be a JSON object (the method's arguments by "
                   "name)"}
    assert out[5]["error"]["code"] == "ARGUMENT_INVALID"  # type: ignore[index]
    assert out[6] == {"index": 6, "ok": True, "result": {"doubled": 4}}


def test_resume_skips_the_rows_already_written(tmp_path: Path) -> None:
    env = project(tmp_path, [json.dumps({"n": n}) for n in range(6)])
    out = tmp_path / "out.jsonl"
    # a previous run wrote rows 0 and 3, and was cut off in the middle of a row
    out.write_text('{"index":0,"ok":true,"result":{"doubled":0}}\n'
                   '{"index":3,"ok":true,"result":{"doubled":6}}\n{"index":4,"ok"')
    code, err = batch(tmp_path, env, "--resume")
    assert (code, err) == (0, "luma batch: 4 succeeded, 0 failed, 2 already done\n")
    assert sorted((tmp_path / "runs.txt").read_text().split()) == ["1", "2", "4", "5"]
    lines = out.read_text().splitlines()
    assert lines[2] == '{"index":4,"ok"'  # the torn row is kept as it was, apart
    assert sorted(json.loads(line)["index"] for line in lines[3:]) == [1, 2, 4, 5]


def test_an_existing_output_is_never_overwritten(tmp_path: Path) -> None:
    env = project(tmp_path, ['{"n": 1}'])
    (tmp_path / "out.jsonl").write_text("mine\n")
    code, err = batch(tmp_path, env)
    assert code == 2
    assert err == ("luma batch: error: out.jsonl already exists; add --resume to continue it, "
                   "or choose another --output (it is never overwritten)\n")
    assert (tmp_path / "out.jsonl").read_text() == "mine\n"


def test_fail_fast_stops_taking_rows(tmp_path: Path) -> None:
    env = project(tmp_path, ['{"n": 99}'] + [json.dumps({"n": n}) for n in range(20)])
    code, err = batch(tmp_path, env, "--fail-fast", "--concurrency", "1")
    assert code == 1
    assert err == ("luma batch: 0 succeeded, 1 failed, 20 not run (TOOL_FAILED: 1); continue "
                   "with --resume\n")


def test_start_errors_exit_2(tmp_path: Path) -> None:
    env = project(tmp_path, ['{"n": 1}'])
    code, err = batch(tmp_path, env, "--agent", "Calk")
    assert code == 2
    assert err == "luma batch: error: unknown agent 'Calk'; did you mean 'Calc'?\n"
    code, err = batch(tmp_path, env, "--fn", "go")
    assert (code, err) == (2, "luma batch: error: agent 'Calc' has no method 'go' (its "
                              "methods: run)\n")
    assert not (tmp_path / "out.jsonl").exists()
    done = luma("batch", "calc.luma", "--input", "missing.jsonl", "--output", "o.jsonl",
                cwd=tmp_path)
    assert done.code == 2
    assert done.stderr.startswith("luma batch: error: cannot read missing.jsonl: ")


def test_ctrl_c_lets_running_rows_finish_and_leaves_a_resumable_output(tmp_path: Path) -> None:
    env = project(tmp_path, [json.dumps({"n": n}) for n in range(40)])
    environ = {k: v for k, v in os.environ.items() if k not in ("LUMA_DEBUG", "NO_COLOR")}
    child = subprocess.Popen(
        [sys.executable, "-m", "luma", "batch", "calc.luma", "--tool-module", "tools.py",
         "--input", "in.jsonl", "--output", "out.jsonl", "--concurrency", "4"],
        cwd=tmp_path, env={**environ, **env, "ROW_SECONDS": "0.3"}, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    runs = tmp_path / "runs.txt"
    deadline = time.monotonic() + 20
    while not (runs.exists() and len(runs.read_text().split()) >= 4):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=20)
    assert child.returncode == 130
    text = err.decode()
    assert text.startswith("luma batch: interrupted: no new rows; waiting for the 4 running "
                           "(Ctrl-C again to cancel them)\n")
    started = len(runs.read_text().split())
    out = rows(tmp_path / "out.jsonl")
    assert len(out) == started < 40  # every started row finished and was written
    assert text.endswith(f"luma batch: {started} succeeded, 0 failed, {40 - started} not run; "
                         "continue with --resume\n")
    code, err2 = batch(tmp_path, env, "--resume")
    assert code == 0
    assert sorted(rows(tmp_path / "out.jsonl")) == list(range(40))
    assert len(runs.read_text().split()) == 40  # nothing ran twice


def test_a_second_ctrl_c_cancels_the_running_rows(tmp_path: Path) -> None:
    env = project(tmp_path, [json.dumps({"n": n}) for n in range(10)])
    environ = {k: v for k, v in os.environ.items() if k not in ("LUMA_DEBUG", "NO_COLOR")}
    child = subprocess.Popen(
        [sys.executable, "-m", "luma", "batch", "calc.luma", "--tool-module", "tools.py",
         "--input", "in.jsonl", "--output", "out.jsonl", "--concurrency", "3"],
        cwd=tmp_path, env={**environ, **env, "ROW_SECONDS": "30"}, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    runs = tmp_path / "runs.txt"
    deadline = time.monotonic() + 20
    while not (runs.exists() and len(runs.read_text().split()) >= 3):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    time.sleep(0.3)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=20)  # well before the rows' 30 s
    assert child.returncode == 130
    assert err.decode().endswith(
        "luma batch: 0 succeeded, 0 failed, 10 not run; continue with --resume\n")
    assert (tmp_path / "out.jsonl").read_text() == ""  # a cancelled row writes nothing


def test_progress_lines_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    env = project(tmp_path, [json.dumps({"n": n}) for n in range(6)])
    code, err = batch(tmp_path, {**env, "ROW_SECONDS": "0.1"}, "--concurrency", "1",
                      "--progress-every", "0.15")
    assert code == 0
    progress = err.splitlines()[:-1]
    assert progress, err
    for line in progress:
        assert re.fullmatch(r"luma batch: [1-6]/6 rows, 0 failed, [0-9.]+ rows/s, "
                            r"0 tokens \(0 in, 0 out\)(, about [0-9]+ s left)?", line), line


def test_a_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    import pty
    import select

    env = project(tmp_path, [json.dumps({"n": n}) for n in range(8)])
    primary, secondary = pty.openpty()
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "LUMA_DEBUG")}
    child = subprocess.Popen(
        [sys.executable, "-m", "luma", "batch", "calc.luma", "--tool-module", "tools.py",
         "--input", "in.jsonl", "--output", "out.jsonl", "--concurrency", "2"],
        cwd=tmp_path, env={**environ, **env, "ROW_SECONDS": "0.1", "TERM": "xterm"},
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=secondary)
    os.close(secondary)
    chunks = []
    while select.select([primary], [], [], 30)[0]:
        try:
            data = os.read(primary, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert child.wait(timeout=30) == 0
    os.close(primary)
    shown = b"".join(chunks).decode("utf-8", errors="replace")
    assert "luma batch" in shown and "rows/s" in shown and "failed" in shown
    assert re.search(r"[1-8]/8", shown), shown
    assert shown.rstrip().endswith("luma batch: 8 succeeded, 0 failed")
    assert len(rows(tmp_path / "out.jsonl")) == 8
