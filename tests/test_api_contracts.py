"""``Program.contracts`` and ``Program.call_contract``: the seam ``luma mcp serve`` is built on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import luma

HERE = Path(__file__).parent / "mcp_serve"


def load() -> luma.Program:
    return luma.load(HERE / "desk.luma", tool_modules=[HERE / "desk_tools.py"], env={})


def test_contracts_of_an_agent_and_of_the_program() -> None:
    with load() as program:
        reader = program.contracts("Reader")
        assert [c.name for c in reader] == ["Reader.words", "count_words", "lookup"]
        words = reader[0]
        assert words.agent_method == ("Reader", "words") and words.wrapped
        assert words.output_schema == {"$schema": "https://json-schema.org/draft/2020-12/schema",
                                       "type": "object",
                                       "properties": {"result": {"type": "integer"}},
                                       "required": ["result"], "additionalProperties": False}
        assert [c.name for c in program.contracts()][:3] == ["audit", "broken", "close_ticket"]
        with pytest.raises(luma.RunError) as unknown:
            program.contracts("Reeder")
        assert unknown.value.code == "AGENT_NOT_FOUND"
        assert unknown.value.message == "Unknown agent 'Reeder'; did you mean 'Reader'?."


def test_call_contract_asks_its_approve_callback() -> None:
    asked: list[tuple[str, Any]] = []

    def approve(tool: str, shown: Any) -> bool:
        asked.append((tool, shown))
        return tool == "open_ticket"

    async def go() -> Any:
        async with load() as program:
            contracts = {c.name: c for c in program.contracts("Careful")}
            opened = await program.call_contract(contracts["open_ticket"],
                                                 {"request_id": "9", "team": "ops"},
                                                 agent="Careful", approve=approve)
            with pytest.raises(luma.RunError) as refused:
                await program.call_contract(contracts["close_ticket"], {"id": "T-9"},
                                            agent="Careful", approve=approve)
            return opened, refused.value

    opened, refused = asyncio.run(go())
    assert opened == {"id": "T-9", "team": "ops"}
    assert refused.code == "TOOL_PERMISSION_DENIED"
    assert [tool for tool, _ in asked] == ["open_ticket", "close_ticket"]
