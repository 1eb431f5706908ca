"""The table of settings: one :class:`Option` row per setting, and the checks of values.

Everything else about settings is generated from :data:`OPTIONS` (see
:mod:`jupyter_agent.settings`). Importing this module does nothing but build the table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["APPROVALS", "DEFAULT_API_KEY_ENV", "DEFAULT_MODEL", "MODEL_APIS", "OPTIONS",
           "VISION_MODES", "Option", "Use", "check_api_key_env", "check_base_url",
           "check_limit", "check_model", "check_store_url", "option"]

#: The approval policies for tools that run code.
APPROVALS = ("auto", "ask", "deny")
#: Whether figures are sent to the model as images.
VISION_MODES = ("auto", "on", "off")
#: The model used when none is configured: small, cheap and current.
DEFAULT_MODEL = "gpt-4o-mini"
#: The default variable holding the API key (``AgentMagics.api_key_env``).
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
#: The model APIs a session can talk to: ``api`` value -> ``"module:Class"`` of its
#: :class:`~jupyter_agent.agent.adapters.Model` implementation (imported when first used).
MODEL_APIS: Mapping[str, str] = {
    "chat": "jupyter_agent.agent.adapters:ChatModel",
    "responses": "jupyter_agent.agent.adapters:ResponsesModel",
}

Use = Literal["endpoint", "limit", "agent", "request", "front end"]
"""Who reads a setting: the client factory, the agent's limits, the agent's config, every
model request, or the front end (magics, controller)."""


# --------------------------------------------------------------------------- validation
def check_store_url(label: str, value: str, hint: str = "") -> str:
    """Return ``value`` if it is ``""`` or a PostgreSQL URL (as a string whose ``repr``
    hides the password), else raise ``ValueError`` naming ``label``."""
    from jupyter_agent.store.postgres.url import check_store_url as check

    try:
        return check(value)
    except ValueError as err:
        text = str(err)
        raise ValueError(text if text.startswith(label) else f"{label}: {text}") from None


def check_base_url(label: str, value: str, hint: str = "") -> str:
    """Return ``value`` if it is ``""`` or an ``http(s)://host`` URL, else raise ``ValueError``."""
    from urllib.parse import urlparse

    if value == "":
        return value
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(
            f"{label} must be an http:// or https:// URL such as "
            f"http://localhost:11434/v1 (got {value!r})"
        )
    return value


def check_limit(label: str, value: float, *, minimum: float = 0, maximum: float | None = None,
                hint: str = "") -> float:
    """Return ``value`` if it is a finite number in ``[minimum, maximum]``, else raise
    ``ValueError`` whose message starts with ``label`` and ends with ``hint``."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{label} must be a finite number{hint} (got {value!r})")
    if value < minimum:
        what = "a positive number" if minimum > 0 else "zero or more"
        raise ValueError(f"{label} must be {what}{hint} (got {value!r})")
    if maximum is not None and value > maximum:
        raise ValueError(f"{label} must be at most {maximum:g}{hint} (got {value!r})")
    return value


def check_model(label: str, value: str, hint: str = "") -> str:
    """Return ``value`` if it is a model name (not blank), else raise ``ValueError``."""
    if not value.strip():
        raise ValueError(f"{label} must not be empty")
    return value


def check_api_key_env(label: str, value: str, hint: str = "") -> str:
    """Return ``value`` if it can name an environment variable, else raise ``ValueError``."""
    if not value or "=" in value or "\0" in value or value.strip() != value:
        raise ValueError(
            f"{label} must name an environment variable, e.g. OPENAI_API_KEY (got {value!r})"
        )
    return value


def _at_least(minimum: float, maximum: float | None = None) -> Callable[..., float]:
    def check(label: str, value: float, hint: str = "") -> float:
        return check_limit(label, value, minimum=minimum, maximum=maximum, hint=hint)

    return check


# --------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Option:
    """One setting (see the module docstring).

    Attributes
    ----------
    name : str
        The trait, the :class:`Settings` attribute, the :class:`SessionOptions` field.
    type : type
        ``str``, ``int``, ``float`` or ``bool``.
    default : object
        The value when nothing sets it.
    help : str
        One sentence (units included); the trait's help and, unless ``flag_help`` is
        given, the magic option's.
    use : str
        Who reads it (see :data:`Use`).
    check : callable, optional
        ``check(label, value, hint) -> value``; raises ``ValueError`` whose message starts
        with ``label`` (the setting's name or the flag) and ends with ``hint`` (what
        ``None`` means, or ``""``).
    choices : tuple of str, optional
        The allowed values (checked, and listed by the magic's help).
    none : str, optional
        What ``None`` means for this setting ("no limit"); ``None``: it cannot be None.
    flag : str, optional
        The option of ``%agent_new`` / ``%agent_resume`` that overrides the setting for
        one session (the setting is then *per session*); ``None``: settings only.
    metavar, flag_help : str, optional
        For the magic's usage text.
    saved : bool
        The session's checkpoint records the value it last used, and a resume without
        this option uses it. The endpoint is recorded too but is never such
        a row: a record never chooses where the API key goes.
    """

    name: str
    type: type
    default: Any
    help: str
    use: Use
    check: Callable[..., Any] | None = None
    choices: tuple[str, ...] | None = None
    none: str | None = None
    flag: str | None = None
    metavar: str | None = None
    flag_help: str | None = None
    saved: bool = False

    @property
    def per_session(self) -> bool:
        """Whether ``%agent_new`` / ``%agent_resume`` can override it for one session."""
        return self.flag is not None

    def validate(self, value: Any, *, as_flag: bool = False) -> Any:
        """Return ``value`` if this option accepts it, else raise ``ValueError``.

        Parameters
        ----------
        value : object
        as_flag : bool
            The value was given with the magic flag: the message names the flag and does
            not suggest ``None`` (an option not given is simply left out).
        """
        label = self.flag if as_flag and self.flag else self.name
        if value is None:
            if self.none is None:
                raise ValueError(f"{label} must not be None")
            return value
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{label} must be one of {', '.join(self.choices)} (got {value!r})")
        if self.check is None:
            return value
        hint = f", or None for {self.none}" if self.none and not as_flag else ""
        return self.check(label, value, hint)


OPTIONS: tuple[Option, ...] = (
    Option("model", str, DEFAULT_MODEL, "Model name sent to the endpoint.", "endpoint",
           check=check_model, flag="--model", saved=True,
           flag_help="Model name for this session (default: AgentMagics.model)."),
    Option("base_url", str, "", "OpenAI-compatible endpoint (e.g. http://localhost:11434/v1 "
           "for Ollama); empty: $OPENAI_BASE_URL, else the OpenAI API.", "endpoint",
           check=check_base_url, flag="--base-url", metavar="URL",
           flag_help="OpenAI-compatible endpoint, e.g. a local server http://localhost:11434/v1 "
                     "(default: AgentMagics.base_url, else $OPENAI_BASE_URL, else the OpenAI "
                     "API)."),
    Option("api", str, "chat", "The model API: chat (Chat Completions) or responses (the "
           "Responses API, for reasoning models).", "endpoint",
           choices=tuple(MODEL_APIS), flag="--api", saved=True,
           flag_help="The model API for this session (default: AgentMagics.api; "
                     "%agent_resume: what the session last used)."),
    Option("api_key_env", str, DEFAULT_API_KEY_ENV, "Name of the environment variable "
           "holding the API key (the key itself is never a setting).", "endpoint",
           check=check_api_key_env),
    Option("memory_dir", str, "", "Where sessions and notes live; empty: "
           "$JUPYTER_AGENT_MEMORY_DIR, else <project root>/.jupyter_agent.", "front end"),
    Option("max_notes_kib", int, 64, "Notes (project.md, user.md) larger than this many KiB "
           "are left out of a new session's system prompt (up to 4096).", "front end",
           check=_at_least(1, 4096)),
    Option("store_url", str, "", "A PostgreSQL database shared by a team "
           "(postgresql://user@host/dbname); empty: $JUPYTER_AGENT_STORE_URL, else the JSON "
           "files of the memory directory.", "front end", check=check_store_url),
    Option("max_cost_usd", float, None, "Per-session spend limit in USD; None: no limit.",
           "limit", check=_at_least(0), none="no limit", flag="--max-cost", metavar="USD",
           flag_help="Stop when the session has cost this much, in USD."),
    Option("max_tool_calls", int, None, "Per-session tool-call limit; None: no limit.",
           "limit", check=_at_least(0), none="no limit", flag="--max-tool-calls",
           metavar="N", flag_help="Stop when the session has made N tool calls."),
    Option("max_iterations", int, None, "Model calls per prompt; None: no limit.", "limit",
           check=_at_least(1), none="no limit", flag="--max-iterations", metavar="N",
           flag_help="At most N model calls per prompt."),
    Option("approve", str, "ask", "Running code: auto, ask or deny.", "agent",
           choices=APPROVALS, flag="--approve",
           flag_help="Running code: auto (run), ask (confirm each), deny (never)."),
    Option("context_window", int, None, "The model's context window in tokens (compaction "
           "starts at 80%); None: what the endpoint reports (llama.cpp, vLLM, Ollama, LM "
           "Studio), else the model's known window, else 8192 for a server other than the "
           "OpenAI API.", "agent", check=_at_least(1), none="what the endpoint reports",
           flag="--context-window", metavar="N",
           flag_help="The model's context window in tokens for this session (default: "
                     "AgentMagics.context_window, else what the endpoint reports)."),
    Option("stream", bool, True, "Stream replies as they are generated.", "agent"),
    Option("vision", str, "auto", "Send the figures the agent's code makes to the model as "
           "images: auto (send them; where the endpoint refuses images, go on without them "
           "for the session), on, or off.", "agent", choices=VISION_MODES, flag="--vision",
           saved=True,
           flag_help="Figures as images for the model: auto, on or off (default: "
                     "AgentMagics.vision; %agent_resume: what the session last used)."),
    Option("max_images", int, 3, "Images sent with one model request at most (the newest "
           "figures of the working context); 0: none.", "agent", check=_at_least(0)),
    Option("context_privacy", str, "schema", "What of the kernel's data may go to the model: "
           "schema (names, types, shapes, dtypes, columns, row counts, cell code, "
           "tracebacks), preview (also a few rows and short reprs) or none (only what you "
           "type); values beyond it need your approval like code.", "agent",
           choices=("schema", "preview", "none")),
    Option("notebook_context_tokens", int, 300, "Tokens at most of the 'notebook so far' "
           "section sent with a prompt: the cells run since the last prompt and their "
           "results in one line each, the variables they changed (within context_privacy; "
           "sent with that turn only, never saved); 0: none.", "front end",
           check=_at_least(0, 8000)),
    Option("temperature", float, None, "Sampling temperature sent with every request, 0-2 "
           "(lower: more focused and repeatable); None: the model's default.", "request",
           check=_at_least(0, 2), none="the model's default", flag="--temperature",
           metavar="T"),
)
"""The settings, in the order ``%config AgentMagics`` and the magics' help list them."""

_BY_NAME = {o.name: o for o in OPTIONS}


def option(name: str) -> Option:
    """The row of :data:`OPTIONS` called ``name`` (``KeyError`` if there is none)."""
    return _BY_NAME[name]
