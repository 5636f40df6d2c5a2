"""What the provider tests share: a small program's tools and answer schema, and a runner."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from luma.models.base import ChatRequest, Message, ModelSettings, ResponseFormat, ToolSpec
from luma.models.export import tool_specs
from luma.models.http import ModelHttp
from luma.schema.compile import SchemaCompiler
from luma.syntax.parse import parse_text

T = TypeVar("T")

PROGRAM = """
schema CalcResult { result: float }
schema TextStats { words: int }
schema Answer {
  summary: string @desc("One sentence.")
  total: float @range(0, 1000000)
  note?: string @length(0, 500)
}
schema Database { url: string }

tool calculate(
  a: float @range(0, 1000000),
  b: float @range(0, 1000000),
  operation: enum["add", "multiply"] @desc("The operation to perform")
) -> CalcResult {
  description: "Add or multiply two numbers."
}

tool text_stats(text: string, language?: string) -> TextStats {
  description: "Count the words of a text."
  needs db: Database
}
"""


def program() -> Any:
    parsed, diagnostics = parse_text(PROGRAM, "tools.luma")
    assert parsed is not None and not diagnostics, diagnostics
    return parsed


def tools() -> tuple[ToolSpec, ...]:
    p = program()
    return tuple(tool_specs(p, p.tools))


def answer_format(strict: bool | None = None) -> ResponseFormat:
    schema = SchemaCompiler(program()).standalone("Answer")
    return ResponseFormat("Answer", schema, strict)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def settings(provider: str, base_url: str, **overrides: Any) -> ModelSettings:
    values: dict[str, Any] = {"name": "Main", "provider": provider, "model": "m-1",
                              "base_url": base_url, "max_retries": 2, "timeout_ms": 30000}
    values.update(overrides)
    return ModelSettings(**values)


async def complete(provider: Any, request: ChatRequest) -> Any:
    try:
        return await provider.complete(request)
    finally:
        await provider.http.aclose()


def user(text: str) -> Message:
    return Message("user", text)


def fresh_http() -> ModelHttp:
    return ModelHttp()
