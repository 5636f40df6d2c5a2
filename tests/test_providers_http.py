"""The HTTP layer shared by the providers: retries, backoff, Retry-After, errors."""

from __future__ import annotations

import email.utils
import socket

import pytest

from luma.models.base import ChatRequest, ModelSettings
from luma.models.http import ModelHttp, error_excerpt, retry_after
from luma.models.providers import make_provider
from luma.runtime.errors import LumaError
from providers import openai_fake
from providers.harness import run, settings, user

ENV = {"OPENAI_API_KEY": openai_fake.KEY}


class Sleeps:
    """Records the waits instead of sleeping (the HTTP layer takes a ``sleep`` function)."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def complete(s: ModelSettings, http: ModelHttp, env=ENV):
    async def go():
        try:
            p = make_provider(s, client=http, env=env)
            return await p.complete(ChatRequest(s, (user("x"),)))
        finally:
            await http.aclose()
    return run(go())


def test_5xx_is_retried_with_exponential_backoff_and_jitter_then_reported():
    sleeps = Sleeps()
    with openai_fake.server() as server:
        for _ in range(4):
            server.reply({"error": {"message": "The server had an error"}}, 503)
        s = settings("openai", server.base_url + "/v1", max_retries=3)
        with pytest.raises(LumaError) as info:
            complete(s, ModelHttp(sleep=sleeps, jitter=lambda: 1.0))
    assert len(server.requests) == 4
    assert sleeps.waits == [0.5, 1.0, 2.0]
    assert info.value.code == "MODEL_HTTP_ERROR"
    assert info.value.message == "Model 'Main': OpenAI answered HTTP 503: The server had an error"
    assert info.value.retryable is True


def test_jitter_keeps_each_wait_between_half_and_the_whole_step():
    sleeps = Sleeps()
    with openai_fake.server() as server:
        for status in (500, 408, 409):
            server.reply({"error": {"message": "x"}}, status)
        server.reply(openai_fake.completion("ok"))
        s = settings("openai", server.base_url + "/v1", max_retries=3)
        assert complete(s, ModelHttp(sleep=sleeps, jitter=lambda: 0.0)).content == "ok"
    assert sleeps.waits == [0.25, 0.5, 1.0]


def test_a_4xx_other_than_408_409_429_is_not_retried():
    with openai_fake.server() as server:
        server.reply({"error": {"message": "Unknown parameter: 'foo'."}}, 400)
        s = settings("openai", server.base_url + "/v1")
        with pytest.raises(LumaError) as info:
            complete(s, ModelHttp(sleep=Sleeps()))
    assert len(server.requests) == 1
    assert info.value.message == "Model 'Main': OpenAI answered HTTP 400: Unknown parameter: 'foo'."
    assert info.value.retryable is False


def test_retry_after_as_an_http_date_and_in_milliseconds():
    sleeps = Sleeps()
    when = email.utils.formatdate(timeval=2_000_000_000 + 3, usegmt=True)
    assert retry_after({"Retry-After": when}, now=2_000_000_000) == pytest.approx(3)
    assert retry_after({"retry-after-ms": "250"}, now=0) == 0.25
    assert retry_after({"Retry-After": "2"}, now=0) == 2
    assert retry_after({"Retry-After": "soon"}, now=0) is None
    with openai_fake.server() as server:
        server.reply({"error": {"message": "slow"}}, 429, {"retry-after-ms": "1500"})
        server.reply(openai_fake.completion("ok"))
        s = settings("openai", server.base_url + "/v1")
        complete(s, ModelHttp(sleep=sleeps))
    assert sleeps.waits == [1.5]


def test_a_retry_after_longer_than_a_minute_is_not_waited_for():
    sleeps = Sleeps()
    with openai_fake.server() as server:
        server.reply({"error": {"message": "quota"}}, 429, {"Retry-After": "3600"})
        s = settings("openai", server.base_url + "/v1")
        with pytest.raises(LumaError) as info:
            complete(s, ModelHttp(sleep=sleeps))
    assert sleeps.waits == [] and len(server.requests) == 1
    assert info.value.code == "MODEL_RATE_LIMITED"
    assert info.value.message == "Model 'Main' is rate limited by OpenAI (HTTP 429) after 1 attempt."


def test_a_refused_connection_is_retried_then_reported():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps = Sleeps()
    s = settings("openai", f"http://127.0.0.1:{port}/v1", max_retries=2)
    with pytest.raises(LumaError) as info:
        complete(s, ModelHttp(sleep=sleeps))
    assert len(sleeps.waits) == 2
    assert info.value.code == "MODEL_HTTP_ERROR"
    assert info.value.message.startswith(
        f"Model 'Main' could not reach http://127.0.0.1:{port}/v1/chat/completions: ConnectError")


def test_error_excerpt_is_short_one_line_and_without_secrets():
    body = b'{"error": {"message": "bad\\n  key sk-secret-1234 and ' + b"y" * 500 + b'"}}'
    text = error_excerpt(body, ["sk-secret-1234"])
    assert "\n" not in text and "sk-secret" not in text and len(text) == 200
    assert text.startswith("bad key [secret] and yyy")
    assert error_excerpt(b"") == "(empty body)"


def test_make_provider_refuses_a_provider_it_does_not_serve():
    s = ModelSettings(name="T", provider="test")
    with pytest.raises(LumaError) as info:
        make_provider(s, client=None, env={})
    assert info.value.code == "MODEL_CONFIG"
    assert info.value.message == ("Model 'T' has provider 'test'; the HTTP providers are openai, "
                                  "azure, anthropic, gemini.")


def test_a_base_url_without_a_scheme_is_a_config_error_at_once():
    sleeps = Sleeps()
    s = settings("openai", "api.example.test/v1")
    with pytest.raises(LumaError) as info:
        complete(s, ModelHttp(sleep=sleeps))
    assert sleeps.waits == []
    assert info.value.code == "MODEL_CONFIG"
    assert info.value.message == ("Model 'Main' has a base_url that is not an http(s) URL: "
                                  "api.example.test/v1/chat/completions")


def test_a_key_an_http_header_cannot_carry_is_an_auth_error_that_never_shows_it():
    key = "sk-pässwörd-0123"
    with openai_fake.server() as server:
        s = settings("openai", server.base_url + "/v1")
        with pytest.raises(LumaError) as info:
            complete(s, ModelHttp(), env={"OPENAI_API_KEY": key})
    assert server.requests == []
    assert info.value.code == "MODEL_AUTH"
    assert info.value.message == ("Model 'Main': the API key in OPENAI_API_KEY holds a character "
                                  "an HTTP header cannot carry (only ASCII is allowed).")


def test_a_retry_after_pauses_every_request_through_the_client_not_only_its_own():
    import asyncio
    import time

    with openai_fake.server() as server:
        server.reply({"error": {"message": "slow down"}}, 429, {"Retry-After": "1"})
        for _ in range(4):
            server.reply(openai_fake.completion("ok"))
        s = settings("openai", server.base_url + "/v1")

        async def go():
            http = ModelHttp()
            try:
                p = make_provider(s, client=http, env=ENV)
                first = asyncio.ensure_future(p.complete(ChatRequest(s, (user("x"),))))
                while not server.requests:  # the 429 has been asked for
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.2)  # ...and answered
                limited_at = time.monotonic()
                others = await asyncio.gather(*(p.complete(ChatRequest(s, (user("y"),)))
                                                for _ in range(3)))
                return limited_at, [await first, *others]
            finally:
                await http.aclose()

        limited_at, answers = run(go())
    assert [a.content for a in answers] == ["ok"] * 4  # no request failed
    assert len(server.requests) == 5
    first_429 = server.requests[0].at
    for later in server.requests[1:]:
        # nobody asked again before the Retry-After second was over
        assert later.at >= first_429 + 0.95, (later.at - first_429)
    assert limited_at < first_429 + 0.5
