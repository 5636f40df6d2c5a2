"""The per-call cost of the tool pipeline, against a hand-written call.

Both sides call the same trivial handler. The hand-written side validates the input and the
output with prebuilt ``jsonschema`` validators (collecting every error, as the pipeline
reports every violation) and calls the handler inline. The pipeline side is a direct call
through all twelve steps: lookup, policy, input validation with defaults, the handler, output
validation and a telemetry event.

    .venv/bin/python bench/tool_pipeline.py [--calls N] [--secret]

``--secret`` adds a run with one secret registered: every event is then searched for it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from jsonschema import Draft202012Validator

from luma.runtime.engine import CallContext, Runtime
from luma.runtime.telemetry import Telemetry
from luma.syntax.parse import parse_text

PROGRAM = """
schema CalcResult {
  result: float
}

tool calculate(
  a: float @range(0, 1000000),
  b: float @range(0, 1000000),
  operation: enum["add", "multiply"] @desc("The operation to perform")
) -> CalcResult {
  description: "Add or multiply two numbers."
  side_effects: "none"
}
"""

INPUT = {"a": 2, "b": 3, "operation": "add"}


def calculate(input: dict[str, Any]) -> dict[str, Any]:
    if input["operation"] == "add":
        return {"result": input["a"] + input["b"]}
    return {"result": input["a"] * input["b"]}


def build_runtime() -> Runtime:
    program, diagnostics = parse_text(PROGRAM, "bench.luma")
    assert program is not None and not diagnostics, diagnostics
    return Runtime(program, handlers={"calculate": calculate}, env={}, interactive=False,
                   telemetry=Telemetry())


def hand_written(runtime: Runtime, calls: int) -> float:
    """Seconds for ``calls`` hand-written calls."""
    input_schema = runtime.schemas.standalone("__tool_calculate_input")
    output_schema = runtime.schemas.standalone("CalcResult")
    check_in = Draft202012Validator(input_schema)
    check_out = Draft202012Validator(output_schema)
    started = time.perf_counter()
    for _ in range(calls):
        errors = list(check_in.iter_errors(INPUT))
        if errors:
            raise ValueError(errors)
        result = calculate(INPUT)
        errors = list(check_out.iter_errors(result))
        if errors:
            raise ValueError(errors)
    return time.perf_counter() - started


def hand_written_is_valid(runtime: Runtime, calls: int) -> float:
    """The same with ``is_valid`` (stops at the first error, reports none): the cheapest use of
    jsonschema, for reference."""
    check_in = Draft202012Validator(runtime.schemas.standalone("__tool_calculate_input"))
    check_out = Draft202012Validator(runtime.schemas.standalone("CalcResult"))
    started = time.perf_counter()
    for _ in range(calls):
        if not check_in.is_valid(INPUT):
            raise ValueError("input")
        if not check_out.is_valid(calculate(INPUT)):
            raise ValueError("output")
    return time.perf_counter() - started


def hand_written_luma_validator(runtime: Runtime, calls: int) -> float:
    """The same loop with Luma's own validator: what the pipeline adds beyond validation."""
    from luma.schema.validate import validator_for

    check_in = validator_for(runtime.schemas.standalone("__tool_calculate_input"))
    check_out = validator_for(runtime.schemas.standalone("CalcResult"))
    started = time.perf_counter()
    for _ in range(calls):
        value, problems = check_in.validate_and_fill(INPUT, soft_rules=False, infer_tags=True)
        if problems:
            raise ValueError(problems)
        _, problems = check_out.validate_and_fill(calculate(value), soft_rules=True)
        if problems:
            raise ValueError(problems)
    return time.perf_counter() - started


def bare_handler(calls: int) -> float:
    """The handler alone, to show what the validation and the pipeline add."""
    started = time.perf_counter()
    for _ in range(calls):
        calculate(INPUT)
    return time.perf_counter() - started


def through_pipeline(runtime: Runtime, calls: int) -> float:
    """Seconds for ``calls`` direct calls through the pipeline (one event loop)."""
    ctx = CallContext(None, None, "direct")
    call = runtime.pipeline.call

    async def loop() -> float:
        started = time.perf_counter()
        for _ in range(calls):
            await call("calculate", INPUT, ctx)
        return time.perf_counter() - started

    return asyncio.run(loop())  # the telemetry keeps a bounded history: nothing to clear


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--secret", action="store_true",
                        help="also time the pipeline with one secret registered")
    args = parser.parse_args()
    runtime = build_runtime()
    through_pipeline(runtime, 1000)  # warm up: plans, validators
    hand_written(runtime, 1000)
    hand, quick, own, bare, pipe = [], [], [], [], []
    for _ in range(args.rounds):
        hand.append(hand_written(runtime, args.calls) / args.calls * 1e6)
        quick.append(hand_written_is_valid(runtime, args.calls) / args.calls * 1e6)
        own.append(hand_written_luma_validator(runtime, args.calls) / args.calls * 1e6)
        bare.append(bare_handler(args.calls) / args.calls * 1e6)
        pipe.append(through_pipeline(runtime, args.calls) / args.calls * 1e6)
    h, q, o, b, p = (statistics.median(x) for x in (hand, quick, own, bare, pipe))
    if args.secret:
        with_secret = build_runtime()
        with_secret.secrets.add("hunter2-Pä\"ss\\word")
        through_pipeline(with_secret, 1000)
        secret = statistics.median(through_pipeline(with_secret, args.calls) / args.calls * 1e6
                                   for _ in range(args.rounds))
    print(f"handler alone:                                            {b:7.2f} us/call")
    print(f"hand-written, jsonschema iter_errors in + out:            {h:7.2f} us/call")
    print(f"hand-written, jsonschema is_valid in + out:               {q:7.2f} us/call")
    print(f"hand-written, Luma's validator in + out:                  {o:7.2f} us/call")
    print(f"pipeline (direct call, all 12 steps, telemetry):          {p:7.2f} us/call")
    if args.secret:
        print(f"pipeline, one secret registered:                          {secret:7.2f} us/call")
    print(f"ratio pipeline / hand-written (iter_errors):              {p / h:7.2f}x")
    print(f"ratio pipeline / hand-written (is_valid):                 {p / q:7.2f}x")
    print(f"ratio pipeline / hand-written (Luma's validator):         {p / o:7.2f}x")


if __name__ == "__main__":
    main()
