"""``luma.config.json`` (RUNTIME.md §2), validated with pydantic.

Every error names its key path (``tool_modules[0].integrity``); an unknown key gets a
did-you-mean hint. A bad config stops the program before anything runs (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

CONFIG_NAME = "luma.config.json"


class ConfigError(Exception):
    """A config file that cannot be used; ``messages`` has one line per problem."""

    def __init__(self, path: str, messages: list[str]) -> None:
        super().__init__("\n".join(messages))
        self.path = path
        self.messages = messages


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolModuleManifest(_Strict):
    path: str
    version: str | None = None
    integrity: str | None = None
    dependencies: list[str] | None = None
    dependency_root: str | None = None

    @field_validator("integrity")
    @classmethod
    def _integrity_form(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("sha256-"):
            raise ValueError("must look like 'sha256-<base64 of the file's sha256>'")
        return v


class EnvReference(_Strict):
    env: str


class McpServer(_Strict):
    """An MCP server whose tools implement the program's tools: a ``command`` Luma starts
    (stdio), with extra ``env``, or the ``url`` of a server that runs on its own (Streamable
    HTTP), with extra ``headers``; ``names`` maps a program tool's name to the server's."""

    command: list[str] | None = Field(default=None, min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str | EnvReference] = Field(default_factory=dict)
    names: dict[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _url_form(cls, v: str | None) -> str | None:
        if v is not None and not (v.startswith(("http://", "https://")) and len(v) > 8):
            raise ValueError("must be an http:// or https:// URL (the server's MCP endpoint)")
        return v

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError('an MCP server needs either "command" (a server Luma starts) '
                             'or "url" (a server that runs on its own), not both')
        if self.url is not None and self.env:
            raise ValueError('"env" is for a server Luma starts ("command"); a "url" server '
                             'takes "headers"')
        if self.command is not None and self.headers:
            raise ValueError('"headers" are for a "url" server; a server Luma starts '
                             '("command") takes "env"')
        return self


class McpToolModule(_Strict):
    mcp: McpServer


def _module_kind(value: Any) -> str:
    if isinstance(value, str):
        return "str"
    if isinstance(value, dict) and "mcp" in value:
        return "McpToolModule"
    return "ToolModuleManifest"


ToolModuleEntry = Annotated[Union[Annotated[str, Tag("str")],
                                  Annotated[ToolModuleManifest, Tag("ToolModuleManifest")],
                                  Annotated[McpToolModule, Tag("McpToolModule")]],
                            Discriminator(_module_kind)]


class ToolModulePolicy(_Strict):
    sandbox: Literal["none", "strict", "process"] = "none"
    allow_builtins: list[str] = Field(default_factory=list)
    allow_env: bool = False
    allow_network: bool = False
    max_memory_mb: int | None = Field(default=None, ge=16)
    max_concurrency: int = Field(default=1, ge=1)


class ContextField(_Strict):
    env: str
    parse: Literal["string", "json", "number", "integer", "boolean"] = "string"


class IdempotencyStoreConfig(_Strict):
    backend: Literal["memory", "file", "postgres", "redis"] = "memory"
    path: str | None = None
    encryption: Literal["aes-256-gcm"] | None = None
    url: EnvReference | None = None  # postgres, redis: the variable that holds the URL
    table: str | None = None  # postgres
    prefix: str | None = None  # redis
    lease_ms: int | None = Field(default=None, ge=100)


class DatasourceConfig(_Strict):
    """A datasource's bridge (DATA.md §4): ``sqlite`` with a ``path`` (relative to the
    program's folder, or ``":memory:"``), or ``postgres`` with a ``url`` read from the
    environment (a secret: never written in the file, never printed)."""

    driver: Literal["sqlite", "postgres"]
    path: str | None = None
    url: EnvReference | None = None
    init: str | None = None  # sqlite: a SQL script that fills a database Luma creates

    @model_validator(mode="after")
    def _driver_keys(self) -> DatasourceConfig:
        if self.driver == "sqlite":
            if self.path is None:
                raise ValueError('the sqlite driver needs "path": a file beside the program, '
                                 'or ":memory:"')
            if self.url is not None:
                raise ValueError('the sqlite driver takes "path", not "url"')
        elif self.init is not None:
            raise ValueError('"init" is for the sqlite driver only')
        if self.driver == "postgres":
            if self.url is None:
                raise ValueError('the postgres driver needs "url": {"env": "NAME"}, the '
                                 "environment variable that holds the URL")
            if self.path is not None:
                raise ValueError('the postgres driver takes "url", not "path"')
        return self


class LumaConfig(_Strict):
    tool_modules: list[ToolModuleEntry] = Field(default_factory=list)
    tool_module_policy: ToolModulePolicy | None = None
    tool_contexts: dict[str, dict[str, ContextField]] = Field(default_factory=dict)
    idempotency_store: IdempotencyStoreConfig = Field(default_factory=IdempotencyStoreConfig)
    default_model: str | None = None
    models: dict[str, dict[str, Any]] = Field(default_factory=dict)
    datasources: dict[str, DatasourceConfig] = Field(default_factory=dict)
    _source: str = PrivateAttr(default=CONFIG_NAME)

    @property
    def source(self) -> str:
        """The config file as the user named it (for messages)."""
        return self._source

    def module_manifests(self) -> list[ToolModuleManifest]:
        """``tool_modules`` with the short form expanded."""
        return [ToolModuleManifest(path=m) if isinstance(m, str) else m for m in self.tool_modules
                if not isinstance(m, McpToolModule)]

    def mcp_servers(self) -> list[tuple[int, McpServer]]:
        """The ``{"mcp": …}`` entries of ``tool_modules``, with their index."""
        return [(i, m.mcp) for i, m in enumerate(self.tool_modules)
                if isinstance(m, McpToolModule)]


_ALLOWED_KEYS: dict[str, tuple[str, ...]] = {
    "": tuple(LumaConfig.model_fields),
    "tool_modules[]": tuple(ToolModuleManifest.model_fields),
    "tool_modules[].mcp": tuple(McpServer.model_fields),
    "tool_modules[].mcp.headers.*": tuple(EnvReference.model_fields),
    "tool_module_policy": tuple(ToolModulePolicy.model_fields),
    "idempotency_store": tuple(IdempotencyStoreConfig.model_fields),
    "idempotency_store.url": tuple(EnvReference.model_fields),
    "tool_contexts.*.*": tuple(ContextField.model_fields),
    "datasources.*": tuple(DatasourceConfig.model_fields),
    "datasources.*.url": tuple(EnvReference.model_fields),
}


# the union branch names pydantic adds to an error's location
_BRANCHES = ("str", "ToolModuleManifest", "McpToolModule", "EnvReference")


def _key_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _BRANCHES or str(part).startswith(("literal[", "function-")):
            continue  # union branch names pydantic adds to the location
        else:
            out += f".{part}" if out else str(part)
    return out


def _shape(loc: tuple[Any, ...]) -> str:
    parts = [p for p in loc if p not in _BRANCHES]
    if not parts:
        return ""
    if parts[0] == "tool_modules":
        if len(parts) >= 5 and parts[2] == "mcp" and parts[3] == "headers":
            return "tool_modules[].mcp.headers.*"
        return "tool_modules[].mcp" if len(parts) >= 3 and parts[2] == "mcp" else \
            "tool_modules[]"
    if parts[0] == "tool_contexts":
        return "tool_contexts.*.*"
    if parts[0] == "datasources":
        return "datasources.*" if len(parts) == 2 else "datasources.*.url"
    return str(parts[0]) if len(parts) == 1 else ""


def _messages(error: ValidationError) -> list[str]:
    from luma.syntax.diagnostics import did_you_mean

    out: list[str] = []
    seen: set[str] = set()
    errors = error.errors()
    # For `str | Manifest` unions pydantic reports one error per branch; keep the manifest one.
    manifest_locs = {tuple(e["loc"][:2]) for e in errors
                     if len(e["loc"]) > 2 and e["loc"][2] == "ToolModuleManifest"}
    # Likewise for a header's `str | {"env": ...}`: an object written there gets the object's.
    header_objects = {tuple(e["loc"][:-1]) for e in errors
                      if e["loc"][-1:] == ("str",) and isinstance(e.get("input"), dict)}
    for e in errors:
        loc = tuple(e["loc"])
        if len(loc) > 2 and loc[0] == "tool_modules" and loc[2] == "str" and loc[:2] in manifest_locs:
            continue
        if loc[:-1] in header_objects and loc[-1] == "str":
            continue
        path = _key_path(loc)
        mcp = loc[:1] == ("tool_modules",) and "mcp" in loc
        if mcp:  # a URL or a header there may hold a token, a secret: never shown
            e = {k: v for k, v in e.items() if k != "input"}  # type: ignore[assignment]
            if "headers" in loc and len(loc) > 5 and e["type"] in (
                    "model_type", "dict_type", "string_type"):
                msg = f'{path}: must be a string or {{"env": "NAME"}}'
                if msg not in seen:
                    seen.add(msg)
                    out.append(msg)
                continue
        if loc[:1] == ("datasources",):
            # what is written there may hold a URL, a secret: never shown
            e = {k: v for k, v in e.items() if k != "input"}  # type: ignore[assignment]
            if loc[-1] == "url" and e["type"] in ("model_type", "dict_type"):
                msg = (f'{path}: must be {{"env": "NAME"}}, the environment variable that holds '
                       "the URL (a URL holds a password and is not written in the config)")
                if msg not in seen:
                    seen.add(msg)
                    out.append(msg)
                continue
        if e["type"] == "extra_forbidden":
            key = str(loc[-1])
            allowed = _ALLOWED_KEYS.get(_shape(loc[:-1]) if len(loc) > 1 else "", ())
            hint = did_you_mean(key, allowed) if allowed else None
            msg = f"{path}: unknown key" + (f"; {hint}" if hint else "")
        elif loc[:1] == ("tool_modules",) and len(loc) >= 2 and not mcp and e["type"] in (
                "model_type", "dict_type", "string_type"):
            msg = f"{path}: must be a path string or a manifest object with 'path'"
        elif e["type"] in ("model_type", "dict_type"):  # pydantic's words name our classes
            msg = f"{path or '(top level)'}: must be an object"
            shown = json.dumps(e.get("input"), default=str)
            if len(shown) <= 60:
                msg += f" (got {shown})"
        elif e["type"] == "missing":
            msg = f"{path}: required key is missing"
        else:
            detail = str(e["msg"])
            if detail.startswith("Value error, "):
                detail = detail[len("Value error, "):]
            msg = f"{path or '(top level)'}: {detail[0].lower() + detail[1:] if detail else detail}"
            if "input" in e and e["type"] not in ("model_type", "dict_type"):
                shown = json.dumps(e["input"], default=str)
                if len(shown) <= 60:
                    msg += f" (got {shown})"
        if msg not in seen:
            seen.add(msg)
            out.append(msg)
    return out


def parse_config(data: Any, path: str = CONFIG_NAME) -> LumaConfig:
    """Validate already-loaded JSON; raises :class:`ConfigError`. ``path`` names the file in
    messages (:attr:`LumaConfig.source`)."""
    try:
        config = LumaConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(path, _messages(exc)) from None
    config._source = path
    return config


def load_config(path: str | Path) -> LumaConfig:
    """Read and validate a config file; raises :class:`ConfigError` with located messages."""
    from luma.runtime.json_text import DuplicateKeyError, NotUtf8Error, decode_utf8, loads

    p = Path(path)
    try:
        text = decode_utf8(p.read_bytes())  # a byte order mark is not an error
    except OSError as exc:
        raise ConfigError(str(p), [f"cannot read the config file: {exc.strerror or exc}"]) from None
    except NotUtf8Error as exc:
        raise ConfigError(str(p), [f"cannot read the config file: it {exc}"]) from None
    try:
        data = loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(str(p), [f"line {exc.lineno} column {exc.colno}: invalid JSON: "
                                   f"{exc.msg}"]) from None
    except DuplicateKeyError as exc:
        raise ConfigError(str(p), [f"{key}: duplicate key" for key in exc.paths]) from None
    if not isinstance(data, dict):
        raise ConfigError(str(p), ["the config must be a JSON object"])
    return parse_config(data, str(p))


def config_location(program_path: str | Path, explicit: str | None = None) -> Path | None:
    """The config file a run uses: ``--config PATH`` when given, else ``luma.config.json``
    beside the program when there is one, else None."""
    if explicit is not None:
        return Path(explicit)
    beside = Path(program_path).parent / CONFIG_NAME  # named as the program was
    return beside if beside.is_file() else None


def find_config(program_path: str | Path, explicit: str | None = None) -> LumaConfig | None:
    """The config of :func:`config_location`, loaded; None when there is none."""
    if explicit is not None:
        return load_config(explicit)  # named as the user wrote it
    location = config_location(program_path)
    return load_config(location) if location is not None else None
