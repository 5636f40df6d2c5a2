"""Handlers for examples/cookbook/circuit.luma.

`http_get` is a sync handler: with a timeout it runs in a worker thread, which Python cannot
kill. It watches its Signal, so it stops as soon as the runtime gives up on it.
"""

import sys


def http_get(input, signal):
    url = input["url"]
    print(f"http_get {url}", file=sys.stderr)
    if "slow" in url:
        # Wait for the server, but give up as soon as the runtime fires the Signal (its reason
        # is then "timeout"); whatever this returns after that is discarded.
        signal.wait(10)
        return {"status": 0}
    if "down" in url:
        raise ConnectionError(f"connection refused by {url}")
    return {"status": 200}
