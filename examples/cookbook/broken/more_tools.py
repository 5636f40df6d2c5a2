"""Deliberately conflicting: a second handler for `calculate` (docs/cli.md, error E041)."""


def calculate(input):
    return {"result": 0}
