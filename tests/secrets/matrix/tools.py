"""Handlers that put the run's secrets everywhere an error (or a result) can carry them."""

import os

from luma import LumaToolError


class VaultDown(Exception):
    def __init__(self, where):
        super().__init__("vault down")
        self.where = where

    def __str__(self):
        return f"connection to {self.where} refused"


def leak(input, needs):
    cred = os.environ["LEAK_CREDENTIAL"]  # the credential of a tool that never runs
    ctx = needs["vault"]["password"]
    kind = input["kind"]
    if kind == "message":
        raise LumaToolError("LEAKED", f"denied for {cred} and {ctx}", retryable=True)
    if kind == "code":
        raise LumaToolError(cred, "bad code", retryable=True)
    if kind == "details_key":
        raise LumaToolError("LEAKED", "bad details", retryable=True, details={cred: 1, ctx: 2})
    if kind == "details_value":
        raise LumaToolError("LEAKED", "bad details", retryable=True,
                            details={"cred": cred, "ctx": [ctx]})
    if kind == "extra_field":
        raise LumaToolError("LEAKED", "bad extra", retryable=True, token=cred, nested={ctx: ctx})
    if kind == "repr_needs":
        raise RuntimeError(f"needs were {needs!r}, credential {cred!r}")
    if kind == "key_error":
        return {"text": {}[cred]}
    if kind == "exception_str":
        raise VaultDown(f"{ctx}@{cred}")
    if kind == "soft_rule":
        return {"text": f"{cred} {ctx}"}
    raise AssertionError(kind)


def guarded(input):
    raise AssertionError("never called")
