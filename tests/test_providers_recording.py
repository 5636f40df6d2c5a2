"""--record / --replay: traffic saved without secrets, served back offline, mismatches caught."""

from __future__ import annotations

import json

import pytest

from luma.models.base import ChatRequest, Message
from luma.models.http import ModelHttp
from luma.models.providers import make_provider
from luma.models.recording import Recording
from luma.runtime.errors import LumaError
from providers import anthropic_fake, gemini_fake, openai_fake
from providers.harness import answer_format, run, settings, tools, user

PROVIDERS = {
    "openai": (openai_fake, "OPENAI_API_KEY", "/v1"),
    "anthropic": (anthropic_fake, "ANTHROPIC_API_KEY", ""),
    "gemini": (gemini_fake, "GEMINI_API_KEY", ""),
}


def replies(kind: str) -> list[dict]:
    if kind == "openai":
        return [openai_fake.completion(tool_calls=[("c1", "calculate",
                                                    {"a": 1, "b": 2, "operation": "add"})]),
                openai_fake.completion('{"summary": "Three.", "total": 3}')]
    if kind == "anthropic":
        return [anthropic_fake.message([anthropic_fake.tool_use(
                    "c1", "calculate", {"a": 1, "b": 2, "operation": "add"})], "tool_use"),
                anthropic_fake.message([anthropic_fake.tool_use(
                    "c2", "final_answer", {"summary": "Three.", "total": 3})], "tool_use")]
    return [gemini_fake.response([gemini_fake.call("calculate", {"a": 1, "b": 2,
                                                                 "operation": "add"}, cid="c1")]),
            gemini_fake.response([gemini_fake.call("final_answer",
                                                   {"summary": "Three.", "total": 3})])]


async def flow(provider, s, prompt: str = "Add 1 and 2"):
    """Two turns: the tool call, then the structured answer."""
    first = ChatRequest(s, (Message("system", "Be exact."), user(prompt)), tools())
    r1 = await provider.complete(first)
    history = first.messages + (Message("assistant", r1.content, r1.tool_calls),
                                Message("tool", '{"result":3}', tool_call_id=r1.tool_calls[0].id,
                                        tool_name="calculate"))
    r2 = await provider.complete(ChatRequest(s, history, tools(),
                                             response_format=answer_format()))
    return r1, r2


def record(kind: str, path, prompt: str = "Add 1 and 2"):
    fake, key_env, suffix = PROVIDERS[kind]
    with fake.server() as server:
        for body in replies(kind):
            server.reply(body)
        s = settings(kind, server.base_url + suffix)
        recording = Recording.record_to(path)

        async def go():
            http = ModelHttp(None, recording)
            try:
                return await flow(make_provider(s, client=http, env={key_env: fake.KEY},
                                                recorder=recording), s, prompt)
            finally:
                await http.aclose()

        results = run(go())
    return s, results, server


def replay(kind: str, path, s, prompt: str = "Add 1 and 2"):
    fake, key_env, _ = PROVIDERS[kind]
    recording = Recording.replay_from(path)

    async def go():
        http = ModelHttp(None, recording)
        try:
            return await flow(make_provider(s, client=http, env={key_env: fake.KEY},
                                            recorder=recording), s, prompt)
        finally:
            await http.aclose()

    return run(go())


@pytest.mark.parametrize("kind", sorted(PROVIDERS))
def test_recording_holds_the_exchanges_and_no_secret(kind, tmp_path):
    path = tmp_path / "run.json"
    s, (r1, r2), server = record(kind, path)
    fake = PROVIDERS[kind][0]
    text = path.read_text()
    document = json.loads(text)
    assert fake.KEY not in text
    for header in ("authorization", "x-api-key", "api-key", "x-goog-api-key"):
        assert f'"{header}"' not in text.lower()
    exchanges = document["exchanges"]
    assert len(exchanges) == 2
    assert exchanges[0]["method"] == "POST"
    assert exchanges[0]["request"]["body"] == server.requests[0].body
    assert exchanges[1]["response"]["status"] == 200
    assert exchanges[1]["response"]["body"] == replies(kind)[1]
    assert json.loads(r2.content) == {"summary": "Three.", "total": 3}


@pytest.mark.parametrize("kind", sorted(PROVIDERS))
def test_replay_serves_the_same_responses_offline(kind, tmp_path):
    path = tmp_path / "run.json"
    s, recorded, server = record(kind, path)
    # the server is stopped: any network use would fail
    replayed = replay(kind, path, s)
    assert replayed == recorded


def test_a_changed_request_is_a_replay_mismatch(tmp_path):
    path = tmp_path / "run.json"
    s, _, _ = record("openai", path)
    with pytest.raises(LumaError) as info:
        replay("openai", path, s, prompt="Add 1 and 3")
    assert info.value.code == "REPLAY_MISMATCH"
    assert info.value.message == ("Replay mismatch at request 1 of the run: the request body "
                                  "differs from the recorded one at messages[1].content: "
                                  'recorded "Add 1 and 2", now "Add 1 and 3".')


def test_more_requests_than_recorded_is_a_replay_mismatch(tmp_path):
    path = tmp_path / "run.json"
    document = {"luma_recording": 1, "exchanges": []}
    path.write_text(json.dumps(document))
    s = settings("openai", "http://127.0.0.1:9/v1")
    recording = Recording.replay_from(path)

    async def go():
        http = ModelHttp(None, recording)
        p = make_provider(s, client=http, env={"OPENAI_API_KEY": "k-1234"}, recorder=recording)
        try:
            return await p.complete(ChatRequest(s, (user("x"),)))
        finally:
            await http.aclose()

    with pytest.raises(LumaError) as info:
        run(go())
    assert info.value.code == "REPLAY_MISMATCH"
    assert info.value.message == ("Replay mismatch: the run made request 1 of the run, but "
                                  "run.json holds only 0 exchanges.")


def test_replay_of_a_rate_limited_exchange_does_not_wait(tmp_path):
    path = tmp_path / "run.json"
    with openai_fake.server() as server:
        server.reply({"error": {"message": "slow down"}}, 429, {"Retry-After": "2"})
        server.reply(openai_fake.completion("hi"))
        s = settings("openai", server.base_url + "/v1")
        recording = Recording.record_to(path)

        async def go(rec):
            http = ModelHttp(None, rec)
            p = make_provider(s, client=http, env={"OPENAI_API_KEY": openai_fake.KEY},
                              recorder=rec)
            try:
                return await p.complete(ChatRequest(s, (user("x"),)))
            finally:
                await http.aclose()

        assert run(go(recording)).content == "hi"
    import time
    start = time.monotonic()
    assert run(go(Recording.replay_from(path))).content == "hi"
    assert time.monotonic() - start < 1.5  # the replay does not wait out the 2 s
    assert json.loads(path.read_text())["exchanges"][0]["response"]["headers"]["retry-after"] == "2"


def test_secret_query_keys_are_removed_from_recorded_urls():
    from luma.models.recording import public_url
    assert public_url("https://h/v1beta/models/m:generateContent?key=AIza123&alt=json") == \
        "https://h/v1beta/models/m:generateContent?alt=json"
    assert public_url("https://h/openai/deployments/d/chat/completions?api-version=2024-10-21") \
        == "https://h/openai/deployments/d/chat/completions?api-version=2024-10-21"


def test_an_unreadable_recording_is_reported(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(LumaError) as info:
        Recording.replay_from(bad)
    assert info.value.code == "REPLAY_INVALID"
    assert info.value.message.startswith(f"The recording {bad} is not valid JSON:")
    with pytest.raises(LumaError) as missing:
        Recording.replay_from(tmp_path / "none.json")
    assert missing.value.message == (f"Cannot read the recording {tmp_path / 'none.json'}: "
                                     "No such file or directory.")
