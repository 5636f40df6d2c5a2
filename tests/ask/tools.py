"""Handlers for the ask tests' programs."""

from __future__ import annotations

import asyncio
from typing import Any

from luma.runtime.errors import LumaToolError

LOG: list[str] = []


def calculate(input: dict[str, Any]) -> dict[str, Any]:
    LOG.append(f"calculate:{input['operation']}")
    if input["operation"] == "add":
        return {"result": input["a"] + input["b"]}
    return {"result": input["a"] * input["b"]}


async def text_stats(input: dict[str, Any]) -> dict[str, Any]:
    LOG.append("text_stats")
    return {"characters": len(input["text"]), "words": len(input["text"].split())}


def flaky(input: dict[str, Any]) -> dict[str, Any]:
    raise LumaToolError(code="BUSY", message="The service is busy; try again in a moment.",
                        retryable=True)


def broken(input: dict[str, Any]) -> dict[str, Any]:
    raise ValueError("the disk is on fire")


def echo(input: dict[str, Any]) -> dict[str, Any]:
    return {"text": input["text"]}


class Gauge:
    """Counts how many calls run at once, and the order they start in."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.started: list[str] = []

    def handler(self, label: str, pause: float = 0.05) -> Any:
        async def run(input: dict[str, Any]) -> dict[str, Any]:
            self.started.append(f"{label}:{input['text']}")
            self.running += 1
            self.peak = max(self.peak, self.running)
            await asyncio.sleep(pause)
            self.running -= 1
            return {"text": input["text"]}
        return run
