"""``--record FILE`` and ``--replay FILE``: provider traffic saved to, and served from, a file.

A recording is one JSON document::

    {"luma_recording": 1,
     "exchanges": [{"method": "POST", "url": "https://…/chat/completions",
                    "request": {"headers": {…}, "body": {…}},
                    "response": {"status": 200, "headers": {…}, "body": {…}}}]}

Secrets never reach the file: the auth headers (``Authorization``, ``x-api-key``, ``api-key``,
``x-goog-api-key`` and a few more) and secret-looking query-string keys are dropped, and every
secret value the run knows (its :class:`~luma.runtime.secrets.SecretRedactor`) is cut out of each
field before the exchange is serialised — a key a provider echoes in an error body included —
and, as a last net, out of the serialised text in its escaped forms. A body that is not JSON is
kept as text under ``body_text``.

Replay serves the recorded responses in order, without the network, and fails with
``REPLAY_MISMATCH`` when a request differs from the recorded one (its method, its URL path or its
body). The host of the URL is not compared, so a recording made against one server replays under
another ``base_url``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from luma.runtime.errors import LumaError
from luma.runtime.secrets import SecretRedactor

FORMAT_VERSION = 1

SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key",
    "cookie", "set-cookie",
})
SECRET_QUERY_KEYS = frozenset({
    "key", "api-key", "api_key", "apikey", "access_token", "token", "sig", "signature",
    "x-goog-api-key",
})


@dataclass(frozen=True, slots=True)
class RecordedResponse:
    status: int
    headers: dict[str, str]
    content: bytes


def public_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers without the ones that carry credentials (names lower-cased)."""
    return {k.lower(): v for k, v in headers if k.lower() not in SECRET_HEADERS}


def public_url(url: str) -> str:
    """The URL without query-string keys that look like credentials."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
             if k.lower() not in SECRET_QUERY_KEYS]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _body_entry(content: bytes) -> dict[str, Any]:
    text = content.decode("utf-8", errors="replace")
    try:
        return {"body": json.loads(text)} if text.strip() else {"body_text": text}
    except ValueError:
        return {"body_text": text}


def _body_bytes(entry: Mapping[str, Any]) -> bytes:
    if "body" in entry:
        return json.dumps(entry["body"], ensure_ascii=False).encode("utf-8")
    return str(entry.get("body_text", "")).encode("utf-8")


_RECORDING_START = re.compile(rb'\s*\{\s*"luma_recording"\s*:')


def is_recording(head: bytes) -> bool:
    """Whether a file starting with ``head`` is a recording Luma wrote (its envelope)."""
    return _RECORDING_START.match(head) is not None


class Recording:
    """A recording being written (``record_to``) or served (``replay_from``)."""

    def __init__(self, path: str | os.PathLike[str], *, replaying: bool,
                 exchanges: list[dict[str, Any]] | None = None,
                 secrets: SecretRedactor | None = None) -> None:
        self.path = Path(path)
        self.replaying = replaying
        self.exchanges: list[dict[str, Any]] = exchanges or []
        self._next = 0
        self.secrets = secrets if secrets is not None else SecretRedactor()

    # ---------------------------------------------------------------------------- opening
    @classmethod
    def record_to(cls, path: str | os.PathLike[str], *,
                  secrets: SecretRedactor | None = None) -> Recording:
        """Start a new recording; the file is (re)written after every exchange."""
        recording = cls(path, replaying=False, secrets=secrets)
        recording._write()
        return recording

    @classmethod
    def replay_from(cls, path: str | os.PathLike[str], *,
                    secrets: SecretRedactor | None = None) -> Recording:
        """Load a recording to serve; an unreadable file is a ``REPLAY_INVALID`` error."""
        name = os.fspath(path)
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise LumaError("REPLAY_INVALID",
                            f"Cannot read the recording {name}: {exc.strerror or exc}.") from None
        except ValueError as exc:
            raise LumaError("REPLAY_INVALID",
                            f"The recording {name} is not valid JSON: {exc}.") from None
        exchanges = document.get("exchanges") if isinstance(document, dict) else None
        if not isinstance(exchanges, list) or not all(
                isinstance(e, dict) and isinstance(e.get("response"), dict)
                and isinstance(e.get("request"), dict) for e in exchanges):
            raise LumaError("REPLAY_INVALID",
                            f"The recording {name} is not a Luma recording "
                            "(it needs a list of exchanges, each with a request and a response).")
        return cls(path, replaying=True, exchanges=exchanges, secrets=secrets)

    def for_run(self) -> Recording:
        """The recording as one run uses it: a replay serves each run from the first
        exchange; a recording being written is shared (every run's exchanges are added)."""
        if not self.replaying:
            return self
        return Recording(self.path, replaying=True, exchanges=self.exchanges,
                         secrets=self.secrets)

    # ---------------------------------------------------------------------------- secrets
    def add_secret(self, value: str | None) -> None:
        """A value (an API key) that must never appear in the file, raw or escaped."""
        self.secrets.add(value)

    # ---------------------------------------------------------------------------- record
    def record(self, method: str, url: str, request_headers: Iterable[tuple[str, str]],
               request_body: bytes, status: int, response_headers: Iterable[tuple[str, str]],
               response_body: bytes) -> None:
        """Add one exchange, each of its fields without a secret, and rewrite the file."""
        self.exchanges.append(self.secrets.redact_value({
            "method": method.upper(),
            "url": public_url(url),
            "request": {"headers": public_headers(request_headers), **_body_entry(request_body)},
            "response": {"status": status, "headers": public_headers(response_headers),
                         **_body_entry(response_body)},
        }))
        self._write()

    def _write(self) -> None:
        document = {"luma_recording": FORMAT_VERSION, "exchanges": self.exchanges}
        text = self.secrets.redact(json.dumps(document, ensure_ascii=False, indent=2)) + "\n"
        directory = self.path.parent if str(self.path.parent) else Path(".")
        fd, tmp = tempfile.mkstemp(prefix=".luma-recording-", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # ---------------------------------------------------------------------------- replay
    def replay(self, method: str, url: str, request_body: bytes) -> RecordedResponse:
        """The next recorded response, if this request is the one that was recorded."""
        index = self._next
        where = f"request {index + 1} of the run"
        if index >= len(self.exchanges):
            raise LumaError("REPLAY_MISMATCH",
                            f"Replay mismatch: the run made {where}, but {self.path.name} holds "
                            f"only {len(self.exchanges)} exchanges.")
        entry = self.exchanges[index]
        recorded_path = urlsplit(str(entry.get("url", ""))).path
        if str(entry.get("method", "POST")).upper() != method.upper() or \
                recorded_path != urlsplit(url).path:
            raise LumaError("REPLAY_MISMATCH",
                            f"Replay mismatch at {where}: it went to {method.upper()} "
                            f"{urlsplit(url).path}, the recording has "
                            f"{entry.get('method', 'POST')} {recorded_path}.")
        # the recorded body is without secrets: so is the one it is compared with
        difference = _first_difference(_decoded(_body_bytes(entry["request"])),
                                       self.secrets.redact_value(_decoded(request_body)))
        if difference is not None:
            raise LumaError("REPLAY_MISMATCH",
                            f"Replay mismatch at {where}: the request body differs from the "
                            f"recorded one at {difference}.")
        self._next += 1
        response = entry["response"]
        headers = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
        return RecordedResponse(int(response.get("status", 200)), headers, _body_bytes(response))


def _decoded(content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", errors="replace")


def _first_difference(recorded: Any, actual: Any, path: str = "") -> str | None:
    """Where two JSON values first differ, as ``messages[1].content: recorded …, now …``."""
    here = path or "the top level"
    if isinstance(recorded, dict) and isinstance(actual, dict):
        for key in list(recorded) + [k for k in actual if k not in recorded]:
            sub = f"{path}.{key}" if path else str(key)
            if key not in actual:
                return f"{sub}: recorded {_short(recorded[key])}, now absent"
            if key not in recorded:
                return f"{sub}: not recorded, now {_short(actual[key])}"
            found = _first_difference(recorded[key], actual[key], sub)
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(actual, list):
        for i, (a, b) in enumerate(zip(recorded, actual)):
            found = _first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        if len(recorded) != len(actual):
            return f"{here}: recorded {len(recorded)} items, now {len(actual)}"
        return None
    if recorded == actual and type(recorded) is type(actual):
        return None
    return f"{here}: recorded {_short(recorded)}, now {_short(actual)}"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
