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
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from jupyter_agent.errors import ModelNotConfiguredError

if TYPE_CHECKING:
    import openai

    from jupyter_agent.agent import Limits

__all__ = [
    "APPROVALS",
    "DEFAULT_MODEL",
    "PLACEHOLDER_API_KEY",
    "SessionOptions",
    "Settings",
    "build_client",
    "check_api_key_env",
    "check_approve",
    "check_base_url",
    "check_limit",
]

#: The approval policies for tools that run code (issue 3).
APPROVALS = ("auto", "ask", "deny")
#: The model used when none is configured: small, cheap and current.
DEFAULT_MODEL = "gpt-4o-mini"
#: Sent as the key to a ``base_url`` server when the key variable is unset (local servers
#: such as Ollama, vLLM or LM Studio ignore it; the ``openai`` client insists on one).
PLACEHOLDER_API_KEY = "not-needed"


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


def check_limit(name: str, value: float | None, *, minimum: float = 0) -> Any:
    """Return ``value`` if it is ``None`` or ``>= minimum``, else raise ``ValueError``.

    ``name`` is the setting's name, used in the message.
    """
    if value is not None and value < minimum:
        what = "a positive number" if minimum > 0 else "zero or more"
        raise ValueError(f"{name} must be {what}, or None for no limit (got {value!r})")
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
        if self.base_url is not None:
            check_base_url(self.base_url)
        if self.approve is not None:
            check_approve(self.approve)
        check_limit("--max-cost", self.max_cost_usd)
        check_limit("--max-tool-calls", self.max_tool_calls)
        check_limit("--max-iterations", self.max_iterations, minimum=1)


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
    api_key_env: str = "OPENAI_API_KEY"

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


def build_client(settings: Settings, environ: Mapping[str, str] | None = None) -> openai.OpenAI:
    """Build the ``openai.OpenAI`` client for ``settings``.

    Parameters
    ----------
    settings : Settings
    environ : mapping, optional
        Where the key variable ``settings.api_key_env`` is read; :data:`os.environ` by
        default, at call time.

    Returns
    -------
    openai.OpenAI
        Talking to ``settings.base_url`` if set, else to the OpenAI API.

    Raises
    ------
    ModelNotConfiguredError
        Neither a key nor a ``base_url`` is configured. With a ``base_url`` and no key,
        a placeholder key is sent (local servers ignore it).
    """
    from jupyter_agent.agent.client import make_client

    env = os.environ if environ is None else environ
    key = env.get(settings.api_key_env, "")
    if not key and not settings.base_url:
        raise ModelNotConfiguredError(
            f"no model configured: set the {settings.api_key_env} environment variable "
            f"(and pick a model with --model or %config AgentMagics.model), or point "
            f"--base-url / %config AgentMagics.base_url at a local OpenAI-compatible "
            f"server (Ollama, vLLM, LM Studio), e.g. http://localhost:11434/v1"
        )
    return make_client(api_key=key or PLACEHOLDER_API_KEY, base_url=settings.base_url or None)
