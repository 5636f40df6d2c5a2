"""Robustness: real runs of generated and mutated programs with hostile handlers on the offline
model end in a result or a worded Luma error — never an internal error, a traceback, a hang, an
undocumented exit code or a corrupted result. ``bench/robustness.py`` runs more of the same and
prints the figures recorded in docs/benchmarks.md."""

from __future__ import annotations

import pytest

from robustness.fuzz import HOSTILE, make_cases, run_cases, summary

RUNS = 200


def test_runs_end_in_results_or_worded_errors(tmp_path) -> None:
    cases = make_cases(RUNS, seed_value=20261201)
    outcomes = run_cases(cases, timeout=40.0, workdir=tmp_path)
    figures = summary(outcomes)
    failed = [o for o in outcomes if o.problems]
    report = "\n".join(
        f"{o.case.seed} [{o.case.mutation}] {o.case.behaviours} {o.case.argv}: {o.problems}"
        for o in failed[:20])
    if failed:
        pytest.fail(f"{len(failed)} of {RUNS} runs broke: {figures}\n{report}", pytrace=False)
    # The cases really reach the runtime: results, runtime errors and start errors all occur.
    assert figures["exit_0"] >= RUNS // 20, figures
    assert figures["exit_1"] >= RUNS // 5, figures


def test_cases_cover_every_hostile_behaviour() -> None:
    cases = make_cases(RUNS, seed_value=20261201)
    cases += make_cases(RUNS, seed_value=20261202)
    seen = {b for case, _ in cases for b, _ in case.behaviours.values()}
    assert seen == set(HOSTILE)


def test_a_secret_in_the_output_is_found() -> None:
    from robustness.fuzz import Case, Outcome, judge

    case = Case("needs", "", [], {"DB_PASSWORD": 's3cret-"pw'}, {}, "none")
    assert judge(Outcome(case, 1, "", 'error: s3cret-\\"pw\n', 0.1)) == [
        "secret DB_PASSWORD in the output"]
    assert judge(Outcome(case, 1, "", "error: [secret]\n", 0.1)) == []
