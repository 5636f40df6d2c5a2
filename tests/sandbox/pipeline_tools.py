"""The handlers of tests/test_sandbox_process_pipeline.py, run in-process and in a process."""

from luma import LumaToolError

CALLS = {"count": 0}


def echo(input):
    CALLS["count"] += 1
    return {"text": input["text"], "calls": CALLS["count"]}


def missing(input):
    return {"calls": 1}


def typed(input):
    raise LumaToolError("NOT_FOUND", "no such thing", details={"id": 7}, hint="look again")


def fails(input):
    raise ValueError("bad input " + input["text"])


def lookup(input):
    return {}["absent"]


def not_json(input):
    return {"text": {1, 2}, "calls": 1}


def slow(input, signal):
    signal.wait(5)
    return {"text": "late", "calls": 1}


def flaky(input):
    CALLS["count"] += 1
    if CALLS["count"] < 3:
        raise LumaToolError("BUSY", "try again", retryable=True)
    return {"text": "third time", "calls": CALLS["count"]}


def secret(input, needs):
    return {"text": needs["creds"]["token"], "calls": 1}
