"""Handlers of desk.luma."""

import asyncio
import os


def count_words(input):
    return {"words": len(input["text"].split())}


def lookup(input):
    return {"id": "T-0", "team": input["team"]}


def open_ticket(input):
    return {"id": "T-" + input["request_id"], "team": input["team"]}


def close_ticket(input):
    return {"id": input["id"], "team": "ops"}


def broken(input):
    raise RuntimeError("the database is down, token " + os.environ["DESK_TOKEN"])


async def slow(input):
    await asyncio.sleep(input["ms"] / 1000)
    mark = os.environ.get("DESK_MARK")
    if mark:  # what a cancelled call never reaches
        with open(mark, "a") as f:
            f.write("finished\n")
    return {"words": input["ms"]}


def audit(input):
    return {"words": 0}


def echo(input):
    return {"text": input["text"]}
