"""What the runs of one loaded program share (``luma.api.Program``): one :class:`SharedState`
beside each run's own :class:`~luma.runtime.engine.Runtime`."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from luma.runtime.cache import ResultCache
from luma.schema.compile import SchemaCompiler
from luma.syntax import ast

if TYPE_CHECKING:
    from luma.models.http import HttpClients
    from luma.runtime.secrets import SecretRedactor
    from luma.runtime.stores import IdempotencyStore


class SharedState:
    """What every run of one loaded program shares: the compiled schemas, the tool and agent
    plans, the schemas of ``fn`` parameters, the result cache, the idempotency store and one HTTP
    client per event loop. Everything here is safe to use from concurrent runs of one event loop
    and from threads; what a run changes (its frames, circuit breakers, concurrency limits,
    warnings) lives on its own :class:`Runtime`."""

    def __init__(self, program: ast.Program) -> None:
        self.schemas = SchemaCompiler(program)
        self.cache = ResultCache()
        self.tool_plans: dict[str, Any] = {}
        self.agent_settings: dict[str, Any] = {}
        self.node_schemas: dict[int, dict[str, Any]] = {}
        self.answer_shapes: dict[Any, Any] = {}
        self.store: IdempotencyStore | None = None
        self.has_idempotent_tools: bool | None = None  # worked out by the first pipeline
        self.secrets_registered_from: Mapping[str, str] | None = None
        self.secrets_redactor: SecretRedactor | None = None
        self.http_connections: int | None = None
        """The most connections one loop's client opens, never fewer than
        ``DEFAULT_HTTP_CONNECTIONS`` (None: that default); ``luma batch`` sets its concurrency."""
        self.rate_limit_hold_s: float | None = None
        """How long a request waits out a 429 before it fails, whatever ``max_retries`` says
        (None: a 429 is retried as any error; ``luma batch --max-wait``)."""
        self._lock = threading.Lock()
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, HttpClients] = \
            weakref.WeakKeyDictionary()

    def http_client(self) -> HttpClients:
        """The HTTP client (and connection pool) of the running event loop; an httpx client
        belongs to the loop it first ran on."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is None or client.is_closed:
                from luma.models.http import DEFAULT_HTTP_CONNECTIONS, new_http_client

                client = self._clients[loop] = new_http_client(
                    max(self.http_connections or 0, DEFAULT_HTTP_CONNECTIONS),
                    rate_limit_hold_s=self.rate_limit_hold_s)
            return client

    async def close_http_client(self) -> None:
        """Close the running loop's client (a run of its own loop ends with it)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()

    def drop_http_clients(self) -> list[HttpClients]:
        """Forget every loop's client; the caller closes those of its own loop."""
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
        return clients
