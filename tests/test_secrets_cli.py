"""Secrets (credential values, ``needs`` values) never reach stdout, stderr or the trace — even
when a handler puts them into its own error message."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cli_runner import luma

HERE = Path(__file__).parent / "secrets"
SECRETS = {
    "SECRET_DB_PASSWORD": "pw-credential-5f1e9a77",
    "SECRET_DB_USER": "user-context-8c2d41b0",
    "SECRET_DB_CONTEXT_PASSWORD": "pw-context-93ab7e12",
}


def test_no_secret_in_any_output(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    env = {**os.environ, **SECRETS, "SECRET_DB_PORT": "5432", "LUMA_APPROVED_TOOLS": "db_write"}
    r = luma(str(HERE / "prog.luma"), "--tool-module", str(HERE / "tools.py"),
             "--arg", "value=v", "--trace", str(trace), "-v", env=env)
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout) == {"ok": True, "user": "writer"}
    assert "caught TOOL_FAILED: Tool 'db_write' failed: cannot connect as" in r.stderr
    text = trace.read_text()
    events = [json.loads(line) for line in text.splitlines()]
    assert [e["outcome"] for e in events if e["event"] == "tool.call"] == ["ok", "TOOL_FAILED"]
    for name, secret in SECRETS.items():
        for where, output in (("stdout", r.stdout), ("stderr", r.stderr), ("trace", text)):
            assert secret not in output, f"{name} leaked into {where}"


def test_a_missing_credential_is_named_but_never_shown(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SECRET_")}
    env.update({"SECRET_DB_USER": SECRETS["SECRET_DB_USER"], "LUMA_APPROVED_TOOLS": "db_write"})
    r = luma(str(HERE / "prog.luma"), "--tool-module", str(HERE / "tools.py"),
             "--arg", "value=v", env=env)
    assert r.code == 1
    assert r.stderr.splitlines()[0] == (
        "error[TOOL_PERMISSION_DENIED]: Tool 'db_write' is missing credential: SECRET_DB_PASSWORD.")
    assert SECRETS["SECRET_DB_USER"] not in r.stderr + r.stdout


PRINTING = Path(__file__).parent / "secrets" / "printing"


def test_what_a_handler_prints_or_logs_is_scrubbed_too() -> None:
    credential, password = 'cr"ed\\entiäl-99', "pa'ss\"wörd-11"
    env = {**os.environ, "PRINT_CREDENTIAL": credential, "PRINT_VAULT_PASSWORD": password}
    r = luma(str(PRINTING / "prog.luma"), "--tool-module", str(PRINTING / "tools.py"), env=env)
    assert r.code == 0, r.stderr
    # only the result on stdout; the handler's print (which goes to stderr while a program
    # runs), its import-time print, a print to stderr and a logging call on stderr
    assert r.stdout == "{\n  \"ok\": true\n}\n"
    lines = r.stderr.splitlines()
    for line in ("loading with [secret]", "connecting with '[secret]'", "credential [secret]",
                 "vault {'vault': {'password': '[secret]'}}"):
        assert line in lines, r.stderr
    for secret in (credential, password, repr(credential)[1:-1], repr(password)[1:-1]):
        assert secret not in r.stdout + r.stderr
