"""The pydantic-ai side of the native-tool-loop benchmark; run with the interpreter of
``bench/.venv-pydantic-ai`` by ``bench/native_tool_loop.py``, never imported by it.

It builds, for each run, what the Luma side builds: an OpenAI-compatible chat model pointed at
the loopback server (``OpenAIChatModel`` + ``OpenAIProvider(base_url=..., api_key=...)``), an
agent with one async tool ``add(a, b) -> {"result": a + b}`` and a structured final answer sent
as the provider's JSON-schema response format (``NativeOutput``) and validated by pydantic.
No request limit: the loop makes up to 1,001 requests.

Protocol: one JSON object per line on stdin, ``{"model": "loop-100x10"}``; one JSON object per
line on stdout, ``{"wall_s", "cpu_s", "output", "error"}``. Timing covers building the agent and
the whole run (as the Luma side's covers preparing the runtime and the whole run).

    bench/.venv-pydantic-ai/bin/python bench/native_tool_loop_pydantic_ai.py --base-url URL
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from importlib.metadata import version
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, NativeOutput
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import UsageLimits

PROMPT = ("Call add as many times as you are told, then report how many calls you made and the "
          "total.")
API_KEY = "sk-bench-not-a-real-key"


class Answer(BaseModel):
    calls: int
    total: int


async def add(a: int, b: int) -> dict[str, int]:
    """Add two integers."""
    return {"result": a + b}


async def one_run(base_url: str, model_name: str) -> Answer:
    model = OpenAIChatModel(model_name,
                            provider=OpenAIProvider(base_url=base_url, api_key=API_KEY))
    agent = Agent(model, output_type=NativeOutput(Answer), tools=[add])
    result = await agent.run(PROMPT, usage_limits=UsageLimits(request_limit=None))
    return result.output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    args = parser.parse_args()
    print(json.dumps({"versions": {name: version(name) for name in
                                   ("pydantic-ai-slim", "pydantic", "openai")},
                      "python": sys.version.split()[0]}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        reply: dict[str, Any] = {}
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            output = asyncio.run(one_run(args.base_url, command["model"]))
            reply["output"] = output.model_dump()
        except Exception as exc:  # reported to the driver, which stops the benchmark
            reply["error"] = f"{type(exc).__name__}: {exc}"
        reply["wall_s"] = time.perf_counter() - wall
        reply["cpu_s"] = time.process_time() - cpu
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
