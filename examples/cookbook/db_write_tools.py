"""Handlers for examples/cookbook/db_write.luma: a pretend database that logs every write."""

import sys

ROWS = {}


def db_write(input):
    ROWS[input["order_id"]] = input["total"]
    print(f"db_write ran: {input['order_id']} (row {len(ROWS)})", file=sys.stderr)
    return {"id": input["order_id"], "status": "created"}
