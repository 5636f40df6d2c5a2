"""A handler that returns 'reslt' where CalcResult has 'result'."""

from tools_types import CalcResult, CalculateInput


def calculate(input: CalculateInput) -> CalcResult:
    return {"reslt": input["a"] + input["b"]}
