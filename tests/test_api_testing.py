"""luma.testing: a scripted model, replay of a recording, and the tool calls a run made."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest

import luma
from luma import testing

ROOT = Path(__file__).parent.parent
SUMMARIZE = ROOT / "examples" / "cookbook" / "cli" / "summarize.luma"
RECORDING = ROOT / "examples" / "cookbook" / "cli" / "summarize.recording.json"

TRIAGE = """
schema Ticket { id: string, team: string }
schema Route { team: string, ticket: string }

model Smart { provider: "openai", name: "gpt-5.4-mini" }

tool lookup_ticket(id: string) -> Ticket {
  description: "Look a ticket up."
  side_effects: "read"
}

tool assign(ticket: string, team: string, note?: string @default("none")) -> Ticket {
  description: "Assign a ticket to a team."
  side_effects: "write"
}

agent Router {
  model: Smart
  tools: [lookup_ticket, assign]

  fn run(text: string) -> Route {
    ask "Route this: {text}" -> Route
  }
}
"""


def _tools() -> dict[str, Any]:
    return {"lookup_ticket": lambda input: {"id": input["id"], "team": "billing"},
            "assign": lambda input: {"id": input["ticket"], "team": input["team"]}}


SCRIPT = [
    testing.call("lookup_ticket", id="T-42"),
    testing.calls(testing.call("assign", ticket="T-42", team="billing"),
                  testing.call("lookup_ticket", {"id": "T-43"})),
    testing.answer({"team": "billing", "ticket": "T-42"}),
]


def test_a_scripted_model_plays_its_turns_and_the_tool_calls_are_recorded() -> None:
    calls = testing.ToolCalls()
    with testing.loads(TRIAGE, tools=_tools(), script=SCRIPT, calls=calls,
                       env={}, stderr=io.StringIO()) as program:  # no API key needed
        assert program.run_sync("Router", text="refund") == {"team": "billing",
                                                            "ticket": "T-42"}
    # the calls of one turn run side by side: recorded in the order their handlers started
    assert calls.names[0] == "lookup_ticket"
    assert sorted(calls.names[1:]) == ["assign", "lookup_ticket"]
    assert calls.of("lookup_ticket") == [{"id": "T-42"}, {"id": "T-43"}]
    assert calls.of("assign") == [{"ticket": "T-42", "team": "billing", "note": "none"}]
    calls.assert_called("lookup_ticket", {"id": "T-43"})
    calls.assert_called("lookup_ticket", times=2)
    calls.assert_called("assign", {"team": "billing"}, times=1)


def test_each_run_plays_the_script_from_its_first_turn() -> None:
    calls = testing.ToolCalls()

    async def main() -> list[Any]:
        async with testing.loads(TRIAGE, tools=_tools(), script=SCRIPT, calls=calls,
                                 stderr=io.StringIO()) as program:
            return await asyncio.gather(*(program.run("Router", text=str(i)) for i in range(5)))

    assert asyncio.run(main()) == [{"team": "billing", "ticket": "T-42"}] * 5
    assert len(calls) == 15


def test_the_assertions_say_which_calls_were_made() -> None:
    calls = testing.ToolCalls()
    with testing.loads(TRIAGE, tools=_tools(), script=SCRIPT, calls=calls,
                       stderr=io.StringIO()) as program:
        program.run_sync("Router", text="x")
    with pytest.raises(AssertionError) as caught:
        calls.assert_called("assign", {"team": "sales"})
    assert str(caught.value).startswith(
        "expected a call of 'assign' with {'team': 'sales'}; the calls were: "
        "lookup_ticket({'id': 'T-42'}), ")
    assert "assign({'ticket': 'T-42', 'team': 'billing', 'note': 'none'})" in str(caught.value)
    with pytest.raises(AssertionError, match=r"^expected a call of 'assign' 2 times; "):
        calls.assert_called("assign", times=2)
    with pytest.raises(AssertionError, match=r"^expected no call of 'assign'; the calls"):
        calls.assert_not_called("assign")
    calls.clear()
    with pytest.raises(AssertionError) as none:
        calls.assert_called("assign")
    assert str(none.value) == "expected a call of 'assign'; no tool was called"


def test_a_script_that_runs_out_is_a_run_error() -> None:
    with testing.loads(TRIAGE, tools=_tools(), script=SCRIPT[:1],
                       stderr=io.StringIO()) as program:
        with pytest.raises(luma.RunError) as caught:
            program.run_sync("Router", text="x")
    assert caught.value.code == "MODEL_SCRIPT_EXHAUSTED"
    assert caught.value.message == ("Model 'scripted' has no scripted turn left: the script "
                                    "holds 1 turn and the run asked for turn 2.")


def test_a_malformed_script_stops_the_load() -> None:
    with pytest.raises(luma.LoadError) as caught:
        testing.loads(TRIAGE, tools=_tools(), script=[{"contents": "hi"}])
    assert caught.value.problems == [
        "Model 'scripted': the scripted turns given to luma.testing are not usable: turn 1 "
        "must be an object with \"content\" or \"tool_calls\"."]


def test_replay_serves_a_recording_to_every_run() -> None:
    with testing.load(SUMMARIZE, model="GPT54Mini", replay=RECORDING, env={},
                      stderr=io.StringIO()) as program:
        for _ in range(2):
            assert program.run_sync("Summarizer", text="Tides rise and fall twice a day.") \
                == {"title": "Tides", "bullets": ["Tides rise and fall twice a day."]}
        with pytest.raises(luma.RunError) as caught:
            program.run_sync("Summarizer", text="Tides rise and fall.")
    assert caught.value.code == "REPLAY_MISMATCH"
    assert caught.value.location is not None
    assert caught.value.location.text == 'ask "Summarize: {text}" -> Summary'


def test_tool_calls_of_a_tool_module_and_of_an_async_handler_are_recorded(
        tmp_path: Path) -> None:
    module = tmp_path / "tools.py"
    module.write_text("async def lookup_ticket(input):\n"
                      "    return {'id': input['id'], 'team': 'ops'}\n\n"
                      "def assign(input, signal=None):\n"
                      "    return {'id': input['ticket'], 'team': input['team']}\n")
    calls = testing.ToolCalls()
    with testing.loads(TRIAGE, path=tmp_path / "triage.luma", tool_modules=[module],
                       script=SCRIPT, calls=calls, stderr=io.StringIO()) as program:
        program.run_sync("Router", text="x")
    assert sorted(calls.names) == ["assign", "lookup_ticket", "lookup_ticket"]
