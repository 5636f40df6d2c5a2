"""The secrets of a run and the one step that takes them out of everything Luma writes.

A :class:`SecretRedactor` knows every secret value of a run — the ``credential`` variables, the
string values of the configured contexts and the models' API keys, all registered when the run
starts (:func:`register_startup_secrets`), and any further value the pipeline reads later. It
replaces each one with ``[secret]`` in its raw form and in the escaped forms a text can carry it
in: Python ``repr`` (both quote styles, and ``ascii``), JSON (``ensure_ascii`` on and off, so
``\\"``, ``\\\\`` and ``\\uXXXX``), ``unicode_escape``, URL encoding, and one such escape applied
on top of another (the ``repr`` of a message in a JSON trace line).

It is applied at the edge where text leaves the process: the stderr and stdout streams of a run
(:class:`RedactingStream`), the trace writer, the recording writer, and the error a handler's
failure becomes. With no secret registered it costs one attribute test.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any
from urllib.parse import quote, quote_plus, unquote, urlsplit

PLACEHOLDER = "[secret]"
MIN_SECRET_LENGTH = 6
"""Shorter values are not scrubbed by text replacement: they would match ordinary words."""


def escaped_forms(secret: str) -> set[str]:
    """Every text ``secret`` may appear as once escaped, up to two escapes deep."""
    forms = {secret}
    layer = {secret}
    for _ in range(2):
        layer = {f for text in layer for f in _escapes(text)} - forms
        forms |= layer
    return {f for f in forms if f}


def _escapes(text: str) -> Iterator[str]:
    yield repr(text)[1:-1]              # the quote style Python picks
    yield repr(text + '"')[1:-2]        # single quotes, ' escaped (a str with both quotes)
    yield ascii(text)[1:-1]
    yield ascii(text + '"')[1:-2]
    yield json.dumps(text)[1:-1]        # ensure_ascii: \uXXXX for non-ASCII
    yield json.dumps(text, ensure_ascii=False)[1:-1]
    yield text.encode("unicode_escape").decode("ascii")
    yield quote(text, safe="")
    yield quote_plus(text, safe="")


class SecretRedactor:
    """The secret values of one run; :meth:`redact` rewrites a text, :meth:`redact_value` a JSON
    value (keys too). Thread-safe: handlers in worker threads and the approval prompt use it."""

    def __init__(self, placeholder: str = PLACEHOLDER) -> None:
        self.placeholder = placeholder
        self._secrets: set[str] = set()
        self._forms: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __len__(self) -> int:
        return len(self._secrets)

    def __contains__(self, value: object) -> bool:
        return value in self._secrets

    def add(self, value: str | None) -> None:
        """Register one secret value (ignored when shorter than :data:`MIN_SECRET_LENGTH`)."""
        if not value or len(value) < MIN_SECRET_LENGTH or value in self._secrets:
            return
        with self._lock:
            if value in self._secrets:
                return
            forms = escaped_forms(value) - self._forms
            self._secrets.add(value)
            if not forms:
                return
            self._forms |= forms
            # longest first, so that an escaped form wins over the raw text inside it
            ordered = sorted(self._forms, key=lambda f: (-len(f), f))
            self._pattern = re.compile("|".join(map(re.escape, ordered)))

    def add_all(self, values: Iterable[str]) -> None:
        for value in values:
            self.add(value)

    def redact(self, text: str) -> str:
        """``text`` with every form of every secret replaced by the placeholder."""
        pattern = self._pattern
        if pattern is None:
            return text
        return self._scan(pattern, text)

    def _scan(self, pattern: re.Pattern[str], text: str) -> str:
        return pattern.sub(self.placeholder, text)

    def redact_value(self, value: Any) -> Any:
        """A JSON-like value with every string in it redacted, object keys included; the same
        object when nothing changed."""
        pattern = self._pattern
        if pattern is None:
            return value
        if type(value) is str:
            return self._scan(pattern, value)
        texts: list[str] = []
        _collect(value, texts)
        # one search over every string first: a value with no secret (the usual case) is not
        # rebuilt. NUL joins them; a form never spans two strings unless it holds a NUL itself
        if not texts or pattern.search("\0".join(texts)) is None:
            return value
        return _redact_value(value, self.redact)


def _collect(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str):
                out.append(k)
            if isinstance(v, str):
                out.append(v)
            elif isinstance(v, (dict, list, tuple)):
                _collect(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            if isinstance(v, str):
                out.append(v)
            elif isinstance(v, (dict, list, tuple)):
                _collect(v, out)


def _redact_value(value: Any, redact: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        out = {}
        changed = False
        for k, v in value.items():
            nk = redact(k) if isinstance(k, str) else k
            nv = _redact_value(v, redact)
            changed = changed or nk != k or nv is not v
            out[nk] = nv
        return out if changed else value
    if isinstance(value, (list, tuple)):
        items = [_redact_value(v, redact) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return type(value)(items)
    return value


class RedactingStream:
    """A text stream that redacts every write before it reaches ``stream``. Other attributes
    (``getvalue``, ``isatty``, ``fileno``, ``buffer``…) are the wrapped stream's."""

    def __init__(self, stream: IO[str], redactor: SecretRedactor) -> None:
        self.stream = stream
        self.redactor = redactor

    @classmethod
    def wrap(cls, stream: IO[str], redactor: SecretRedactor) -> IO[str]:
        """``stream`` redacted by ``redactor`` (itself when it already is)."""
        if isinstance(stream, RedactingStream) and stream.redactor is redactor:
            return stream
        return cls(stream, redactor)  # type: ignore[return-value]

    def write(self, text: str) -> int:
        if self.redactor:
            text = self.redactor.redact(text)
        return self.stream.write(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def url_secrets(url: str) -> list[str]:
    """A database URL and its password (URL form or ``password=`` form): what must never
    be shown."""
    out = [url]
    try:
        parts = urlsplit(url)
        if parts.password:
            out += [parts.password, unquote(parts.password)]
    except ValueError:
        pass
    for piece in url.split():  # the key=value form: password=...
        if piece.startswith("password="):
            out.append(piece[len("password="):])
    return [s for s in out if s]


def mcp_url_secrets(url: str) -> list[str]:
    """What an MCP server's URL may carry that must never be shown: its user information and
    the values of its query (a token such as ``?key=...``). The rest of the URL is shown."""
    out: list[str] = []
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        out += [userinfo, unquote(userinfo)]
        if parts.password:
            out += [parts.password, unquote(parts.password)]
    for piece in parts.query.split("&"):
        value = piece.partition("=")[2] or piece
        out += [value, unquote(value.replace("+", " "))]
    if parts.fragment:
        out.append(parts.fragment)
    return [s for s in out if s]


def mcp_header_values(server: Any, env: Mapping[str, str]) -> dict[str, str | None]:
    """The headers of a ``url`` MCP server: each written value, or the value of the variable
    its ``{"env": NAME}`` names (None when it is not set). Every one is a secret."""
    return {name: value if isinstance(value, str) else env.get(value.env)
            for name, value in server.headers.items()}


def register_startup_secrets(redactor: SecretRedactor, program: Any, config: Any,
                             env: Mapping[str, str]) -> None:
    """Register every secret the program can use before anything runs: the value of each tool's
    ``credential`` variable, each postgres datasource's URL and password, each MCP server's
    headers and the secrets of its URL, and the string values
    of every context in ``tool_contexts`` (the
    strings inside a ``json`` one too). API keys are registered by the ask engine, which knows
    the models. A value that is unset or does not parse is skipped here; the call that needs it
    reports the problem."""
    from luma.runtime.contexts import ContextProblem, parse_env_text, strings_in
    from luma.runtime.settings import tool_settings

    for tool in getattr(program, "tools", ()):
        credential = tool_settings(tool).credential
        if credential is not None:
            redactor.add(env.get(credential))
    for source in (getattr(config, "datasources", None) or {}).values():
        url = env.get(source.url.env) if getattr(source, "url", None) is not None else None
        if url:  # a postgres URL and its password (DATA.md §4)
            redactor.add_all(url_secrets(url))
    mcp_servers = getattr(config, "mcp_servers", None)
    for _, server in (mcp_servers() if mcp_servers is not None else []):
        if server.url is not None:  # its token, in the URL or in a header
            redactor.add_all(mcp_url_secrets(server.url))
            for value in mcp_header_values(server, env).values():
                if value:  # "Bearer TOKEN": the token alone too
                    redactor.add_all([value, value.partition(" ")[2].strip()])
    contexts = getattr(config, "tool_contexts", None) or {}
    for fields in contexts.values():
        for name, spec in fields.items():
            text = env.get(spec.env)
            if text is None or spec.parse not in ("string", "json"):
                continue
            redactor.add(text)
            if spec.parse == "json":
                try:
                    parsed = parse_env_text(text, "json", name, spec.env)
                except ContextProblem:
                    continue
                redactor.add_all(strings_in(parsed))
