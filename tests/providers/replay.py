"""Recorded provider traffic (tests/providers/recorded/), served back by a loopback server."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from providers.server import FakeServer

RECORDED = Path(__file__).parent / "recorded"


@dataclass(frozen=True)
class Recording:
    """One recorded exchange: where it comes from, what was sent, and what came back."""

    source: dict[str, Any]
    request: Any
    status: int
    response: Any


def load(provider: str, name: str) -> Recording:
    data = json.loads((RECORDED / provider / f"{name}.json").read_text(encoding="utf-8"))
    return Recording(data["source"], data["request"], data["status"], data["response"])


def serve(server: FakeServer, *recordings: Recording) -> FakeServer:
    """Script ``server`` to answer with the recorded responses, in order."""
    for r in recordings:
        server.reply(r.response, status=r.status)
    return server
