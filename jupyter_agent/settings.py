"""Every setting, declared once: each field of :class:`Settings` carries its :class:`Option`,
from which the ``AgentMagics`` traits, the flags of ``%agent_new`` / ``%agent_resume``, the
agent's config and limits and the fields of every model request are generated. The API key
is never a setting, only the name of its variable.

The client factory: the endpoint is always what this kernel's user configured, never a
value read from a session or team-store row; the key is read from ``api_key_env`` when a
client is built and handed to it only; a loopback endpoint never gets the default
``OPENAI_API_KEY``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, get_type_hints
from urllib.parse import urlparse, urlsplit

from jupyter_agent.errors import ModelNotConfiguredError
from jupyter_agent.text import shorten

if TYPE_CHECKING:
    import openai

    from jupyter_agent.agent.adapters import Model
    from jupyter_agent.agent.config import AgentConfig, Limits

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"

#: Who reads a setting: the client factory, the agent's limits, the agent's config, every
#: model request (sent when not None), or the front end.
Use = Literal["endpoint", "limit", "agent", "request", "front end"]


def check_store_url(label: str, value: str) -> str:
    """``ValueError`` unless empty or a PostgreSQL URL (redacted in the message)."""
    # imported here: the postgres package is loaded only when a store URL is set
    from jupyter_agent.store.postgres.url import check_store_url as check

    return check(value)


def rule(valid: Callable[[str], object], problem: str) -> Callable[[str, str], str]:
    """A check raising ``ValueError`` (the label, then ``problem`` formatted with ``value``)
    unless ``valid(value)``."""

    def check(label: str, value: str) -> str:
        if not valid(value):
            raise ValueError(f"{label} {problem.format(value=value)}")
        return value

    return check


@dataclass(frozen=True)
class Option:
    """One setting. A number is finite and in ``[minimum, maximum]`` when ``minimum`` is set;
    ``none`` says what ``None`` means (``None``: it cannot be None); ``flag`` overrides it
    for one session; ``saved``: a resume without that flag uses the checkpoint's value.
    """

    help: str
    use: Use
    check: Callable[[str, Any], Any] | None = None
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    none: str | None = None
    saved: bool = False
    name: str = ""
    type: type = str
    default: Any = None
    flag: str | None = None
    metavar: str | None = None
    flag_help: str | None = None

    def validate(self, value: Any, *, as_flag: bool = False) -> Any:
        """``value``, else ``ValueError``; ``as_flag``: the message names the flag and does
        not suggest ``None``."""
        label = self.flag if as_flag and self.flag else self.name
        hint = f", or None for {self.none}" if self.none and not as_flag else ""
        if value is None:
            if self.none is None:
                raise ValueError(f"{label} must not be None")
            return value
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{label} must be one of {', '.join(self.choices)} (got {value!r})")
        if self.minimum is not None:
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{label} must be a finite number{hint} (got {value!r})")
            if value < self.minimum:
                what = "a positive number" if self.minimum > 0 else "zero or more"
                raise ValueError(f"{label} must be {what}{hint} (got {value!r})")
            if self.maximum is not None and value > self.maximum:
                raise ValueError(f"{label} must be at most {self.maximum:g}{hint} (got {value!r})")
        return value if self.check is None else self.check(label, value)


def _setting(default: Any, help: str, use: Use, **row: Any) -> Any:
    return field(default=default, metadata={"option": Option(help, use, **row)})


@dataclass(frozen=True)
class Settings:
    """A snapshot of ``AgentMagics``' traits (``ValueError`` with the message ``%config``
    gives)."""

    model: str = _setting(DEFAULT_MODEL, "Model name sent to the endpoint.", "endpoint",
                          check=rule(str.strip, "must not be empty"), saved=True, flag="--model",
                          flag_help="Model name for this session (default: AgentMagics.model).")
    base_url: str = _setting(
        "", "OpenAI-compatible endpoint (e.g. http://localhost:11434/v1 for Ollama); empty: "
        "$OPENAI_BASE_URL, else the OpenAI API.", "endpoint",
        check=rule(lambda v: not v or (urlparse(v).scheme in ("http", "https")
                                       and urlparse(v).netloc != ""),
                   "must be an http:// or https:// URL such as http://localhost:11434/v1 "
                   "(got {value!r})"),
        flag="--base-url", metavar="URL", flag_help="OpenAI-compatible endpoint, e.g. a local "
        "server http://localhost:11434/v1 (default: AgentMagics.base_url, else "
        "$OPENAI_BASE_URL, else the OpenAI API).")
    api: str = _setting("chat", "The model API: chat (Chat Completions) or responses (the "
                        "Responses API, for reasoning models).", "endpoint",
                        choices=("chat", "responses"), saved=True, flag="--api",
                        flag_help="The model API for this session (default: AgentMagics.api; "
                        "%agent_resume: what the session last used).")
    api_key_env: str = _setting(
        DEFAULT_API_KEY_ENV, "Name of the environment variable holding the API key (the key "
        "itself is never a setting).", "endpoint",
        check=rule(lambda v: v != "" and "=" not in v and "\0" not in v and v.strip() == v,
                   "must name an environment variable, e.g. OPENAI_API_KEY (got {value!r})"))
    memory_dir: str = _setting("", "Where sessions and notes live; empty: "
                               "$JUPYTER_AGENT_MEMORY_DIR, else <project root>/.jupyter_agent.",
                               "front end")
    max_notes_kib: int = _setting(
        64, "Notes (project.md, user.md) larger than this many KiB are left out of a new "
        "session's system prompt (up to 4096).", "front end", minimum=1, maximum=4096)
    store_url: str = _setting(
        "", "A PostgreSQL database shared by a team (postgresql://user@host/dbname); empty: "
        "$JUPYTER_AGENT_STORE_URL, else the JSON files of the memory directory.", "front end",
        check=check_store_url)
    max_cost_usd: float | None = _setting(
        None, "Per-session spend limit in USD; None: no limit.", "limit", minimum=0,
        none="no limit", flag="--max-cost", metavar="USD",
        flag_help="Stop when the session has cost this much, in USD.")
    max_tool_calls: int | None = _setting(
        None, "Per-session tool-call limit; None: no limit.", "limit", minimum=0,
        none="no limit", flag="--max-tool-calls", metavar="N",
        flag_help="Stop when the session has made N tool calls.")
    max_iterations: int | None = _setting(
        None, "Model calls per prompt; None: no limit.", "limit", minimum=1,
        none="no limit", flag="--max-iterations", metavar="N",
        flag_help="At most N model calls per prompt.")
    approve: str = _setting("ask", "Running code: auto, ask or deny.", "agent",
                            choices=("auto", "ask", "deny"), flag="--approve",
                            flag_help="Running code: auto (run), ask (confirm each), deny "
                            "(never).")
    context_window: int | None = _setting(
        None, "The model's context window in tokens (compaction starts at 80%); None: what "
        "the endpoint reports (llama.cpp, vLLM, Ollama, LM Studio), else the model's known "
        "window, else 8192 for a server other than the OpenAI API.", "agent",
        minimum=1, none="what the endpoint reports", flag="--context-window",
        metavar="N", flag_help="The model's context window in tokens for this session "
        "(default: AgentMagics.context_window, else what the endpoint reports).")
    stream: bool = _setting(True, "Stream replies as they are generated.", "agent")
    vision: str = _setting(
        "auto", "Send the figures the agent's code makes to the model as images: auto (send "
        "them; where the endpoint refuses images, go on without them for the session), on, "
        "or off.", "agent", choices=("auto", "on", "off"), saved=True, flag="--vision",
        flag_help="Figures as images for the model: auto, on or off (default: "
        "AgentMagics.vision; %agent_resume: what the session last used).")
    max_images: int = _setting(3, "Images sent with one model request at most (the newest "
                               "figures of the working context); 0: none.", "agent", minimum=0)
    context_privacy: str = _setting(
        "schema", "What of the kernel's data may go to the model: schema (names, types, "
        "shapes, dtypes, columns, row counts, cell code, tracebacks), preview (also a few "
        "rows and short reprs) or none (only what you type); values beyond it need your "
        "approval like code.", "agent", choices=("schema", "preview", "none"))
    notebook_context_tokens: int = _setting(
        300, "Tokens at most of the 'notebook so far' section sent with a prompt: the cells "
        "run since the last prompt and their results in one line each, the variables they "
        "changed (within context_privacy; sent with that turn only, never saved); 0: none.",
        "front end", minimum=0, maximum=8000)
    temperature: float | None = _setting(
        None, "Sampling temperature sent with every request, 0-2 (lower: more focused and "
        "repeatable); None: the model's default.", "request", minimum=0, maximum=2,
        none="the model's default", flag="--temperature", metavar="T")

    def __post_init__(self) -> None:
        for row in OPTIONS:
            value = getattr(self, row.name)
            if value is not row.default:
                row.validate(value)

    def with_options(self, options: SessionOptions) -> Settings:
        given = {k: getattr(options, k) for k in options.given() if k != "title"}
        return replace(self, **given) if given else self

    def of(self, use: Use) -> dict[str, Any]:
        return {o.name: getattr(self, o.name) for o in OPTIONS if o.use == use}

    def limits(self) -> Limits:
        # imported here: the agent package loads the openai client
        from jupyter_agent.agent.config import Limits

        return Limits(**self.of("limit"))

    def agent_config(self, **extra: Any) -> AgentConfig:
        from jupyter_agent.agent.config import AgentConfig

        return AgentConfig(limits=self.limits(), **self.of("agent"), **extra)

    def request_params(self) -> dict[str, Any]:
        return {k: v for k, v in self.of("request").items() if v is not None}


@dataclass(frozen=True)
class SessionOptions:
    """The options of ``%agent_new`` / ``%agent_resume`` (``None``: not given), each
    overriding the setting of its name for one session; ``ValueError`` naming the flag."""

    title: str | None = None
    model: str | None = None
    base_url: str | None = None
    api: str | None = None
    max_cost_usd: float | None = None
    max_tool_calls: int | None = None
    max_iterations: int | None = None
    approve: str | None = None
    context_window: int | None = None
    vision: str | None = None
    temperature: float | None = None

    def __post_init__(self) -> None:
        for name in self.given() - {"title"}:
            option(name).validate(getattr(self, name), as_flag=True)

    def over(self, base: SessionOptions) -> SessionOptions:
        return replace(base, **{k: getattr(self, k) for k in self.given()})

    def given(self) -> frozenset[str]:
        return frozenset(f.name for f in fields(self) if getattr(self, f.name) is not None)


_HINTS = get_type_hints(Settings)
#: The settings, in the order ``%config AgentMagics`` and the magics' help list them.
OPTIONS: tuple[Option, ...] = tuple(
    replace(f.metadata["option"], name=f.name, default=f.default,
            type=next(t for t in (bool, int, float, str)
                      if t == _HINTS[f.name] or t in getattr(_HINTS[f.name], "__args__", ())))
    for f in fields(Settings))
_BY_NAME = {o.name: o for o in OPTIONS}
#: The settings that limit a session or a prompt (the fields of ``agent.Limits``).
LIMITS: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.use == "limit")


def option(name: str) -> Option:
    """``KeyError`` if there is none."""
    return _BY_NAME[name]


#: Sent as the key to a ``base_url`` server when the key variable is unset (local servers
#: ignore it; the ``openai`` client insists on one).
PLACEHOLDER_API_KEY = "not-needed"
#: The OpenAI API's own URL; as a ``base_url`` it means "no base_url".
OPENAI_URL = "https://api.openai.com/v1"


def saved_base_url(url: str) -> str:
    """``""`` for the OpenAI API's own URL."""
    return "" if url.rstrip("/") == OPENAI_URL else url


def configured_base_url(settings: Settings, environ: Mapping[str, str] | None = None) -> str:
    """``""`` for the OpenAI API."""
    env = os.environ if environ is None else environ
    return saved_base_url(settings.base_url or env.get("OPENAI_BASE_URL", ""))


def describe_endpoint(url: str) -> str:
    """An endpoint for a message, whatever a record holds: without credentials (``***@``),
    query or fragment (``?***``), unprintable characters escaped, at most 120 characters."""
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
    return _printable(shown, 120)


def _printable(text: str, limit: int) -> str:
    return shorten("".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit + 1]),
                   limit)


def is_loopback(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint(settings: Settings, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``(base_url, api_key)``, ``""`` where none; ``environ`` is read at call time."""
    env = os.environ if environ is None else environ
    url = configured_base_url(settings, env)
    if url and is_loopback(url) and settings.api_key_env == DEFAULT_API_KEY_ENV:
        return url, ""
    return url, env.get(settings.api_key_env, "")


def endpoint_id(settings: Settings, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``(base_url, sha256 of the key)``: the key itself is never kept."""
    url, key = endpoint(settings, environ)
    return url, hashlib.sha256(key.encode()).hexdigest()


def model_key(settings: Settings, environ: Mapping[str, str] | None = None) -> tuple[Any, ...]:
    return (*settings.of("endpoint").items(), *settings.of("request").items(),
            *endpoint_id(settings, environ))


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
    """The only place an ``openai.OpenAI`` client is built; ``max_retries`` on 429, 5xx and
    connection errors, ``timeout`` in seconds; ``ModelNotConfiguredError`` when neither a
    key nor a ``base_url`` is configured."""
    import openai  # ~0.5 s: only when a model is built

    url, key = endpoint(settings, environ)
    if not key and not url:
        raise ModelNotConfiguredError(not_configured_message(settings))
    return openai.OpenAI(api_key=key or PLACEHOLDER_API_KEY, base_url=url or OPENAI_URL,
                         max_retries=max_retries, timeout=timeout)


def build_model(settings: Settings, environ: Mapping[str, str] | None = None, *,
                client: openai.OpenAI | None = None) -> Model:
    """``client`` (default: a new :func:`build_client`, which may raise
    ``ModelNotConfiguredError``) must be for the same :func:`endpoint_id`."""
    from jupyter_agent.agent.adapters import ChatModel, ResponsesModel  # imports openai

    client = client or build_client(settings, environ)
    cls = ResponsesModel if settings.api == "responses" else ChatModel
    key_env = None if client.api_key == PLACEHOLDER_API_KEY else settings.api_key_env
    return cls(client, settings.model, params=settings.request_params(), key_env=key_env)


def resume_options(settings: Settings, chosen: SessionOptions, state: Any, session_id: str,
                   environ: Mapping[str, str] | None = None) -> tuple[SessionOptions, str]:
    """``chosen`` completed from a session's checkpoint ``state``, and a note when it last
    used another endpoint (else ``""``); ``ModelNotConfiguredError`` when it used one and
    this kernel configures none.

    The checkpoint's values are data: its endpoint is only compared with the configured
    one, its model kept only for that endpoint, its API only if known, its vision mode
    only if this kernel does not turn images off.
    """
    saved_url = saved_base_url(state.base_url).rstrip("/")  # the client adds a "/"
    configured = (saved_base_url(chosen.base_url) if chosen.base_url is not None
                  else configured_base_url(settings, environ)).rstrip("/")
    note, said = "", describe_endpoint
    if state.base_url and saved_url != configured:
        if not configured:
            raise ModelNotConfiguredError(
                f"session {session_id} last used the endpoint {said(saved_url)}, and this "
                "kernel configures none (a session file never chooses where the API key "
                "goes): resume it with --base-url URL naming the endpoint you trust, or "
                "set AgentMagics.base_url or $OPENAI_BASE_URL")
        note = (f"This session last used {said(saved_url)}; it now talks to "
                f"{said(configured)}, the endpoint this kernel configures.")
    values: dict[str, Any] = {"title": None}
    for row in OPTIONS:  # what the checkpoint remembers: model, API, vision
        saved = getattr(state, row.name, None)
        if (not row.saved or getattr(chosen, row.name) is not None or not saved
                or (row.choices is not None and saved not in row.choices)
                or (row.name == "model" and saved_url != configured)  # another endpoint's
                or (row.name == "vision" and settings.vision == "off")):  # images stay off
            continue
        values[row.name] = saved
    return replace(chosen, **values), note
