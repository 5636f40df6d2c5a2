"""The recordings of the golden set in examples/eval/: built, not recorded from a provider.

No key is at hand to record ``luma eval`` against OpenAI, so each model's turns are written
here (``SCRIPTS``), shaped as OpenAI Chat Completions responses from the real recorded ones in
tests/providers/recorded/openai/ (the templates keep their shape; only the content, ids, model
name and token counts change), and served from a loopback OpenAI server that checks every
request Luma sends against the wire format. ``luma eval --record`` records that traffic; the
loopback address and the server's own headers are then replaced by OpenAI's.

    .venv/bin/python tests/eval_golden.py        # rewrite examples/eval/recordings/

The test declared in triage.luma is recorded the same way (``luma test --record``), with
GPT54's turns of case 9.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "eval"
RECORDINGS = EXAMPLE / "recordings"
TEMPLATES = ROOT / "tests" / "providers" / "recorded" / "openai"
MODELS = {"GPT54Mini": "gpt-5.4-mini", "GPT54": "gpt-5.4"}
OPENAI_URL = "https://api.openai.com/v1/chat/completions"
TEST_CASE = 9  # the case whose turns the test in triage.luma is recorded with

Turn = tuple[str, Any]  # ("tools", [(name, arguments), ...]) or ("answer", the answer object)


def _answer(team: str, reply: str) -> Turn:
    return ("answer", {"team": team, "reply": reply})


def _tools(*calls: tuple[str, dict[str, Any]]) -> Turn:
    return ("tools", list(calls))


# Per model, per case of golden.jsonl (in order), the model's turns.
SCRIPTS: dict[str, list[list[Turn]]] = {
    "GPT54Mini": [
        [_tools(("find_orders", {"customer_id": "c-100"})),
         _answer("shipping", "Your order o-56 has shipped.")],
        [_tools(("get_invoice", {"invoice_id": "INV-7"})),
         _answer("billing", "Billing will look into the double charge on INV-7.")],
        [_answer("none", "Hello! How can I help you today?")],
        [_tools(("open_ticket", {"team": "technical", "summary": "The app crashes at log-in."})),
         _answer("technical", "I opened ticket T-TEC-1 for our technical team.")],
        # looks up the customer's orders instead of the invoice
        [_tools(("find_orders", {"customer_id": "c-200"})),
         _answer("billing", "Billing can tell you whether INV-9 is paid.")],
        # finds the order but opens no ticket
        [_tools(("find_orders", {"customer_id": "c-300"})),
         _answer("shipping", "Order o-81 is still open; shipping will follow up.")],
        [_answer("none", "We are open from 9 to 17, Monday to Friday.")],
        # a wrong argument name first: the runtime rejects the input and the model calls again
        [_tools(("get_invoice", {"invoice": "INV-3"})),
         _tools(("get_invoice", {"invoice_id": "INV-3"})),
         _answer("billing", "Billing will check the amount of INV-3.")],
        # a team that is not in the enum first: the answer is rejected and asked for again
        [_tools(("find_orders", {"customer_id": "c-410"})),
         _answer("delivery", "Order o-90 shows as shipped."),
         _answer("shipping", "Order o-90 shows as shipped; shipping will trace it.")],
        # the right tool, the wrong team
        [_tools(("find_orders", {"customer_id": "c-100"})),
         _answer("shipping", "Order o-55 was cancelled.")],
    ],
    "GPT54": [
        [_tools(("find_orders", {"customer_id": "c-100"})),
         _answer("shipping", "Your order o-56 has shipped; o-55 was cancelled.")],
        [_tools(("get_invoice", {"invoice_id": "INV-7"})),
         _answer("billing", "Billing will refund the double charge on INV-7.")],
        [_answer("none", "Hello! What can I do for you?")],
        [_tools(("open_ticket", {"team": "technical",
                                 "summary": "The app crashes when the customer logs in."})),
         _answer("technical", "Ticket T-TEC-1 is open with our technical team.")],
        [_tools(("get_invoice", {"invoice_id": "INV-9"})),
         _answer("billing", "INV-9 (15.00) is not paid yet.")],
        [_tools(("find_orders", {"customer_id": "c-300"}),
                ("open_ticket", {"team": "shipping", "summary": "Order o-81 open for two weeks."})),
         _answer("shipping", "Order o-81 is still open; ticket T-SHI-1 is with shipping.")],
        [_answer("none", "We are open from 9 to 17, Monday to Friday.")],
        [_tools(("get_invoice", {"invoice_id": "INV-3"})),
         _answer("billing", "INV-3 is for 120.00; billing will check it.")],
        [_tools(("find_orders", {"customer_id": "c-410"})),
         _answer("shipping", "Order o-90 shows as shipped; shipping will trace it.")],
        [_tools(("find_orders", {"customer_id": "c-100"})),
         _answer("billing", "Order o-55 was cancelled; billing will refund the charge.")],
    ],
}


def _template(name: str) -> dict[str, Any]:
    return json.loads((TEMPLATES / f"{name}.json").read_text(encoding="utf-8"))["response"]


def _digest(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()


def response(model: str, case: int, turn: int, step: Turn) -> dict[str, Any]:
    """One Chat Completions response: a recorded one with this turn's content."""
    kind, value = step
    if kind == "tools":
        body = copy.deepcopy(_template("parallel_tool_calls" if len(value) > 1 else "tool_call"))
        message = body["choices"][0]["message"]
        message["tool_calls"] = [
            {"function": {"arguments": json.dumps(args, separators=(",", ":")), "name": name},
             "id": "call_" + _digest(model, case, turn, i)[:24], "type": "function"}
            for i, (name, args) in enumerate(value)]
        written = json.dumps(value)
    else:
        body = copy.deepcopy(_template("structured_output"))
        written = json.dumps(value, separators=(",", ":"))
        body["choices"][0]["message"]["content"] = written
    body["id"] = "chatcmpl-" + _digest(model, case, turn)[:29]
    body["created"] = 1780000000 + case * 10 + turn
    body["model"] = MODELS[model]
    body.pop("system_fingerprint", None)
    usage = body["usage"]
    usage["completion_tokens"] = 8 + len(written) // 4
    usage["prompt_tokens"] = 180 + 40 * turn
    usage["total_tokens"] = usage["completion_tokens"] + usage["prompt_tokens"]
    return body


def build(out: Path) -> None:
    """Record the golden set's runs into ``out`` through a loopback OpenAI server."""
    sys.path.insert(0, str(ROOT / "tests"))
    from providers import openai_fake

    program = (EXAMPLE / "triage.luma").read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp, openai_fake.server() as server:
        for model in MODELS:
            for case, turns in enumerate(SCRIPTS[model], start=1):
                for turn, step in enumerate(turns, start=1):
                    server.reply(response(model, case, turn, step))
        local = re.sub(r'(provider: "openai")', rf'\1\n  base_url: "{server.base_url}/v1"',
                       program)
        (Path(tmp) / "triage.luma").write_text(local, encoding="utf-8")
        for turn, step in enumerate(SCRIPTS["GPT54"][TEST_CASE - 1], start=1):
            server.reply(response("GPT54", TEST_CASE, turn, step))
        record = Path(tmp) / "recordings"
        environment = {"OPENAI_API_KEY": openai_fake.KEY, "PATH": "/usr/bin:/bin"}
        done = subprocess.run(
            [sys.executable, "-m", "luma", "eval", str(Path(tmp) / "triage.luma"),
             "--agent", "Triage", "--cases", str(EXAMPLE / "golden.jsonl"),
             *(a for m in MODELS for a in ("--model", m)),
             "--tool-module", str(EXAMPLE / "triage_tools.py"), "--record", str(record)],
            capture_output=True, text=True, env=environment)
        tested = subprocess.run(
            [sys.executable, "-m", "luma", "test", str(Path(tmp) / "triage.luma"),
             "--tool-module", str(EXAMPLE / "triage_tools.py"), "--record", str(record)],
            capture_output=True, text=True, env=environment)
        done.returncode = done.returncode or tested.returncode
        done.stdout += tested.stdout
        done.stderr += tested.stderr
        if done.returncode != 0 or server.replies:
            raise SystemExit(f"the recording run failed:\n{done.stdout}{done.stderr}")
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for path in sorted(record.iterdir()):
            document = json.loads(path.read_text(encoding="utf-8"))
            for exchange in document["exchanges"]:
                exchange["url"] = OPENAI_URL
                exchange["request"]["headers"]["host"] = "api.openai.com"
                exchange["response"]["headers"] = {"content-type": "application/json"}
            (out / path.name).write_text(json.dumps(document, indent=2, ensure_ascii=False)
                                         + "\n", encoding="utf-8")


if __name__ == "__main__":
    build(RECORDINGS)
    print(f"wrote {RECORDINGS.relative_to(ROOT)}/")
