"""Handlers for examples/cookbook/needs.luma. `needs` holds the contexts the contract declares:
here {"db": {"user": ..., "password": ..., "port": ...}} (the password is passed through even
though the Database schema does not describe it)."""


def find_customer(input, signal=None, needs=None):
    db = needs["db"]
    assert db["password"], "the password reaches the handler"
    return {"id": input["id"], "name": "Ada Lovelace",
            "served_by": f"{db['user']}@db:{db['port']}"}
