"""Handlers for examples/cookbook/fetch.luma: a pretend web server that is briefly unavailable."""

import sys

from luma import LumaToolError

ATTEMPTS = {}


def fetch_page(input):
    url = input["url"]
    ATTEMPTS[url] = ATTEMPTS.get(url, 0) + 1
    print(f"fetch_page attempt {ATTEMPTS[url]}: {url}", file=sys.stderr)
    if url.endswith("/missing"):
        raise LumaToolError(code="NOT_FOUND", message=f"{url} does not exist.",
                            retryable=False, status=404)
    if ATTEMPTS[url] <= 2:
        raise LumaToolError(code="UNAVAILABLE", message="The server is busy.",
                            retryable=True, status=503)
    return {"url": url, "body": "<h1>Hello</h1>"}
