"""What the tool pipeline is told about a call in a ``"sandbox": "process"`` child (kept apart
from :mod:`luma.runtime.process_modules`, so that the pipeline imports no process machinery)."""

from __future__ import annotations


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
