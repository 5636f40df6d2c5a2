"""A user's own pytest suite for examples/quickstart.luma, with luma.testing.

Run it from the repository root: pytest examples/python/test_quickstart.py
"""

import pydantic
import pytest

import luma
from luma import testing


class Answer(pydantic.BaseModel):
    summary: str
    words: int
    sum: float


@pytest.fixture
def calls() -> testing.ToolCalls:
    return testing.ToolCalls()


@pytest.fixture
def program(calls: testing.ToolCalls):
    script = [
        testing.call("calculate", a=20, b=22, operation="add"),
        testing.answer({"summary": "A short text.", "words": 5, "sum": 42}),
    ]
    with testing.load("examples/quickstart.luma",
                      tool_modules=["examples/quickstart_tools.py"],
                      script=script, calls=calls) as program:
        yield program


def test_the_flow_counts_words_and_adds(program: luma.Program,
                                        calls: testing.ToolCalls) -> None:
    answer = program.run_sync("Flow", text="Luma keeps tool contracts typed",
                              output_type=Answer)
    assert answer == Answer(summary="A short text.", words=5, sum=42.0)
    assert calls.names == ["text_stats", "calculate", "calculate"]
    calls.assert_called("text_stats", {"text": "Luma keeps tool contracts typed"})
    calls.assert_called("calculate", {"operation": "multiply", "a": 5, "b": 2})
    calls.assert_called("calculate", {"operation": "add", "a": 20, "b": 22})


def test_a_bad_argument_is_a_run_error(program: luma.Program) -> None:
    with pytest.raises(luma.RunError) as caught:
        program.run_sync("Flow", text=42)
    assert caught.value.code == "ARGUMENT_INVALID"
