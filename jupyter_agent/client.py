"""The one client factory: from settings to an ``openai`` client and a model.

The endpoint is always what this kernel's user configured, never a value read from a
session or team-store row. The key is read from ``api_key_env`` when a client is built and
handed to it only; a loopback endpoint never gets the default ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import hashlib
import importlib
import ipaddress
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse, urlsplit

from jupyter_agent.errors import ModelNotConfiguredError
from jupyter_agent.settings import DEFAULT_API_KEY_ENV, MODEL_APIS, Settings

if TYPE_CHECKING:
    import openai

    from jupyter_agent.agent.adapters import Model

#: Sent as the key to a ``base_url`` server when the key variable is unset (local servers
#: ignore it; the ``openai`` client insists on one).
PLACEHOLDER_API_KEY = "not-needed"
BASE_URL_ENV = "OPENAI_BASE_URL"
#: The OpenAI API's own URL; as a ``base_url`` it means "no base_url".
OPENAI_URL = "https://api.openai.com/v1"


def saved_base_url(url: str) -> str:
    """A saved endpoint as a ``base_url``: ``""`` for the OpenAI API's own URL."""
    return "" if url.rstrip("/") == OPENAI_URL else url


def configured_base_url(settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """The endpoint this kernel's user configured; ``""`` for the OpenAI API."""
    env = os.environ if environ is None else environ
    return saved_base_url(settings.base_url or env.get(BASE_URL_ENV, ""))


def describe_endpoint(url: str, limit: int = 120) -> str:
    """An endpoint for a message, whatever a record holds: without credentials (``***@``),
    query or fragment (``?***``), unprintable characters escaped, at most ``limit``
    characters."""
    if not saved_base_url(url):
        return "the OpenAI API"
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")
        netloc = f"***@{host[2]}" if host[1] else parts.netloc
        shown = f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else url
        if parts.query or parts.fragment:
            shown += "?***"
    except ValueError:
        shown = "<unparsable URL>"
    return _printable(shown, limit)


def _printable(text: str, limit: int) -> str:
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: limit + 1])
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_loopback(url: str) -> bool:
    """True if ``url``'s host is ``localhost``, in ``127.0.0.0/8`` or ``::1``."""
    host = (urlparse(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint(settings: Settings, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The ``(base_url, api_key)`` a client for ``settings`` uses, ``""`` where none;
    ``environ`` (default :data:`os.environ`) is read at call time."""
    env = os.environ if environ is None else environ
    url = configured_base_url(settings, env)
    if url and is_loopback(url) and settings.api_key_env == DEFAULT_API_KEY_ENV:
        return url, ""
    return url, env.get(settings.api_key_env, "")


def endpoint_id(settings: Settings, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The ``base_url`` of :func:`endpoint` and a hash of its key (the key is never kept)."""
    url, key = endpoint(settings, environ)
    return url, hashlib.sha256(key.encode()).hexdigest()


def model_key(settings: Settings, environ: Mapping[str, str] | None = None) -> tuple[Any, ...]:
    """What a model is built from: a change means a new model."""
    return (*settings.model_key(), *endpoint_id(settings, environ))


def not_configured_message(settings: Settings, *, session_id: str | None = None,
                           last_model: str = "", last_url: str = "") -> str:
    """What :class:`ModelNotConfiguredError` says; with ``session_id``, naming the model and
    endpoint the session last used (``last_url`` ``""``: the OpenAI API)."""
    var = settings.api_key_env
    local = ("point --base-url / %config AgentMagics.base_url at a local OpenAI-compatible "
             "server (Ollama, vLLM, LM Studio), e.g. http://localhost:11434/v1")
    if session_id is None:
        return (f"no model configured: {var} is not set; set it in the environment Jupyter "
                f"starts from to use {settings.model} on the OpenAI API (pick the model with "
                f"--model or %config AgentMagics.model), or {local}")
    if not last_model:
        return f"no model configured for session {session_id}: {var} is not set; set it, or {local}"
    where = f"at {describe_endpoint(last_url)}" if last_url else "on the OpenAI API"
    model = _printable(last_model, 80)
    return (f"no model configured for session {session_id} (it last used model {model} "
            f"{where}): {var} is not set; set it, or pass --base-url URL --model "
            f"{model} for another OpenAI-compatible endpoint")


def build_client(settings: Settings, environ: Mapping[str, str] | None = None, *,
                 max_retries: int = 2, timeout: float = 600.0) -> openai.OpenAI:
    """The ``openai.OpenAI`` client for ``settings`` (the only place one is built);
    ``max_retries`` on 429, 5xx and connection errors, ``timeout`` in seconds.

    Raises
    ------
    ModelNotConfiguredError
        Neither a key nor a ``base_url`` is configured.
    """
    import openai  # ~0.5 s: only when a model is built

    url, key = endpoint(settings, environ)
    if not key and not url:
        raise ModelNotConfiguredError(not_configured_message(settings))
    return openai.OpenAI(api_key=key or PLACEHOLDER_API_KEY, base_url=url or OPENAI_URL,
                         max_retries=max_retries, timeout=timeout)


def build_model(settings: Settings, environ: Mapping[str, str] | None = None, *,
                client: openai.OpenAI | None = None) -> Model:
    """The model ``settings`` describe: ``api`` picks the class, the ``"request"``
    settings go with every request; ``client`` (default: a new :func:`build_client`) must
    be for the same :func:`endpoint_id`.

    Raises
    ------
    ModelNotConfiguredError
        Neither a key nor a ``base_url`` is configured.
    """
    client = client or build_client(settings, environ)
    module, _, name = MODEL_APIS[settings.api].partition(":")
    cls = getattr(importlib.import_module(module), name)
    key_env = None if client.api_key == PLACEHOLDER_API_KEY else settings.api_key_env
    model: Model = cls(client, settings.model, params=settings.request_params(),
                       key_env=key_env)
    return model
