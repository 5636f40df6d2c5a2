"""HTTP for the model providers: one shared client per event loop, retries, errors, recording.

Every provider adapter posts its JSON through ``ModelHttp.post_json``, which

- retries 408, 409, 429, 5xx and connection failures, ``max_retries`` times, with exponential
  backoff and jitter, honouring ``Retry-After`` (seconds or an HTTP date) and ``retry-after-ms``;
- applies the model's ``timeout`` (ms) to each request;
- turns every failure into a ``LumaError`` with a ``MODEL_*`` code and a one-line message that
  never holds the API key;
- records the exchange (``--record``) or serves it from a recording without the network
  (``--replay``).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from luma.models.base import ModelSettings
from luma.models.wire import JsonArray, encode_json
from luma.runtime.errors import LumaError
from luma.runtime.secrets import SecretRedactor

if TYPE_CHECKING:
    from luma.models.recording import Recording

RETRYABLE_STATUS = frozenset({408, 409, 429})
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
RETRY_AFTER_CAP_S = 60.0   # a longer Retry-After is not waited for: the error comes at once
EXCERPT_CHARS = 200
DEFAULT_HTTP_CONNECTIONS = 20  # open at once to the providers, per event loop

RefusalReader = Callable[[int, bytes], "str | None"]


def new_http_client(max_connections: int = DEFAULT_HTTP_CONNECTIONS, *,
                    rate_limit_hold_s: float | None = None) -> HttpClients:
    """The client a run shares between its providers (connection pooling, keep-alive)."""
    return HttpClients(max_connections, rate_limit_hold_s=rate_limit_hold_s)


POOL_SHARD = 8
"""The most connections one httpx pool holds. httpcore's pool scans its connections for every
request it places, and for each connection scans them all again (1.0.9), so one pool of 64
costs 16 times one of 16: a larger size is split over several pools."""


class HttpClients:
    """The shared HTTP client: ``max_connections`` kept-alive connections in pools of at most
    :data:`POOL_SHARD`, each request sent through the pool with the fewest in flight (so no pool
    queues a request while another has a free connection). Every connection opened is kept alive
    (httpcore closes an idle connection above ``max_keepalive_connections`` counting the busy
    ones too: a smaller number would reopen a connection per request under load)."""

    def __init__(self, max_connections: int, *, rate_limit_hold_s: float | None = None) -> None:
        shards = -(-max(1, max_connections) // POOL_SHARD)
        size = -(-max(1, max_connections) // shards)
        verify = httpx.create_ssl_context(trust_env=True)  # one for all: each costs ~35 ms
        self._pools = [httpx.AsyncClient(follow_redirects=False, verify=verify,
                                         limits=httpx.Limits(max_connections=size,
                                                             max_keepalive_connections=size))
                       for _ in range(shards)]
        self._in_flight = [0] * shards
        self.paused_until: dict[str, float] = {}
        """A provider's Retry-After, by origin: every request through this client waits it
        out (all the concurrent runs of a program, the rows of a batch), not only the one
        that got it."""
        self.rate_limit_hold_s = rate_limit_hold_s
        """None: a 429 is retried ``max_retries`` times like any other error. A number: a 429
        is waited out (its Retry-After, else the backoff) without counting as a retry, as long
        as the request has not waited that many seconds for rate limits (``luma batch
        --max-wait``)."""

    @property
    def is_closed(self) -> bool:
        return self._pools[0].is_closed

    async def post(self, url: str, **options: Any) -> httpx.Response:
        in_flight = self._in_flight
        shard = in_flight.index(min(in_flight)) if len(in_flight) > 1 else 0
        in_flight[shard] += 1
        try:
            return await self._pools[shard].post(url, **options)
        finally:
            in_flight[shard] -= 1

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


@dataclass(frozen=True, slots=True)
class ModelEndpoint:
    """Who a request is for, so errors can name it: the model, its provider, the key's env var,
    and the secret values that must be cut out of anything shown or saved."""

    settings: ModelSettings
    provider_label: str
    key_env: str | None = None
    secrets: Sequence[str] = field(default_factory=tuple)

    @property
    def model_name(self) -> str:
        return self.settings.name


def api_key(settings: ModelSettings, env: Mapping[str, str], default_env: str) -> tuple[str, str]:
    """The API key and the name of the variable it came from; ``MODEL_AUTH`` when unset."""
    name = settings.api_key_env or default_env
    value = env.get(name, "").strip()
    if not value:
        raise LumaError("MODEL_AUTH", f"Model '{settings.name}' needs an API key in {name}.")
    return value, name


Secrets = SecretRedactor | Sequence[str]


def redactor_of(secrets: Secrets) -> SecretRedactor:
    if isinstance(secrets, SecretRedactor):
        return secrets
    redactor = SecretRedactor()
    redactor.add_all(secrets)
    return redactor


def redact(text: str, secrets: Secrets) -> str:
    """``text`` with every secret value replaced, in its raw and its escaped forms."""
    return redactor_of(secrets).redact(text)


def bad_response(endpoint: ModelEndpoint, what: str) -> LumaError:
    """``MODEL_BAD_RESPONSE``: the provider's answer breaks its own wire format."""
    return LumaError("MODEL_BAD_RESPONSE",
                     f"Model '{endpoint.model_name}' sent a response that breaks the "
                     f"{endpoint.provider_label} wire format: {what}.")


def refusal(endpoint: ModelEndpoint, text: str | None) -> LumaError:
    """``MODEL_REFUSAL``: the model declined to answer."""
    reason = " ".join(redact(text or "", endpoint.secrets).split())  # before the cut
    if len(reason) > EXCERPT_CHARS:
        reason = reason[:EXCERPT_CHARS - 3] + "..."
    if reason and reason[-1] not in ".!?":
        reason += "."
    message = f"Model '{endpoint.model_name}' refused to answer" + (f": {reason}" if reason
                                                                       else ".")
    return LumaError("MODEL_REFUSAL", message, details={"refusal": text})


class ModelHttp:
    """Posts JSON to providers over one shared client; see the module docstring."""

    def __init__(self, client: httpx.AsyncClient | HttpClients | None = None,
                 recording: Recording | None = None, *,
                 sleep: Callable[[float], Awaitable[None]] | None = None,
                 jitter: Callable[[], float] | None = None,
                 secrets: SecretRedactor | None = None) -> None:
        # the run's redactor: the keys of every request are added to it; it is the recording's
        self.secrets = secrets if secrets is not None else (
            recording.secrets if recording is not None else SecretRedactor())
        self._client = client
        self._owns_client = client is None
        self.recording = recording
        self._sleep = sleep or asyncio.sleep
        self._jitter = jitter or random.random
        # a shared client's Retry-After pauses and rate-limit hold; a client of this object's
        # own, or a plain httpx one, keeps pauses for this object alone and holds no 429
        shared = client if isinstance(client, HttpClients) else None
        self._pauses: dict[str, float] = shared.paused_until if shared is not None else {}
        self._hold = shared.rate_limit_hold_s if shared is not None else None

    @property
    def client(self) -> httpx.AsyncClient | HttpClients:
        if self._client is None:
            self._client = new_http_client()
        return self._client

    async def aclose(self) -> None:
        """Close the client if this object created it (a shared client is closed by its owner)."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def post_json(self, endpoint: ModelEndpoint, url: str, headers: Mapping[str, str],
                        body: Any, *, refused: RefusalReader | None = None) -> Any:
        """POST ``body`` as JSON and return the decoded JSON answer of a 2xx response.

        ``refused`` reads an error response as the provider's refusal (Azure's content filter
        answers 400): when it gives a reason, the error is ``MODEL_REFUSAL``, not retried."""
        secrets = self.secrets
        secrets.add_all(endpoint.secrets)
        if self.recording is not None and self.recording.secrets is not secrets:
            self.recording.secrets.add_all(endpoint.secrets)
        if not all(value.isascii() for value in headers.values()):
            # only the key comes from the user; httpx would fail on it, naming the character
            where = f" in {endpoint.key_env}" if endpoint.key_env else ""
            raise LumaError("MODEL_AUTH", f"Model '{endpoint.model_name}': the API key{where} "
                            "holds a character an HTTP header cannot carry (only ASCII is "
                            "allowed).")
        # no secret reaches a provider in a prompt, a tool result or anything else in the body
        payload = encode_body(body, secrets).encode("utf-8")
        settings = endpoint.settings
        attempts = max(0, settings.max_retries) + 1
        host = _origin(url)
        waited = False  # this request has just waited out its own Retry-After
        attempt = 0  # the attempts counted against max_retries
        sent = 0
        held_since: float | None = None  # the first 429 of a rate limit being held
        pauses = self._pauses
        hold = self._hold
        while True:
            attempt += 1
            sent += 1
            last = attempt >= attempts
            pause = pauses.get(host, 0.0) - time.monotonic()
            if pause > 0 and not waited:
                await self._wait(pause)
            waited = False
            try:
                status, response_headers, content = await self._send(
                    endpoint, url, {"content-type": "application/json", **headers}, payload)
            except httpx.TimeoutException as exc:
                if isinstance(exc, httpx.ConnectTimeout) and not last:
                    await self._wait(self._backoff(attempt))
                    continue
                raise LumaError("MODEL_TIMEOUT",
                                f"Model '{endpoint.model_name}' did not answer within "
                                f"{settings.timeout_ms} ms.", retryable=True) from None
            except (httpx.UnsupportedProtocol, httpx.InvalidURL):
                raise LumaError("MODEL_CONFIG",
                                f"Model '{endpoint.model_name}' has a base_url that is not an "
                                f"http(s) URL: {_without_query(url)}") from None
            except httpx.TransportError as exc:
                if not last:
                    await self._wait(self._backoff(attempt))
                    continue
                raise LumaError("MODEL_HTTP_ERROR",
                                f"Model '{endpoint.model_name}' could not reach "
                                f"{_without_query(url)}: {_transport_reason(exc, secrets)}.",
                                retryable=True, details={"status": None}) from None

            if 200 <= status < 300:
                return _decode(endpoint, content, secrets)
            if _is_auth_failure(status, content):
                where = f" in {endpoint.key_env}" if endpoint.key_env else ""
                raise LumaError("MODEL_AUTH",
                                f"Model '{endpoint.model_name}': {endpoint.provider_label} did not "
                                f"accept the API key{where} (HTTP {status}).",
                                details={"status": status})
            reason = refused(status, content) if refused is not None else None
            if reason is not None:
                raise refusal(endpoint, reason)
            if status == 429 and hold is not None:
                # held: the rate limit is waited out, bounded by the hold, not by max_retries
                now = time.monotonic()
                held_since = now if held_since is None else held_since
                delay = retry_after(response_headers, time.time())
                if delay is not None:
                    if now - held_since + delay <= hold:
                        _pause(pauses, host, now + delay)
                        await self._wait(delay)
                        waited = True
                        attempt -= 1
                        continue
                elif now - held_since + (backoff := self._backoff(sent)) <= hold:
                    await self._wait(backoff)
                    attempt -= 1
                    continue
                raise LumaError("MODEL_RATE_LIMITED",
                                f"Model '{endpoint.model_name}' is still rate limited by "
                                f"{endpoint.provider_label} (HTTP 429): the limit did not lift "
                                f"within {hold:g} s, the longest a request waits for it.",
                                retryable=True, details={"status": status})
            retryable = status in RETRYABLE_STATUS or status >= 500
            if retryable and not last:
                delay = retry_after(response_headers, time.time())
                if delay is not None and delay <= RETRY_AFTER_CAP_S:
                    _pause(pauses, host, time.monotonic() + delay)
                    await self._wait(delay)
                    waited = True
                    continue
                if delay is None:
                    delay = self._backoff(attempt)
                if delay <= RETRY_AFTER_CAP_S:
                    await self._wait(delay)
                    continue
            if status == 429:
                raise LumaError("MODEL_RATE_LIMITED",
                                f"Model '{endpoint.model_name}' is rate limited by "
                                f"{endpoint.provider_label} (HTTP 429) after {attempt} "
                                f"{'attempt' if attempt == 1 else 'attempts'}.",
                                retryable=True, details={"status": status})
            raise LumaError("MODEL_HTTP_ERROR",
                            f"Model '{endpoint.model_name}': {endpoint.provider_label} answered "
                            f"HTTP {status}: {error_excerpt(content, secrets)}",
                            retryable=retryable, details={"status": status})

    async def _send(self, endpoint: ModelEndpoint, url: str, headers: dict[str, str],
                    payload: bytes) -> tuple[int, dict[str, str], bytes]:
        if self.recording is not None and self.recording.replaying:
            recorded = self.recording.replay("POST", url, payload)
            return recorded.status, recorded.headers, recorded.content
        timeout = httpx.Timeout(endpoint.settings.timeout_ms / 1000)
        response = await self.client.post(url, headers=headers, content=payload, timeout=timeout)
        content = await response.aread()
        if self.recording is not None:
            self.recording.record("POST", url, response.request.headers.multi_items(), payload,
                                  response.status_code, response.headers.multi_items(), content)
        return response.status_code, {k.lower(): v for k, v in response.headers.items()}, content

    async def _wait(self, seconds: float) -> None:
        if self.recording is not None and self.recording.replaying:
            return  # a replay has no server to be patient with
        await self._sleep(seconds)

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter: half the step fixed, half random."""
        step: float = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0 ** (attempt - 1))
        return step / 2 + step / 2 * float(self._jitter())


def encode_body(body: Any, secrets: SecretRedactor) -> str:
    """The JSON text of a request body, redacted. A ``JsonArray`` at its top level (the
    conversation, whose messages the adapter encoded as it first sent them) is joined as it is;
    the text is the one ``json.dumps`` would write for the whole body."""
    if not isinstance(body, dict) or not any(isinstance(v, JsonArray) for v in body.values()):
        return encode_json(body, secrets)
    members = []
    for key, value in body.items():
        text = value.json(secrets) if isinstance(value, JsonArray) else encode_json(value, secrets)
        members.append(f"{encode_json(key, secrets)}:{text}")
    return "{" + ",".join(members) + "}"


def _pause(pauses: dict[str, float], host: str, until: float) -> None:
    if until > pauses.get(host, 0.0):
        pauses[host] = until


def _origin(url: str) -> str:
    """The scheme and host of ``url``: what one Retry-After pauses."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    lower = {k.lower(): v for k, v in headers.items()}
    millis = lower.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - now)


def error_excerpt(content: bytes, secrets: Secrets = ()) -> str:
    """A short, one-line excerpt of an error body: the provider's error message when the body
    is the usual ``{"error": {"message": …}}``, else the text itself. Every secret is cut out
    before the text is shortened (a key echoed by the provider, raw or escaped)."""
    redactor = redactor_of(secrets)
    text = redactor.redact(content.decode("utf-8", errors="replace"))
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if isinstance(document, dict):
        error = document.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            text = error["message"]
        elif isinstance(error, str):
            text = error
        elif isinstance(document.get("message"), str):
            text = document["message"]
    text = redactor.redact(" ".join(redactor.redact(text).split()))
    if not text:
        return "(empty body)"
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS - 3] + "..."


def _is_auth_failure(status: int, content: bytes) -> bool:
    # Gemini answers an invalid key with 400 and the reason API_KEY_INVALID
    return status in (401, 403) or (status == 400 and b"API_KEY_INVALID" in content)


def _decode(endpoint: ModelEndpoint, content: bytes, secrets: SecretRedactor) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        excerpt = error_excerpt(content, secrets)
        raise bad_response(endpoint, f"the body is not JSON ({excerpt})") from None


def _without_query(url: str) -> str:
    return urlunsplit(urlsplit(url)._replace(query="", fragment=""))


def _transport_reason(exc: httpx.TransportError, secrets: SecretRedactor) -> str:
    detail = secrets.redact(str(exc).strip())
    name = type(exc).__name__
    return f"{name} ({detail})" if detail else name
