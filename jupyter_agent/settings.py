"""Settings of the front end, the per-session options that override them, and the
``openai`` client they describe.

:class:`Settings` is a frozen snapshot of the ``AgentMagics`` traits (the magics build one
each time it is needed, so ``%config`` changes apply at once); :class:`SessionOptions` are
the command-line options of ``%agent_new`` / ``%agent_resume``, which override the settings
for the session they start (issue 4, "Settings"). The ``check_*`` functions are the one
place where values are validated: the traits' ``@validate`` handlers and the options both
call them, so a bad value gets the same message either way.

The API key is never a setting: :func:`build_client` reads it from the environment
variable named by ``api_key_env`` when a client is built, and hands it to the client only.
The endpoint is ``base_url``, else ``$OPENAI_BASE_URL``, else the OpenAI API. A loopback
endpoint (``localhost``, ``127.0.0.0/8``, ``::1``) is not sent the key of the default
``OPENAI_API_KEY`` -- a local server does not need the user's OpenAI key -- but it is sent
the key of a variable ``api_key_env`` names on purpose (:func:`endpoint`).
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from jupyter_agent.errors import ModelNotConfiguredError

if TYPE_CHECKING:
    import openai

    from jupyter_agent.agent import Limits

__all__ = [
    "APPROVALS",
    "BASE_URL_ENV",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_MODEL",
    "OPENAI_URL",
    "PLACEHOLDER_API_KEY",
    "SessionOptions",
    "Settings",
    "build_client",
    "check_api_key_env",
    "check_approve",
    "check_base_url",
    "check_limit",
    "check_model",
    "endpoint",
    "is_loopback",
    "not_configured_message",
    "saved_base_url",
]

#: The approval policies for tools that run code (issue 3).
APPROVALS = ("auto", "ask", "deny")
#: The model used when none is configured: small, cheap and current.
DEFAULT_MODEL = "gpt-4o-mini"
#: Sent as the key to a ``base_url`` server when the key variable is unset (local servers
#: such as Ollama, vLLM or LM Studio ignore it; the ``openai`` client insists on one).
PLACEHOLDER_API_KEY = "not-needed"
#: The default variable holding the API key (``AgentMagics.api_key_env``).
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
#: Environment variable read as the ``base_url`` when none is configured (as ``openai`` does).
BASE_URL_ENV = "OPENAI_BASE_URL"
#: The OpenAI API's own URL; as a ``base_url`` it means "no base_url" (the default endpoint).
OPENAI_URL = "https://api.openai.com/v1"


# --------------------------------------------------------------------------- validation
def check_approve(value: str) -> str:
    """Return ``value`` if it is an approval policy, else raise ``ValueError``."""
    if value not in APPROVALS:
        raise ValueError(f"approve must be one of auto, ask, deny (got {value!r})")
    return value


def check_base_url(value: str) -> str:
    """Return ``value`` if it is ``""`` or an ``http(s)://host`` URL, else raise ``ValueError``."""
    from urllib.parse import urlparse

    if value == "":
        return value
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(
            f"base_url must be an http:// or https:// URL such as "
            f"http://localhost:11434/v1 (got {value!r})"
        )
    return value


def check_limit(name: str, value: float | None, *, minimum: float = 0,
                none: str | None = "no limit") -> Any:
    """Return ``value`` if it is ``None`` or a finite number ``>= minimum``, else raise
    ``ValueError``.

    ``name`` is the setting's (or option's) name, used in the message; ``none`` says what
    ``None`` means there (``None`` for an option, which cannot be set to None: the message
    then does not suggest it).
    """
    if value is None:
        return value
    hint = f", or None for {none}" if none else ""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number{hint} (got {value!r})")
    if value < minimum:
        what = "a positive number" if minimum > 0 else "zero or more"
        raise ValueError(f"{name} must be {what}{hint} (got {value!r})")
    return value


def check_model(name: str, value: str) -> str:
    """Return ``value`` if it is a model name (not blank), else raise ``ValueError``."""
    if not value.strip():
        raise ValueError(f"{name} must not be empty")
    return value


def check_api_key_env(value: str) -> str:
    """Return ``value`` if it can name an environment variable, else raise ``ValueError``."""
    if not value or "=" in value or "\0" in value or value.strip() != value:
        raise ValueError(
            f"api_key_env must name an environment variable, e.g. OPENAI_API_KEY (got {value!r})"
        )
    return value


# --------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class SessionOptions:
    """Command-line options of ``%agent_new`` / ``%agent_resume``; ``None`` = not given.

    They override :class:`Settings` for the session they start (issue 4, "Settings").
    """

    title: str | None = None
    model: str | None = None
    base_url: str | None = None
    max_cost_usd: float | None = None
    max_tool_calls: int | None = None
    max_iterations: int | None = None
    approve: str | None = None

    def __post_init__(self) -> None:
        if self.model is not None:
            check_model("--model", self.model)
        if self.base_url is not None:
            check_base_url(self.base_url)
        if self.approve is not None:
            check_approve(self.approve)
        check_limit("--max-cost", self.max_cost_usd, none=None)
        check_limit("--max-tool-calls", self.max_tool_calls, none=None)
        check_limit("--max-iterations", self.max_iterations, minimum=1, none=None)

    def over(self, base: SessionOptions) -> SessionOptions:
        """``base`` with every option given here (not ``None``) replacing its value."""
        given = {f.name: getattr(self, f.name) for f in fields(self)
                 if getattr(self, f.name) is not None}
        return replace(base, **given)

    def given(self) -> frozenset[str]:
        """The names of the options that are given (not ``None``)."""
        return frozenset(f.name for f in fields(self) if getattr(self, f.name) is not None)


@dataclass(frozen=True)
class Settings:
    """A snapshot of the ``AgentMagics`` settings (see that class for each one's meaning).

    Units: ``max_cost_usd`` in USD, ``context_window`` in tokens.
    """

    model: str = DEFAULT_MODEL
    base_url: str = ""
    memory_dir: str = ""
    max_cost_usd: float | None = None
    max_tool_calls: int | None = None
    max_iterations: int | None = None
    approve: str = "ask"
    context_window: int | None = None
    stream: bool = True
    api_key_env: str = DEFAULT_API_KEY_ENV
    store_url: str = field(default="", repr=False)  # may hold a password

    def with_options(self, options: SessionOptions) -> Settings:
        """Return these settings with every given (non-``None``) option applied."""
        given = {
            f.name: getattr(options, f.name)
            for f in fields(options)
            if f.name != "title" and getattr(options, f.name) is not None
        }
        return replace(self, **given)

    def agent_key(self) -> tuple[Any, ...]:
        """What an :class:`~jupyter_agent.agent.Agent` is built with (limits excluded)."""
        return (self.model, self.base_url, self.api_key_env, self.approve,
                self.context_window, self.stream)

    def limits(self) -> Limits:
        """The :class:`~jupyter_agent.agent.Limits` these settings ask for."""
        from jupyter_agent.agent import Limits

        return Limits(max_tool_calls=self.max_tool_calls, max_cost_usd=self.max_cost_usd,
                      max_iterations=self.max_iterations)


def saved_base_url(url: str) -> str:
    """A session's saved endpoint as a ``base_url``: ``""`` for the OpenAI API's own URL."""
    return "" if url.rstrip("/") == OPENAI_URL else url


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

    The ``base_url`` is ``settings.base_url``, else ``$OPENAI_BASE_URL``, else ``""`` (the
    OpenAI API; its own URL counts as ``""`` too). The key is read from the variable named
    by ``settings.api_key_env`` -- except that a loopback ``base_url`` (``localhost``,
    ``127.0.0.0/8``, ``::1``: a local server) is not sent the key of the default
    ``OPENAI_API_KEY``, only that of a variable ``api_key_env`` names explicitly.
    """
    env = os.environ if environ is None else environ
    url = saved_base_url(settings.base_url or env.get(BASE_URL_ENV, ""))
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
    where = f"at {last_url}" if last_url else "on the OpenAI API"
    return (f"no model configured for session {session_id} (it last used model {last_model} "
            f"{where}): {var} is not set; set it, or pass --base-url URL --model "
            f"{last_model} for another OpenAI-compatible endpoint")


def build_client(settings: Settings, environ: Mapping[str, str] | None = None) -> openai.OpenAI:
    """Build the ``openai.OpenAI`` client for ``settings``.

    Parameters
    ----------
    settings : Settings
    environ : mapping, optional
        Where ``$OPENAI_BASE_URL`` and the key variable ``settings.api_key_env`` are read;
        :data:`os.environ` by default, at call time.

    Returns
    -------
    openai.OpenAI
        Talking to the ``base_url`` of :func:`endpoint` if there is one, else to the
        OpenAI API, with the key :func:`endpoint` picks (or :data:`PLACEHOLDER_API_KEY`
        when there is none for a ``base_url``: local servers ignore it).

    Raises
    ------
    ModelNotConfiguredError
        Neither a key nor a ``base_url`` is configured.
    """
    from jupyter_agent.agent.client import make_client

    url, key = endpoint(settings, environ)
    if not key and not url:
        raise ModelNotConfiguredError(not_configured_message(settings))
    return make_client(api_key=key or PLACEHOLDER_API_KEY, base_url=url or OPENAI_URL)
