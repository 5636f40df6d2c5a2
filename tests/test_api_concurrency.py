"""One loaded program, many runs at once (docs/python.md "Concurrency"): 200 concurrent runs
of an agent with direct and native tool calls on the offline model; single-flight, the cache
and idempotency hold across runs; circuit breakers are each run's own."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import luma

DESK = Path(__file__).parent / "api" / "desk.luma"
RUNS = 200
KEYS = 20


class Tools:
    """Handlers that count how often each input ran."""

    def __init__(self) -> None:
        self.ran: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()

    def _count(self, tool: str, what: Any) -> None:
        with self.lock:
            self.ran[(tool, str(what))] += 1

    async def shared_count(self, input: dict[str, Any]) -> dict[str, Any]:
        self._count("shared_count", input["topic"])
        await asyncio.sleep(0.05)  # long enough for every run to arrive while it runs
        return {"hits": 1}

    def open_ticket(self, input: dict[str, Any]) -> dict[str, Any]:
        self._count("open_ticket", input["request_id"])
        return {"id": "T-" + input["request_id"], "team": input["team"]}

    def take_note(self, input: dict[str, Any]) -> dict[str, Any]:
        self._count("take_note", input["text"])
        return {"text": input["text"]}

    def flaky(self, input: dict[str, Any]) -> dict[str, Any]:
        self._count("flaky", input["run"])
        if input["fail"]:
            raise RuntimeError("down")
        return {"ok": True}

    def handlers(self) -> dict[str, Any]:
        return {name: getattr(self, name)
                for name in ("shared_count", "open_ticket", "take_note", "flaky")}


def test_two_hundred_concurrent_runs_share_the_cache_and_the_idempotency_store() -> None:
    tools = Tools()
    events: dict[int, list[dict[str, Any]]] = {i: [] for i in range(RUNS)}

    def listener(i: int) -> Any:
        return lambda event: events[i].append(event)

    async def main() -> list[Any]:
        async with luma.load(DESK, tools=tools.handlers(), stderr=io.StringIO()) as program:
            return await asyncio.gather(*(
                program.run("Desk", n=i, key=f"k{i % KEYS}", on_event=listener(i))
                for i in range(RUNS)))

    results = asyncio.run(main())

    for i, result in enumerate(results):
        assert result["n"] == i and result["hits"] == 1
        assert result["ticket"] == f"T-k{i % KEYS}"
        assert set(result["reply"]) == {"team", "hits"}
    # every run made its direct calls and its model's native calls, in its own events
    for i in range(RUNS):
        calls = [(e["tool"], e["mode"]) for e in events[i] if e["event"] == "tool.call"]
        assert sorted(calls) == sorted([("shared_count", "direct"), ("open_ticket", "direct"),
                                        ("shared_count", "native"), ("open_ticket", "native"),
                                        ("take_note", "native")]), i
        assert all(e["outcome"] == "ok" for e in events[i] if e["event"] == "tool.call")
    # the cached tool ran once per distinct input, whatever the number of runs
    count_inputs = [what for (tool, what) in tools.ran if tool == "shared_count"]
    assert all(tools.ran[("shared_count", what)] == 1 for what in count_inputs)
    assert "all" in count_inputs
    direct = [e for i in range(RUNS) for e in events[i]
              if e["event"] == "tool.call" and e["tool"] == "shared_count"
              and e["mode"] == "direct"]
    assert sum(1 for e in direct if e["single_flight"]) == RUNS - 1  # all waited for one
    # the idempotent tool ran once per key, across runs
    ticket_keys = {what for (tool, what) in tools.ran if tool == "open_ticket"}
    assert {f"k{i}" for i in range(KEYS)} <= ticket_keys
    assert all(tools.ran[("open_ticket", key)] == 1 for key in ticket_keys)
    replays = sum(1 for i in range(RUNS) for e in events[i]
                  if e["event"] == "tool.call" and e["tool"] == "open_ticket"
                  and e["mode"] == "direct" and e["idempotent_replay"])
    assert replays == RUNS - KEYS
    # an uncached tool ran in every run
    assert sum(n for (tool, _), n in tools.ran.items() if tool == "take_note") == RUNS


def test_each_run_has_its_own_circuit_breaker() -> None:
    tools = Tools()

    async def main() -> list[Any]:
        async with luma.load(DESK, tools=tools.handlers(), stderr=io.StringIO()) as program:
            return await asyncio.gather(*(program.run("Breaker", n=i, fail=i % 2 == 0)
                                          for i in range(40)))

    failures = asyncio.run(main())
    assert failures == [4 if i % 2 == 0 else 0 for i in range(40)]
    # a failing run stopped calling at its limit; the others were not affected by it
    assert [tools.ran[("flaky", str(i))] for i in range(40)] == \
        [2 if i % 2 == 0 else 4 for i in range(40)]


def test_threads_share_one_program() -> None:
    tools = Tools()
    with luma.load(DESK, tools=tools.handlers(), stderr=io.StringIO()) as program:
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda i: program.run_sync("Desk", n=i, key=f"k{i % 5}"),
                                    range(40)))
    assert [r["ticket"] for r in results] == [f"T-k{i % 5}" for i in range(40)]
    assert all(tools.ran[("open_ticket", f"k{i}")] == 1 for i in range(5))
    # each thread's loop ran the cached tool at most once; the value was shared after that
    assert tools.ran[("shared_count", "all")] <= 8


LIMITED = """
schema Out { peak: int }
tool busy(n: int) -> Out { description: "Stays a while in its module." }
agent Worker {
  tools: [busy]
  fn run(n: int) -> Out { return tool busy({ n: n }) }
}
"""

LIMITED_MODULE = """
import asyncio
import threading

_lock = threading.Lock()
_inside = 0
_peak = 0


async def busy(input):
    global _inside, _peak
    with _lock:
        _inside += 1
        _peak = max(_peak, _inside)
    try:
        await asyncio.sleep(0.01)
    finally:
        with _lock:
            _inside -= 1
    return {"peak": _peak}
"""


def test_a_modules_max_concurrency_holds_across_runs_and_threads(tmp_path: Path) -> None:
    (tmp_path / "limited.py").write_text(LIMITED_MODULE, encoding="utf-8")
    (tmp_path / "luma.config.json").write_text(json.dumps({
        "tool_modules": ["./limited.py"],
        "tool_module_policy": {"sandbox": "none", "max_concurrency": 2}}), encoding="utf-8")

    with luma.loads(LIMITED, path=tmp_path / "worker.luma", stderr=io.StringIO()) as program:
        async def many() -> list[Any]:
            return await asyncio.gather(*(program.run("Worker", n=i) for i in range(30)))

        with ThreadPoolExecutor(4) as pool:
            threads = [pool.submit(lambda: asyncio.run(many())) for _ in range(4)]
            results = [r for t in threads for r in t.result()]
    assert len(results) == 120
    assert max(r["peak"] for r in results) == 2
