"""A handler module that prints secrets: at import, and from a call on both streams."""

import logging
import os
import sys

print(f"loading with {os.environ['PRINT_CREDENTIAL']}")


def chatty(input, needs):
    password = needs["vault"]["password"]
    print(f"connecting with {password!r}")
    print(f"credential {os.environ['PRINT_CREDENTIAL']}", file=sys.stderr)
    logging.getLogger("chatty").warning("vault %s", needs)
    return {"ok": True}


def unused(input):
    raise AssertionError("never called")
