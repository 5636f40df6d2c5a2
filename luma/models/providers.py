"""The factory for the HTTP providers (``openai``, ``azure``, ``anthropic``, ``gemini``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from luma.models.base import ModelSettings, Provider
from luma.runtime.errors import LumaError

if TYPE_CHECKING:
    import httpx

    from luma.models.http import HttpClients, ModelHttp
    from luma.models.recording import Recording

HTTP_PROVIDERS = ("openai", "azure", "anthropic", "gemini")


def make_provider(settings: ModelSettings, *,
                  client: httpx.AsyncClient | HttpClients | ModelHttp | None,
                  env: Mapping[str, str], recorder: Recording | None = None) -> Provider:
    """The adapter for one model. ``client`` is the run's shared :class:`HttpClients` (or an
    ``httpx.AsyncClient``, or a ``ModelHttp`` already wrapping one); ``recorder`` records or
    replays the traffic."""
    from luma.models.http import ModelHttp

    http = client if isinstance(client, ModelHttp) else ModelHttp(client, recorder)
    if settings.provider in ("openai", "azure"):
        from luma.models.openai import OpenAIProvider

        return OpenAIProvider(settings, http, env, azure=settings.provider == "azure")
    if settings.provider == "anthropic":
        from luma.models.anthropic import AnthropicProvider

        return AnthropicProvider(settings, http, env)
    if settings.provider == "gemini":
        from luma.models.gemini import GeminiProvider

        return GeminiProvider(settings, http, env)
    raise LumaError("MODEL_CONFIG",
                    f"Model '{settings.name}' has provider '{settings.provider}'; the HTTP "
                    f"providers are {', '.join(HTTP_PROVIDERS)}.")
