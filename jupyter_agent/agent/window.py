"""The context window: from the setting, the server or its refusal, else known, else assumed.

In order: the ``context_window`` setting; what the endpoint refused with (a 400 naming
the window) or reports when asked once (llama.cpp ``/v1/models`` and ``/props``, vLLM,
LM Studio ``/api/v0/models``, Ollama ``/api/show``), kept in the checkpoint for the same
model and endpoint; ``genai-prices``; else a default (smaller off the OpenAI API). A
probe never raises; only a plausible integer is taken from an answer, read to at most
:data:`PROBE_MAX_BYTES` within twice :data:`PROBE_TIMEOUT` seconds.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from openai import DefaultHttpxClient

from jupyter_agent.agent.config import model_refs
from jupyter_agent.store import SessionState

DEFAULT_CONTEXT_WINDOW = 128_000
LOCAL_DEFAULT_WINDOW = 8_192
OPENAI_HOST = "api.openai.com"
_MIN_WINDOW, _MAX_WINDOW = 256, 100_000_000
OLLAMA_DEFAULT_CTX = 4_096
SMALL_WINDOW = 8_192
PROBE_TIMEOUT = 2.0  # seconds per request
PROBE_MAX_BYTES = 1_000_000

SOURCES = {"setting": "set by context_window", "server": "reported by the server",
           "refusal": "learned from the server's refusal",
           "genai-prices": "known for the model from genai-prices",
           "default": "assumed: the model is unknown"}


@dataclass(frozen=True)
class ContextWindow:
    """A context window (tokens) and where it came from (``source``, a key of
    :data:`SOURCES`); ``small``: under :data:`SMALL_WINDOW`, requests are kept short;
    ``reserve``: the tokens kept free for the reply (1/8 of the window, 256-4096)."""

    tokens: int
    source: str
    small: bool = field(init=False)
    reserve: int = field(init=False)
    origin: str = field(init=False)  # in words, e.g. "reported by the server"

    def __post_init__(self) -> None:
        object.__setattr__(self, "small", self.tokens < SMALL_WINDOW)
        object.__setattr__(self, "reserve", min(max(self.tokens // 8, 256), 4_096))
        object.__setattr__(self, "origin", SOURCES.get(self.source, self.source))


def plausible(value: Any) -> int | None:
    """``value`` as a window in tokens if it is an integer in a plausible range, else None."""
    plain_int = isinstance(value, int) and not isinstance(value, bool)
    return value if plain_int and _MIN_WINDOW <= value <= _MAX_WINDOW else None


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
    """Whether an error answer refuses a request as too long: None (no), 0 (it does not say
    the window) or the window in tokens."""
    if status not in (400, 413):
        return None
    if not _REFUSAL_WORDS.search(f"{detail} {code} {kind}"):
        return None
    found = plausible(n_ctx)
    if found is not None:
        return found
    for pattern in _WINDOW_PATTERNS:
        match = pattern.search(detail)
        if match and plausible(int(match.group(1))) is not None:
            return int(match.group(1))
    return 0


def known_context_window(model: str) -> int | None:
    """The context window of ``model`` in tokens, if ``genai-prices`` knows it."""
    from genai_prices import data_snapshot  # imported when used: ~120 ms

    snapshot = data_snapshot.get_snapshot()
    for ref, provider in model_refs(model):
        try:
            _, info = snapshot.find_provider_model(ref, None, provider, None)
        except LookupError:
            continue
        return int(info.context_window) if info.context_window else None
    return None


def _listed(data: Any, model: str) -> int | None:
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    named = [e for e in entries if isinstance(e, dict) and e.get("id") == model]
    if not named and len(entries) == 1 and isinstance(entries[0], dict):
        named = entries  # llama.cpp lists its one model under the file name
    for entry in named:
        meta = entry.get("meta")
        for value in (meta.get("n_ctx") if isinstance(meta, dict) else None,
                      entry.get("max_model_len"), entry.get("max_context_length"),
                      entry.get("loaded_context_length"), entry.get("context_length")):
            if plausible(value) is not None:
                return plausible(value)
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
    known = [t for t in (plausible(v) for k, v in info.items()
                         if isinstance(k, str) and k.endswith(".context_length")) if t]
    return min([OLLAMA_DEFAULT_CTX, *known]) if known else None


def _ask(http: Any, method: str, url: str, headers: dict[str, str], body: Any) -> Any:
    deadline = time.monotonic() + 2 * PROBE_TIMEOUT  # a server dripping bytes is cut off
    with http.stream(method, url, headers=headers, json=body, timeout=PROBE_TIMEOUT,
                     follow_redirects=False) as response:
        if response.status_code != 200:
            return None
        raw = b""
        for chunk in response.iter_bytes():
            raw += chunk
            if len(raw) > PROBE_MAX_BYTES or time.monotonic() > deadline:
                return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def probe_window(base_url: str, model: str, *, api_key: str = "",
                 http: Any = None) -> int | None:
    """Ask an OpenAI-compatible server for ``model``'s window in tokens (None: not found).

    ``api_key`` goes as ``Authorization: Bearer`` when not empty; ``http`` is the client
    to ask with (default: the ``openai`` client's kind). The first request that fails
    (no answer, a broken one) ends the probe.
    """
    if not base_url or urlparse(base_url).hostname == OPENAI_HOST:
        return None
    own = http is None
    if own:
        http = DefaultHttpxClient()
    url = base_url.rstrip("/")
    root = url[:-3] if url.endswith("/v1") else url
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    probes: tuple[tuple[str, str, Any, Any], ...] = (
        ("GET", url + "/models", None, _listed),
        ("GET", root + "/props", None, _props),
        ("GET", root + "/api/v0/models", None, _listed),
        ("POST", root + "/api/show", {"model": model}, _ollama),
    )
    try:
        for method, address, body, read in probes:
            found = read(_ask(http, method, address, headers, body), model)
            if found is not None:
                return int(found)
    except Exception:  # best effort (and no answer at all): whatever happened, fall through
        return None
    finally:
        if own:
            http.close()
    return None


def resolve_window(model: Any, state: SessionState, setting: int | None,
                   known: dict[str, ContextWindow],
                   learned: ContextWindow | None = None) -> ContextWindow:
    """The window for ``model`` (a Model; its client's key goes with a probe): ``setting``,
    unless a refusal taught a smaller one; else ``learned``, or the one ``known`` or saved
    in the checkpoint ``state`` for this model at this URL, else in the order of the module
    docstring. What a server says or refuses with is kept in ``known`` and ``state``."""
    base_url = str(model.base_url or "")
    key = f"{model.name} at {base_url.rstrip('/')}"
    found = learned or known.get(key)
    if found is None and not setting:
        saved = plausible(state.context_window) if state.context_window_of == key else None
        found = _looked_up(model, base_url) if saved is None else ContextWindow(
            saved, "refusal" if state.context_window_source == "refusal" else "server")
    if found is not None and found is not known.get(key):
        known[key] = found
        if found.source in ("server", "refusal"):
            state.context_window, state.context_window_of = found.tokens, key
            state.context_window_source = found.source
    if setting and (found is None or found.source != "refusal" or found.tokens >= setting):
        return ContextWindow(int(setting), "setting")
    assert found is not None
    return found


def _looked_up(model: Any, base_url: str) -> ContextWindow:
    if base_url:
        client = getattr(model, "client", None)
        sent = getattr(getattr(model, "endpoint", None), "key_sent", True)  # not a placeholder
        key = str(getattr(client, "api_key", "") or "") if sent else ""
        found = probe_window(base_url, model.name, api_key=key,
                             http=getattr(client, "_client", None))  # openai's own
        if found is not None:
            return ContextWindow(found, "server")
    known = known_context_window(model.name)
    if known is not None:
        return ContextWindow(known, "genai-prices")
    openai = not base_url or urlparse(base_url).hostname == OPENAI_HOST
    return ContextWindow(DEFAULT_CONTEXT_WINDOW if openai else LOCAL_DEFAULT_WINDOW, "default")
