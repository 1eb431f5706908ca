"""The context window: learned from the setting, the server or a refusal, not assumed.

The window compaction works against comes, in order, from

1. the ``context_window`` setting (``--context-window``);
2. what the endpoint refused with (a 400 that names the window), or what it reports:
   asked once per endpoint and model with a short timeout -- llama.cpp
   (``GET /v1/models`` ``data[].meta.n_ctx``, ``GET /props``
   ``default_generation_settings.n_ctx``), vLLM (``GET /v1/models``
   ``data[].max_model_len``), LM Studio (``GET /api/v0/models`` ``max_context_length``),
   Ollama (``POST /api/show``: the ``num_ctx`` parameter, else its default
   :data:`OLLAMA_DEFAULT_CTX` bounded by ``model_info["<arch>.context_length"]``);
   the answer is kept in the session's checkpoint, where it counts only for the same
   model at the same configured endpoint;
3. ``genai-prices`` (and a small table of model families);
4. :data:`LOCAL_DEFAULT_WINDOW` for any endpoint other than the OpenAI API, else
   :data:`~jupyter_agent.agent.usage.DEFAULT_CONTEXT_WINDOW`.

A probe never raises: a server that does not answer, answers an error or answers
something else falls through to the next source. What a server reports is data: only
an integer in a plausible range is taken from it, and a reply is read to at most
:data:`PROBE_MAX_BYTES` within twice :data:`PROBE_TIMEOUT`.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import sys
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

__all__ = [
    "LOCAL_DEFAULT_WINDOW",
    "OLLAMA_DEFAULT_CTX",
    "SMALL_WINDOW",
    "SOURCES",
    "ContextWindow",
    "plausible",
    "probe_window",
    "refused_window",
    "reply_budget",
    "resolve_window",
    "window_key",
]

LOCAL_DEFAULT_WINDOW = 8_192
"""Window (tokens) assumed for an unknown model at an endpoint other than the OpenAI API."""
OLLAMA_DEFAULT_CTX = 4_096
"""The window Ollama gives a model whose ``num_ctx`` is not set (its OpenAI endpoint
silently drops the start of a longer prompt)."""
SMALL_WINDOW = 8_192
"""Below this window (tokens) requests carry the short system prompt, tool descriptions
and notes."""
PROBE_TIMEOUT = 2.0
"""Seconds a window probe may take per request."""
PROBE_MAX_BYTES = 1_000_000
"""At most this much of a probe's answer is read."""
_MIN_WINDOW, _MAX_WINDOW = 256, 100_000_000

SOURCES = {
    "setting": "set by context_window",
    "server": "reported by the server",
    "refusal": "learned from the server's refusal",
    "genai-prices": "known for the model from genai-prices",
    "default": "assumed: the model is unknown",
}
"""Where a window came from -> how ``%agent_usage`` says it."""

OPENAI_HOST = "api.openai.com"


@dataclass(frozen=True)
class ContextWindow:
    """A context window and where it came from.

    Attributes
    ----------
    tokens : int
    source : str
        A key of :data:`SOURCES`.
    """

    tokens: int
    source: str

    def describe(self) -> str:
        """E.g. ``"4,096 tokens, reported by the server"``."""
        return f"{self.tokens:,} tokens, {self.origin}"

    @property
    def origin(self) -> str:
        """Where the window came from, in words (e.g. ``"reported by the server"``)."""
        return SOURCES.get(self.source, self.source)

    @property
    def small(self) -> bool:
        """Whether requests should be kept short (under :data:`SMALL_WINDOW`)."""
        return self.tokens < SMALL_WINDOW


def plausible(value: Any) -> int | None:
    """``value`` as a window in tokens if it is an integer in a plausible range, else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if _MIN_WINDOW <= value <= _MAX_WINDOW else None


def window_key(model: str, base_url: str) -> str:
    """What a learned window belongs to: ``"model at URL"``."""
    return f"{model} at {base_url.rstrip('/')}"


def reply_budget(window: int) -> int:
    """Tokens kept free for the reply in a window of ``window`` tokens (1/8, 256-4096)."""
    return min(max(window // 8, 256), 4_096)


# --------------------------------------------------------------------------- refusals
_WINDOW_PATTERNS = (
    re.compile(r"maximum context length is (\d+)", re.I),  # OpenAI, vLLM
    re.compile(r"available context size \((\d+) tokens?\)", re.I),  # llama.cpp
    re.compile(r"context (?:length|size|window)[^0-9.]{0,40}?(\d{3,})", re.I),
)
_REFUSAL_WORDS = re.compile(
    r"context[ _](?:length|size|window)|exceed_context_size|context_length_exceeded|"
    r"too many tokens|prompt is too long", re.I)


def refused_window(status: int, detail: str, code: str = "", kind: str = "",
                   n_ctx: Any = None) -> int | None:
    """Whether an error answer refuses a request as too long for the context window.

    Parameters
    ----------
    status : int
        The HTTP status (only 400 and 413 are refusals for size).
    detail, code, kind : str
        The error's message, code and type.
    n_ctx : object
        The ``n_ctx`` field of a llama.cpp error body.

    Returns
    -------
    int or None
        None: not a refusal for size; 0: one that does not say the window; else the window.
    """
    if status not in (400, 413):
        return None
    text = f"{detail} {code} {kind}"
    if not _REFUSAL_WORDS.search(text):
        return None
    found = plausible(n_ctx)
    if found is not None:
        return found
    for pattern in _WINDOW_PATTERNS:
        match = pattern.search(detail)
        if match and plausible(int(match.group(1))) is not None:
            return int(match.group(1))
    return 0


# --------------------------------------------------------------------------- probes
def _root(base_url: str) -> str:
    """The server root of an OpenAI-compatible base URL (``.../v1`` removed)."""
    url = base_url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def _entry_window(entry: Any) -> int | None:
    if not isinstance(entry, dict):
        return None
    meta = entry.get("meta")
    for value in ((meta or {}).get("n_ctx") if isinstance(meta, dict) else None,
                  entry.get("max_model_len"), entry.get("max_context_length"),
                  entry.get("loaded_context_length"), entry.get("context_length")):
        found = plausible(value)
        if found is not None:
            return found
    return None


def _listed(data: Any, model: str) -> int | None:
    """The window of ``model`` in a model list (the only model when there is one)."""
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    named = [e for e in entries if isinstance(e, dict) and e.get("id") == model]
    if not named and len(entries) == 1:
        named = entries  # llama.cpp lists its one model under the file name
    for entry in named:
        found = _entry_window(entry)
        if found is not None:
            return found
    return None


def _props(data: Any, model: str) -> int | None:
    settings = data.get("default_generation_settings") if isinstance(data, dict) else None
    return plausible(settings.get("n_ctx")) if isinstance(settings, dict) else None


def _ollama(data: Any, model: str) -> int | None:
    if not isinstance(data, dict):
        return None
    parameters = data.get("parameters")
    if isinstance(parameters, str):
        match = re.search(r"^\s*num_ctx\s+(\d+)\s*$", parameters, re.M)
        if match and plausible(int(match.group(1))):
            return int(match.group(1))
    info = data.get("model_info")
    if not isinstance(info, dict):
        return None
    trained = [plausible(v) for k, v in info.items()
               if isinstance(k, str) and k.endswith(".context_length")]
    known = [t for t in trained if t]
    return min([OLLAMA_DEFAULT_CTX, *known]) if known else None


class _Unreachable(Exception):
    """The server did not answer at all: no further probe is worth its timeout."""


def _http_library(http: Any) -> Any:
    """The module (``httpx`` or ``httpx2``, as ``openai`` uses) of an HTTP client."""
    for cls in type(http).__mro__:
        root = cls.__module__.split(".")[0]
        if root in _HTTP_LIBRARIES:
            return sys.modules[root]
    return None


_HTTP_LIBRARIES = ("httpx2", "httpx")


def _ask(http: Any, lib: Any, method: str, url: str, headers: dict[str, str],
         body: Any, timeout: float) -> Any:
    """The JSON an endpoint answers, or None; raises :class:`_Unreachable` when no
    answer came."""
    deadline = time.monotonic() + 2 * timeout  # a server dripping bytes is cut off
    try:
        with http.stream(method, url, headers=headers, json=body, timeout=timeout,
                         follow_redirects=False) as response:
            if response.status_code != 200:
                return None
            raw = b""
            for chunk in response.iter_bytes():
                raw += chunk
                if len(raw) > PROBE_MAX_BYTES or time.monotonic() > deadline:
                    return None
    except (lib.ConnectError, lib.TimeoutException) as exc:
        raise _Unreachable from exc
    except lib.HTTPError:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def probe_window(base_url: str, model: str, *, api_key: str = "",
                 timeout: float = PROBE_TIMEOUT, http: Any = None) -> int | None:
    """Ask an OpenAI-compatible server for ``model``'s context window.

    Parameters
    ----------
    base_url : str
        The configured endpoint (``http://host:port/v1``); nothing else is asked.
    model : str
    api_key : str
        Sent as ``Authorization: Bearer`` when not empty (as the model requests are).
    timeout : float
        Seconds per request; a server that does not answer at all ends the probe.
    http : httpx.Client, optional
        The HTTP client to ask with (the ``openai`` client's, so that its proxy and TLS
        settings hold); default: a new one of the library ``openai`` uses.

    Returns
    -------
    int or None
        The window in tokens, or None when no probe found it (never raises for the
        server's sake).
    """
    if not base_url or urlparse(base_url).hostname == OPENAI_HOST:
        return None
    own = http is None
    if own:
        for name in _HTTP_LIBRARIES:
            with contextlib.suppress(ImportError):
                http = importlib.import_module(name).Client()
                break
    lib = _http_library(http)
    if lib is None:
        return None
    root = _root(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    probes: tuple[tuple[str, str, Any, Any], ...] = (
        ("GET", base_url.rstrip("/") + "/models", None, _listed),
        ("GET", root + "/props", None, _props),
        ("GET", root + "/api/v0/models", None, _listed),
        ("POST", root + "/api/show", {"model": model}, _ollama),
    )
    try:
        for method, url, body, read in probes:
            found = read(_ask(http, lib, method, url, headers, body, timeout), model)
            if found is not None:
                return int(found)
    except _Unreachable:
        return None
    except Exception:  # a probe is best effort: whatever happened, fall through
        return None
    finally:
        if own:
            http.close()
    return None


def resolve_window(model: Any, configured: int | None, *, learned: ContextWindow | None = None,
                   probe: bool = True) -> ContextWindow:
    """The window for ``model`` (see the module docstring for the order).

    Parameters
    ----------
    model : Model
        Its ``name`` and ``base_url``; its ``client.api_key`` (if any) goes with a probe.
    configured : int or None
        The ``context_window`` setting.
    learned : ContextWindow, optional
        What this endpoint reported or refused with before (this session).
    probe : bool
        Ask the endpoint when nothing was learned.
    """
    from jupyter_agent.agent.usage import known_context_window

    if configured:
        return ContextWindow(int(configured), "setting")
    if learned is not None:
        return learned
    base_url = str(getattr(model, "base_url", "") or "")
    if probe and base_url:
        client = getattr(model, "client", None)
        key = str(getattr(client, "api_key", "") or "")
        from jupyter_agent.client import PLACEHOLDER_API_KEY

        found = probe_window(base_url, model.name,
                             api_key="" if key == PLACEHOLDER_API_KEY else key,
                             http=getattr(client, "_client", None))  # openai's own
        if found is not None:
            return ContextWindow(found, "server")
    known = known_context_window(model.name)
    if known is not None:
        return ContextWindow(known, "genai-prices")
    from jupyter_agent.agent.usage import DEFAULT_CONTEXT_WINDOW

    openai = not base_url or urlparse(base_url).hostname == OPENAI_HOST
    return ContextWindow(DEFAULT_CONTEXT_WINDOW if openai else LOCAL_DEFAULT_WINDOW, "default")
