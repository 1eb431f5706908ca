"""The one client factory: from settings to an ``openai`` client and a model.

:func:`build_model` is what the controller calls: it builds the ``openai.OpenAI`` client
(:func:`build_client`) and wraps it in the :class:`~jupyter_agent.agent.adapters.Model` of
the session's ``api`` (:data:`~jupyter_agent.settings.MODEL_APIS`), with the settings'
request fields.

Endpoint and key: the endpoint is ``base_url``, else ``$OPENAI_BASE_URL``,
else the OpenAI API (whose own URL counts as no ``base_url``) -- always what this kernel's
user configured (:func:`configured_base_url`), never a value read from a session or a
team-store row, which may only be named (:func:`describe_endpoint`). The key is read from the
variable named by ``api_key_env`` when a client is built and handed to the client only:
it is never kept on a setting, written to a session, printed or logged. A loopback
endpoint (``localhost``, ``127.0.0.0/8``, ``::1``: a local server) is not sent the key of
the default ``OPENAI_API_KEY``, only that of a variable ``api_key_env`` names on purpose;
a ``base_url`` without a key gets :data:`PLACEHOLDER_API_KEY` (local servers ignore it).

Importing this module imports neither ``openai`` nor the agent.
"""

from __future__ import annotations

import importlib
import ipaddress
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from jupyter_agent.errors import ModelNotConfiguredError
from jupyter_agent.settings import DEFAULT_API_KEY_ENV, MODEL_APIS, Settings

if TYPE_CHECKING:
    import openai

    from jupyter_agent.agent.adapters import Model

__all__ = [
    "BASE_URL_ENV",
    "OPENAI_URL",
    "PLACEHOLDER_API_KEY",
    "build_client",
    "build_model",
    "configured_base_url",
    "describe_endpoint",
    "endpoint",
    "is_loopback",
    "not_configured_message",
    "saved_base_url",
]

#: Sent as the key to a ``base_url`` server when the key variable is unset (local servers
#: such as Ollama, vLLM or LM Studio ignore it; the ``openai`` client insists on one).
PLACEHOLDER_API_KEY = "not-needed"
#: Environment variable read as the ``base_url`` when none is configured (as ``openai`` does).
BASE_URL_ENV = "OPENAI_BASE_URL"
#: The OpenAI API's own URL; as a ``base_url`` it means "no base_url" (the default endpoint).
OPENAI_URL = "https://api.openai.com/v1"


def saved_base_url(url: str) -> str:
    """A session's saved endpoint as a ``base_url``: ``""`` for the OpenAI API's own URL."""
    return "" if url.rstrip("/") == OPENAI_URL else url


def configured_base_url(settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """The endpoint this kernel's user configured: ``settings.base_url``, else
    ``$OPENAI_BASE_URL``; ``""`` for none (the OpenAI API)."""
    env = os.environ if environ is None else environ
    return saved_base_url(settings.base_url or env.get(BASE_URL_ENV, ""))


def describe_endpoint(url: str, limit: int = 120) -> str:
    """An endpoint for a message, safe to show whatever a record holds.

    ``""`` (and the OpenAI API's own URL) is ``"the OpenAI API"``; otherwise the URL
    without credentials (a user or password becomes ``***@``, a query or fragment
    ``?***``), control and other unprintable characters escaped (``\\x1b``), at most
    ``limit`` characters (then ``…``).
    """
    from urllib.parse import urlsplit

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
    """``text`` with unprintable characters escaped, at most ``limit`` characters."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: limit + 1])
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_loopback(url: str) -> bool:
    """True if ``url``'s host is this machine: ``localhost``, ``127.0.0.0/8`` or ``::1``."""
    from urllib.parse import urlparse

    host = (urlparse(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint(settings: Settings, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The ``(base_url, api_key)`` a client for ``settings`` uses (``""`` where none).

    Parameters
    ----------
    settings : Settings
    environ : mapping, optional
        Where ``$OPENAI_BASE_URL`` and the key variable are read; :data:`os.environ` by
        default, at call time.

    Returns
    -------
    (str, str)
        The ``base_url`` (``""``: the OpenAI API) and the key (``""``: none; see the
        module docstring for loopback endpoints).
    """
    env = os.environ if environ is None else environ
    url = configured_base_url(settings, env)
    if url and is_loopback(url) and settings.api_key_env == DEFAULT_API_KEY_ENV:
        return url, ""
    return url, env.get(settings.api_key_env, "")


def not_configured_message(settings: Settings, *, session_id: str | None = None,
                           last_model: str = "", last_url: str = "") -> str:
    """What :class:`ModelNotConfiguredError` says: which variable is missing, how to go on.

    With ``session_id`` the message names the session and, if known, the model and
    endpoint it last used (``last_url`` ``""``: the OpenAI API).
    """
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
    """Build the ``openai.OpenAI`` client for ``settings`` (the only place one is built).

    Parameters
    ----------
    settings : Settings
    environ : mapping, optional
        Where ``$OPENAI_BASE_URL`` and the key variable ``settings.api_key_env`` are read;
        :data:`os.environ` by default, at call time.
    max_retries : int
        Retries the client makes itself on 429, 5xx and connection errors.
    timeout : float
        Seconds per request.

    Returns
    -------
    openai.OpenAI
        Talking to the ``base_url`` of :func:`endpoint` if there is one, else to the
        OpenAI API, with the key :func:`endpoint` picks (or :data:`PLACEHOLDER_API_KEY`).

    Raises
    ------
    ModelNotConfiguredError
        Neither a key nor a ``base_url`` is configured.
    """
    import openai

    url, key = endpoint(settings, environ)
    if not key and not url:
        raise ModelNotConfiguredError(not_configured_message(settings))
    return openai.OpenAI(api_key=key or PLACEHOLDER_API_KEY, base_url=url or OPENAI_URL,
                         max_retries=max_retries, timeout=timeout)


def build_model(settings: Settings, environ: Mapping[str, str] | None = None, *,
                max_retries: int = 2, timeout: float = 600.0) -> Model:
    """The :class:`~jupyter_agent.agent.adapters.Model` ``settings`` describe.

    Parameters
    ----------
    settings : Settings
        ``api`` picks the implementation, ``model`` the model name; the endpoint and key
        as in :func:`build_client`; the ``"request"`` settings are sent with every request.
    environ : mapping, optional
        As in :func:`build_client`.
    max_retries, timeout
        As in :func:`build_client`.

    Returns
    -------
    Model

    Raises
    ------
    ModelNotConfiguredError
        Neither a key nor a ``base_url`` is configured.
    """
    client = build_client(settings, environ, max_retries=max_retries, timeout=timeout)
    module, _, name = MODEL_APIS[settings.api].partition(":")
    cls = getattr(importlib.import_module(module), name)
    key_env = None if client.api_key == PLACEHOLDER_API_KEY else settings.api_key_env
    model: Model = cls(client, settings.model, params=settings.request_params(),
                       key_env=key_env)
    return model
