"""No secret reaches any output, in any form: every output channel × every secret shape × every
kind of error a handler (or a provider) can carry one in.

Each case runs ``luma run`` in-process three times — the error caught and returned (stdout), the
error uncaught (stderr), and the tool called natively by a model (a real OpenAI-compatible server
on 127.0.0.1, with ``--record``) — all with ``-v`` and ``--trace``. The secrets are the value of a
``credential`` of a tool that never runs (so it is known only because the run registers every
credential at start-up), a context value read through ``needs``, and the model's API key. Each
channel is then searched for every text the secret could appear as: raw, ``repr`` in both quote
styles, ``ascii``, JSON with and without ``ensure_ascii``, ``unicode_escape``, URL encoding, and
one of those inside another.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from luma.compile import check_file
from luma.cli_run import RunOptions, run_checked
from providers import openai_fake
from providers.server import Captured, FakeServer, Reply

HERE = Path(__file__).parent / "secrets" / "matrix"

SHAPES = {
    "plain": "plainSecret4821",
    "quotes": "Pa\"ss'wo\"rd-77",
    "backslashes": "Pa\\ss\\\\word-77",
    "non_ascii": "pässwörd-Ωµ-77",
    "mixed": "Pä\"ss\\\\wörd'-77",
    "whitespace": "Pass  wo\trd\nline-77",
}
KINDS = ("message", "code", "details_key", "details_value", "extra_field", "repr_needs",
         "key_error", "exception_str", "soft_rule", "provider_echo")
CHANNELS = ("stdout", "stderr_error", "stderr_warning", "verbose", "trace", "recording")


def roles(shape: str) -> dict[str, str]:
    base = SHAPES[shape]
    # an HTTP header carries only ASCII, and no line break
    ascii_base = "".join(base.encode("ascii", "ignore").decode().split())
    return {"credential": f"{base}-cred", "context": f"{base}-ctx",
            "api_key": f"sk-{ascii_base}-key"}


def _once(text: str) -> set[str]:
    return {
        text,
        repr(text)[1:-1], repr(text + '"')[1:-2], ascii(text)[1:-1], ascii(text + '"')[1:-2],
        json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1],
        text.encode("unicode_escape").decode("ascii"),
        quote(text, safe=""), quote_plus(text),
    }


def forms(secret: str) -> set[str]:
    """Every text ``secret`` may be written as, one or two escapes deep."""
    return {f for once in _once(secret) for f in _once(once)}


# ------------------------------------------------------------------------------- the runs


class Case:
    """The outputs of the three runs of one shape and kind, split by channel."""

    def __init__(self, runs: dict[str, dict[str, str]]) -> None:
        self.runs = runs
        self.channels: dict[str, str] = {c: "" for c in CHANNELS}
        for run in runs.values():
            self.channels["stdout"] += run["stdout"]
            self.channels["trace"] += run["trace"]
            self.channels["recording"] += run["recording"]
            for line in run["stderr"].splitlines(keepends=True):
                if line.startswith("warning["):
                    self.channels["stderr_warning"] += line
                elif line.startswith("  ") and not line.startswith(("  -->", "   |")):
                    self.channels["verbose"] += line
                else:
                    self.channels["stderr_error"] += line


def _validate(key: str) -> Any:
    def validate(req: Captured) -> Reply | None:
        if req.path != "/v1/chat/completions":
            return Reply({"error": {"message": f"unexpected path {req.path}"}}, 404)
        if req.headers.get("authorization") != f"Bearer {key}":
            return Reply({"error": {"message": "wrong key"}}, 401)
        return None
    return validate


def _run(tmp: Path, kind: str, mode: str, secrets: dict[str, str]) -> dict[str, str]:
    folder = tmp / mode
    folder.mkdir()
    program = folder / "prog.luma"
    shutil.copy(HERE / "prog.luma", program)
    with FakeServer(_validate(secrets["api_key"])) as server:
        if kind == "provider_echo":  # json.dumps: the key comes back \u- and \"-escaped
            server.reply({"error": {"message": f"Incorrect API key provided: "
                                               f"{secrets['api_key']}; project "
                                               f"{secrets['credential']}"}}, 400)
        else:
            server.reply(openai_fake.completion(tool_calls=[("call_1", "leak", {"kind": kind})]))
            server.reply(openai_fake.completion("done"))
        (folder / "luma.config.json").write_text(json.dumps({
            "tool_contexts": {"vault": {"password": {"env": "LEAK_CONTEXT"}}},
            "models": {"Echo": {"base_url": f"{server.base_url}/v1"}}}))
        checked = check_file(str(program))
        trace, record = folder / "trace.jsonl", folder / "recording.json"
        options = RunOptions(tool_modules=[str(HERE / "tools.py")], agent="Leaker",
                             args=[("kind", kind), ("mode", mode)], trace=str(trace),
                             record=str(record), verbose=True)
        out, err = io.StringIO(), io.StringIO()
        code = run_checked(checked, options, stdout=out, stderr=err)
    return {"code": str(code), "stdout": out.getvalue(), "stderr": err.getvalue(),
            "trace": trace.read_text(encoding="utf-8") if trace.exists() else "",
            "recording": record.read_text(encoding="utf-8") if record.exists() else ""}


_CASES: dict[tuple[str, str], Case] = {}


@pytest.fixture
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
         monkeypatch: pytest.MonkeyPatch) -> Case:
    shape, kind = request.param
    secrets = roles(shape)
    monkeypatch.setenv("LEAK_CREDENTIAL", secrets["credential"])
    monkeypatch.setenv("LEAK_CONTEXT", secrets["context"])
    monkeypatch.setenv("OPENAI_API_KEY", secrets["api_key"])
    monkeypatch.delenv("LUMA_APPROVED_TOOLS", raising=False)
    found = _CASES.get((shape, kind))
    if found is None:
        tmp = tmp_path_factory.mktemp(f"{shape}-{kind}")
        found = _CASES[(shape, kind)] = Case(
            {mode: _run(tmp, kind, mode, secrets) for mode in ("catch", "raise", "ask")})
    return found


CASES = [(shape, kind) for shape in SHAPES for kind in KINDS]


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("case", CASES, indirect=True, ids=[f"{s}-{k}" for s, k in CASES])
def test_no_form_of_any_secret_in_the_channel(case: Case, channel: str,
                                              request: pytest.FixtureRequest) -> None:
    shape, _ = request.node.callspec.params["case"]
    text = case.channels[channel]
    for role, secret in roles(shape).items():
        for form in forms(secret):
            assert form not in text, f"the {role} leaked into {channel} as {form!r}:\n{text}"


EXPECTED_ERROR = {
    "message": "error[LEAKED]: denied for [secret] and [secret]",
    "code": "error[[secret]]: bad code",
    "details_key": "error[LEAKED]: bad details",
    "details_value": "error[LEAKED]: bad details",
    "extra_field": "error[LEAKED]: bad extra",
    "repr_needs": "error[TOOL_FAILED]: Tool 'leak' failed: needs were "
                  "{'vault': {'password': '[secret]'}}, credential '[secret]'",
    "key_error": "error[TOOL_FAILED]: Tool 'leak' failed: KeyError: '[secret]'",
    "exception_str": "error[TOOL_FAILED]: Tool 'leak' failed: connection to [secret]@[secret] "
                     "refused",
    "provider_echo": "error[MODEL_HTTP_ERROR]: Model 'Echo': OpenAI answered HTTP 400: "
                     "Incorrect API key provided: [secret]; project [secret]",
}


@pytest.mark.parametrize("case", CASES, indirect=True, ids=[f"{s}-{k}" for s, k in CASES])
def test_what_the_user_sees_keeps_everything_but_the_secret(case: Case,
                                                            request: pytest.FixtureRequest
                                                            ) -> None:
    _, kind = request.node.callspec.params["case"]
    raised, caught = case.runs["raise"], case.runs["catch"]
    if kind == "soft_rule":
        assert raised["code"] == caught["code"] == "0", raised["stderr"]
        assert json.loads(caught["stdout"]) == {"text": "[secret] [secret]"}
        warning = case.channels["stderr_warning"].splitlines()[0]
        assert warning.startswith("warning[SOFT_RULE] leak.output.text: ")
        assert "[secret] [secret]" in warning
        return
    assert raised["code"] == "1", raised["stderr"]
    errors = [line for line in raised["stderr"].splitlines() if line.startswith("error")]
    assert errors[0] == EXPECTED_ERROR[kind]
    assert caught["code"] == "0", caught["stderr"]
    value = json.loads(caught["stdout"])
    expected_code = {"code": "[secret]", "repr_needs": "TOOL_FAILED", "key_error": "TOOL_FAILED",
                     "exception_str": "TOOL_FAILED",
                     "provider_echo": "MODEL_HTTP_ERROR"}.get(kind, "LEAKED")
    assert value["code"] == expected_code
    assert value["message"] == EXPECTED_ERROR[kind].split(": ", 1)[1]
    if kind == "details_key":
        assert value["details"] == {"[secret]": 2}
    if kind == "details_value":
        assert value["details"] == {"cred": "[secret]", "ctx": ["[secret]"]}
    if kind == "extra_field":
        assert (value["token"], value["nested"]) == ("[secret]", {"[secret]": "[secret]"})
    if kind == "provider_echo":
        recorded = json.loads(case.runs["raise"]["recording"])["exchanges"][0]["response"]
        assert recorded["body"]["error"]["message"] == (
            "Incorrect API key provided: [secret]; project [secret]")
    else:
        # the model saw the tool's failure, without the secret (a retryable typed error goes
        # back to it as a tool result; the others end the ask)
        assert case.runs["ask"]["recording"].count('"POST"') >= 1
