"""Handlers of examples/service/triage.luma."""

import itertools

_tickets = itertools.count(1)


def text_stats(input):
    return {"words": len(input["text"].split())}


def open_ticket(input):
    return {"id": f"T-{next(_tickets)}", "team": input["team"]}
