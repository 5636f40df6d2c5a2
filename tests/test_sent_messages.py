"""Each message is encoded once: a tool loop's next request joins the JSON of the messages it
has already sent, for every provider adapter, and the bytes on the wire are the ones one
``json.dumps`` of the whole body writes. Against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from luma.models.anthropic import AnthropicProvider
from luma.models.base import ChatRequest, Message
from luma.models.gemini import GeminiProvider
from luma.models.http import ModelHttp
from luma.models.openai import OpenAIProvider
from luma.runtime.secrets import SecretRedactor
from providers import anthropic_fake, gemini_fake, openai_fake
from providers.harness import run, settings, tools, user

TURNS = 6
CALLS = 2
SECRET = "hunter2-secret-value"


def _openai_reply(turn: int) -> dict[str, Any]:
    if turn == TURNS:
        return openai_fake.completion("done")
    return openai_fake.completion(tool_calls=[
        (f"call_{turn}_{k}", "calculate", {"a": turn, "b": k, "operation": "add"})
        for k in range(CALLS)])


def _anthropic_reply(turn: int) -> dict[str, Any]:
    if turn == TURNS:
        return anthropic_fake.message([anthropic_fake.text("done")])
    return anthropic_fake.message(
        [anthropic_fake.text(f"turn {turn}")]
        + [anthropic_fake.tool_use(f"toolu_{turn}_{k}", "calculate",
                                   {"a": turn, "b": k, "operation": "add"})
           for k in range(CALLS)], stop="tool_use")


def _gemini_reply(turn: int) -> dict[str, Any]:
    if turn == TURNS:
        return gemini_fake.response([gemini_fake.text("done")])
    return gemini_fake.response([
        gemini_fake.call("calculate", {"a": turn, "b": k, "operation": "add"}, f"g_{turn}_{k}")
        for k in range(CALLS)])


PROVIDERS: dict[str, tuple[Any, Callable[..., Any], Callable[[int], dict[str, Any]], str]] = {
    "openai": (openai_fake, OpenAIProvider, _openai_reply, "/v1"),
    "anthropic": (anthropic_fake, AnthropicProvider, _anthropic_reply, ""),
    "gemini": (gemini_fake, GeminiProvider, _gemini_reply, ""),
}


def tool_loop(name: str, secret_at: int | None = None) -> tuple[Any, Any, list[int]]:
    """A loop of TURNS requests, each turn answered with CALLS tool calls; returns the server,
    the provider and the number of messages each request carried. ``secret_at``: a secret,
    present in the first message, is registered before that request."""
    fake, make, reply, suffix = PROVIDERS[name]
    with fake.server() as server:
        for turn in range(1, TURNS + 1):
            server.reply(reply(turn))
        env = {"OPENAI_API_KEY": openai_fake.KEY, "ANTHROPIC_API_KEY": anthropic_fake.KEY,
               "GEMINI_API_KEY": gemini_fake.KEY}
        http = ModelHttp(secrets=SecretRedactor())
        p = make(settings(name, server.base_url + suffix), http, env)
        sizes: list[int] = []

        async def flow() -> None:
            messages = [Message("system", "Be careful."), user(f"Go, with {SECRET} inside")]
            for turn in range(1, TURNS + 1):
                if turn == secret_at:
                    http.secrets.add(SECRET)
                sizes.append(len(messages))
                answer = await p.complete(ChatRequest(p.settings, tuple(messages), tools()))
                if not answer.tool_calls:
                    break
                messages.append(Message("assistant", answer.content, answer.tool_calls))
                messages.extend(Message("tool", f'{{"result":{i}}}', tool_call_id=c.id,
                                        tool_name=c.name) for i, c in enumerate(answer.tool_calls))
            await http.aclose()

        run(flow())
    return server, p, sizes


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_each_message_is_encoded_once_and_reused_by_every_later_request(name: str) -> None:
    server, p, sizes = tool_loop(name)
    assert len(server.requests) == TURNS
    new = [sizes[0]] + [b - a for a, b in zip(sizes, sizes[1:])]
    assert p._sent.made == sum(new) == sizes[-1]
    assert p._sent.reused == sum(sizes) - sizes[-1]  # every old message, in every request


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_the_bytes_sent_are_one_compact_encoding_of_the_whole_body(name: str) -> None:
    server, _, _ = tool_loop(name)
    for request in server.requests:
        assert request.raw == json.dumps(request.body, ensure_ascii=False,
                                         separators=(",", ":")).encode("utf-8")
    # the conversation grew in every request: each carries the one before it
    first, last = server.requests[0].body, server.requests[-1].body
    key = "contents" if name == "gemini" else "messages"
    assert last[key][:len(first[key])] == first[key]


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_a_secret_registered_mid_conversation_reaches_no_later_request(name: str) -> None:
    server, p, sizes = tool_loop(name, secret_at=3)
    raw = [r.raw.decode("utf-8") for r in server.requests]
    assert all(SECRET in text for text in raw[:2])
    assert not any(SECRET in text for text in raw[2:])
    assert all("[secret]" in text for text in raw[2:])
    # the messages encoded before the secret (those of the second request) are encoded again,
    # once
    assert p._sent.made == sizes[-1] + sizes[1]


def test_what_the_latest_requests_do_not_use_is_dropped_once_it_outgrows_them() -> None:
    from luma.models.wire import SentMessages

    sent = SentMessages()
    redactor = SecretRedactor()
    old = [user(f"old {i}") for i in range(1000)]
    sent.start_request()
    for m in old:
        sent.get(m, redactor, lambda m: m.content)
    new = [user(f"new {i}") for i in range(10)]
    for _ in range(2):  # a short conversation's two requests
        sent.start_request()
        assert [sent.get(m, redactor, lambda m: m.content) for m in new] == \
            [m.content for m in new]
    assert len(sent._values) == 10  # the long conversation's 1000 are dropped, not kept
    assert sent.made == 1010 and sent.reused == 10
