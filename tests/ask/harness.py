"""What the ask tests share: a program with an agent, the offline model driven by scripted
turns, a provider that records the requests the engine sends, and a runner."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from luma.models.ask import AskEngine
from luma.models.base import ChatRequest, ChatResponse, Provider
from luma.runtime.config import parse_config
from luma.runtime.engine import Runtime
from luma.runtime.errors import LumaError
from luma.runtime.interpreter import Interpreter
from luma.runtime.telemetry import Telemetry
from luma.syntax.parse import parse_text

HERE = Path(__file__).parent


class RecordingProvider:
    """A provider that keeps every request it is sent and lets ``inner`` answer."""

    def __init__(self, inner: Provider, log: list[ChatRequest]) -> None:
        self.inner = inner
        self.log = log

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.log.append(request)
        return await self.inner.complete(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class Setup:
    runtime: Runtime
    engine: AskEngine
    requests: list[ChatRequest] = field(default_factory=list)

    @property
    def stderr(self) -> str:
        return self.runtime.stderr.getvalue()  # type: ignore[attr-defined]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.runtime.telemetry.events if e["event"] == name]

    def run(self, agent: str | None = "A", fn: str = "run", **args: Any) -> Any:
        async def go() -> Any:
            interpreter = Interpreter(self.runtime)
            try:
                if agent is None:
                    return await interpreter.run_top_level()
                return await interpreter.call_method(agent, fn, args)
            finally:
                await self.runtime.aclose()
        return asyncio.run(go())

    def error(self, agent: str | None = "A", fn: str = "run", **args: Any) -> LumaError:
        try:
            value = self.run(agent, fn, **args)
        except LumaError as err:
            return err
        raise AssertionError(f"the run succeeded with {value!r}")


def setup(source: str, tmp_path: Path, *, turns: list[Any] | None = None,
          handlers: Mapping[str, Callable[..., Any]] | None = None,
          env: Mapping[str, str] | None = None, config: dict[str, Any] | None = None,
          default_model: str | None = None, interactive: bool = False,
          record: str | None = None, replay: str | None = None,
          model: str | None = 'model M {\n  provider: "test"\n  responses: "turns.json"\n}\n'
          ) -> Setup:
    """A runtime for ``source`` with an ask engine whose requests are recorded. With ``turns``
    the program gets a scripted offline model ``M`` (``model`` replaces its declaration)."""
    text = source
    if turns is not None:
        (tmp_path / "turns.json").write_text(json.dumps(turns), encoding="utf-8")
        if model:
            text = model + source
    program, diagnostics = parse_text(text, str(tmp_path / "program.luma"))
    assert program is not None and not diagnostics, [d.message for d in diagnostics]
    stderr = io.StringIO()
    runtime = Runtime(program, handlers=dict(handlers or {}),
                      config=parse_config(config) if config is not None else None,
                      env=dict(env or {}), telemetry=Telemetry(stderr=stderr), stderr=stderr,
                      interactive=interactive, base_dir=str(tmp_path))
    requests: list[ChatRequest] = []
    engine = AskEngine(runtime, default_model=default_model, record=record, replay=replay,
                       wrap_provider=lambda p: RecordingProvider(p, requests))
    runtime.ask_engine = engine
    return Setup(runtime, engine, requests)


def messages(request: ChatRequest) -> list[tuple[str, str | None]]:
    """The conversation of a request as (role, content) pairs."""
    return [(m.role, m.content) for m in request.messages]
