"""What the bridges share, below all of them: the errors they raise and cancelling a statement
when its call's Signal fires."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class DataStartError(Exception):
    """The datasources cannot start; one line per problem (exit 2)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


class StatementTimedOut(Exception):
    """A built-in bridge's statement ran past its timeout on the database side."""


class StatementCancelled(Exception):
    """A built-in bridge's statement was cancelled because the call's Signal fired."""


def cancel_on(signal: Any, cancel: Callable[[], None]) -> Callable[[], None]:
    """Call ``cancel()`` (in a thread of its own, so the firing side never waits on the
    database) when ``signal`` fires while the statement runs; the returned function marks the
    statement done, after which a late signal does nothing."""
    lock = threading.Lock()
    running = [True]

    def fire() -> None:
        with lock:
            if running[0]:
                threading.Thread(target=cancel, name="luma-data-cancel", daemon=True).start()

    def done() -> None:
        with lock:
            running[0] = False

    if signal is not None:
        signal.add_listener(fire)
    return done
