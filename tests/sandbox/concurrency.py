"""Two async tools that record how many calls are inside this module at once."""

import asyncio

state = {"now": 0, "peak": 0}


async def _inside():
    state["now"] += 1
    state["peak"] = max(state["peak"], state["now"])
    await asyncio.sleep(0.05)
    state["now"] -= 1


async def probe(input):
    await _inside()
    return {"text": "probe"}


async def other(input):
    await _inside()
    return {"text": "other"}


def peak(input):
    return {"text": str(state["peak"])}
