"""What the tool pipeline is told about a call in a ``"sandbox": "process"`` child (kept apart
from :mod:`luma.runtime.process_modules`, so that the pipeline imports no process machinery)."""

from __future__ import annotations

# How a child ends after a handler went past tool_module_policy.max_memory_mb (its answer says
# so with "restart").
EXIT_MEMORY = 70
# How a child that went past a call's CPU time limit ends: with nothing else running and every
# call it took answered (so a call still on its way to it has not begun, and goes to the next
# process), or at once, taking the other calls it was running with it.
EXIT_IDLE = 71
EXIT_STOPPED = 72


class RemoteFailure(Exception):
    """A handler in a child process failed (or its process ended): the pipeline reports
    ``text`` as the call's ``TOOL_FAILED``, as it would an exception raised in-process."""

    def __init__(self, text: str, exception: str) -> None:
        super().__init__(text)
        self.text = text
        self.exception = exception


class RemoteOutputInvalid(Exception):
    """What a handler in a child process returned is not a JSON value (``TOOL_OUTPUT_INVALID``):
    where in the output, and why."""

    def __init__(self, path: str, text: str) -> None:
        super().__init__(f"{path}: {text}")
        self.path = path
        self.text = text
