"""The model endpoint over HTTP: streamed events, failures as ModelErrors, the context window.

Streams are read line by line to their end (so the connection is reused), each event
becoming a dict with one ``json.loads``. Every error message says what went wrong,
where, and what to do next, never a Python class name; it claims retries only when the
client made them (``x-stainless-retry-count``), and "send the prompt again" loses
nothing: the prompt is saved before the call.

The context window, in order: the ``context_window`` setting; what the endpoint refused
with (a 400 naming the window) or reports when asked once (llama.cpp ``/v1/models`` and
``/props``, vLLM, LM Studio ``/api/v0/models``, Ollama ``/api/show``), kept in the
checkpoint for the same model and endpoint; ``genai-prices``; else a default (smaller off
the OpenAI API). A probe never raises; only a plausible integer is taken from an answer,
read to at most :data:`PROBE_MAX_BYTES` within twice :data:`PROBE_TIMEOUT` seconds.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import openai
from openai import DefaultHttpxClient

from jupyter_agent.agent.config import model_refs
from jupyter_agent.errors import ModelError
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
    if status not in (400, 413) or not _REFUSAL_WORDS.search(f"{detail} {code} {kind}"):
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
        raw = b""  # not JSON: no answer
        for chunk in response.iter_bytes() if response.status_code == 200 else ():
            raw += chunk
            if len(raw) > PROBE_MAX_BYTES or time.monotonic() > deadline:
                return None
    with contextlib.suppress(ValueError):
        return json.loads(raw)
    return None


def probe_window(base_url: str, model: str, *, api_key: str = "",
                 http: Any = None) -> int | None:
    """Ask an OpenAI-compatible server for ``model``'s window in tokens (None: not found);
    ``http`` defaults to the ``openai`` client's kind. The first request that fails ends it."""
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
                   learned: ContextWindow | None = None) -> ContextWindow:
    """The window for ``model`` (a Model; its client's key goes with a probe): ``setting``,
    unless a refusal taught a smaller one; else ``learned``, or the one saved in the
    checkpoint ``state`` for this model at this URL, else in the order of the module
    docstring. What a server says or refuses with is kept in ``state``."""
    base_url = str(model.base_url or "")
    key = f"{model.name} at {base_url.rstrip('/')}"
    saved = plausible(state.context_window) if state.context_window_of == key else None
    found = learned or (None if saved is None else ContextWindow(
        saved, "refusal" if state.context_window_source == "refusal" else "server"))
    if found is None and not setting:
        client = getattr(model, "client", None)
        sent = getattr(getattr(model, "endpoint", None), "key_sent", True)  # not a placeholder
        told = probe_window(base_url, model.name,  # none without a base URL
                            api_key=str(getattr(client, "api_key", "") or "") if sent else "",
                            http=getattr(client, "_client", None))  # openai's own
        known = known_context_window(model.name) if told is None else None
        openai_api = not base_url or urlparse(base_url).hostname == OPENAI_HOST
        found = (ContextWindow(told, "server") if told is not None else
                 ContextWindow(known, "genai-prices") if known is not None else
                 ContextWindow(DEFAULT_CONTEXT_WINDOW if openai_api else LOCAL_DEFAULT_WINDOW,
                               "default"))
    if found is not None and found.source in ("server", "refusal"):
        state.context_window, state.context_window_of = found.tokens, key
        state.context_window_source = found.source
    if setting and (found is None or found.source != "refusal" or found.tokens >= setting):
        return ContextWindow(int(setting), "setting")
    assert found is not None
    return found


def events(lines: Iterable[str], url: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The ``(event name or "", data)`` of a stream's lines, read to the end (past any
    ``[DONE]``, so the connection can be reused); ``ModelError`` for data that is not a
    JSON object or reports an error mid-stream."""
    name, data = "", list[str]()
    for line in itertools.chain(lines, [""]):  # "" ends the last event
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value.removeprefix(" "))
        elif field == "event":
            name = value.removeprefix(" ")
        if line:  # a field, or a comment (":...")
            continue
        text, event, received, name, data = "\n".join(data), name, bool(data), "", []
        if not received or text == "[DONE]":
            continue
        parsed = json_object(text, url, "streamed reply")
        error = parsed.get("error") if event != "error" else parsed
        if error:
            detail = error.get("message") if isinstance(error, dict) else str(error)
            raise ModelError(f"the model endpoint at {url} reported an error while the reply "
                             f"was streaming ({detail or 'no details'}): send the prompt again")
        yield event, parsed


def json_object(text: str, url: str, what: str) -> dict[str, Any]:
    """The JSON object ``text`` holds; ModelError naming ``what`` the endpoint sent if none."""
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ModelError(f"the model endpoint at {url} sent a {what} that is not understood "
                         f"({text[:200]!r}): check that --base-url points at an "
                         "OpenAI-compatible endpoint, then send the prompt again")
    return parsed


@dataclass(frozen=True)
class Endpoint:
    """Where a model's requests go, as far as its error messages need to know."""

    url: str
    model: str
    key_env: str = "OPENAI_API_KEY"
    key_sent: bool = True
    api: str = "chat"


def status_error(status: int, detail: str, endpoint: Endpoint, code: str = "", *,
                 retries: int = 0, final: bool = False,
                 window: int | None = None) -> ModelError:
    """The :class:`ModelError` for an HTTP error answer (see the module docstring)."""
    url, model, var = endpoint.url, endpoint.model, endpoint.key_env
    at, said = (f" at {url}" if url else ""), f"({status}: {detail})"
    after = f", after {retries} {'retry' if retries == 1 else 'retries'}" if retries > 0 else ""
    retried = f"({status}{after}: {detail})"
    if status == 401 and not endpoint.key_sent:
        here = urlparse(url).hostname in ("localhost", "127.0.0.1", "::1")
        local = (' (a server on this machine is only sent a key from a variable you name: '
                 '%config AgentMagics.api_key_env = "NAME")'
                 if here and var == "OPENAI_API_KEY" else "")
        text = (f"the model endpoint{at} requires an API key and none was sent {said}: "
                f"set {var} in the environment Jupyter starts from{local}")
    elif status == 401:
        text = (f"the model endpoint{at} rejected the API key from {var} {said}: set {var} "
                "to a valid key in the environment Jupyter starts from, then send the prompt "
                "again")
    elif status == 403:
        text = (f"the API key from {var} may not use model {model}{at} {said}: check the "
                "model name (--model) and the key's permissions")
    elif status == 404:
        versioned = any(part[:1] == "v" and part[1:2].isdigit()
                        for part in urlparse(url).path.split("/"))
        other = ", or the model API (--api)" if endpoint.api != "chat" else ""
        text = (f"model {model} or its endpoint was not found{at} {said}: " + (
            f"the base URL probably needs /v1 at its end (--base-url {url.rstrip('/')}/v1)"
            if url and not versioned else
            f"check the model name (--model) and the base URL (--base-url){other}"))
    elif status == 429:
        text = (f"the model endpoint{at} is rate limiting or the quota is used up {retried}: "
                "wait a minute and send the prompt again, or check your plan and billing quota")
    elif status >= 500 and final:
        text = (f"the model endpoint{at} failed and says a retry cannot help {said}: your "
                "prompt is saved; fix what the endpoint reports, then send the prompt again")
    elif status >= 500:
        text = f"the model endpoint{at} failed {retried}: try again in a moment"
    elif window is not None or code == "context_length_exceeded":
        size = f"the {window:,}-token context window" if window else "the context window"
        text = (f"the conversation is too long for {size} of model {model}{at} {said}: your "
                "prompt is saved; run %agent_compact and send it again, or raise the window: "
                "start the server with a larger one (llama.cpp -c N, Ollama num_ctx) or set "
                "--context-window N so that compaction starts in time")
        window = window or 0
    else:
        text = (f"the model endpoint{at} refused the request {said}: your prompt is saved; "
                "check the model name and this session's options, then send a prompt again")
    return ModelError(text, status_code=status, code=code, detail=detail,
                      context_window=window)


def model_error(exc: BaseException, endpoint: Endpoint, *, received: bool = False) -> ModelError:
    """Map a failed request (after the client's retries) to a :class:`ModelError`."""
    if isinstance(exc, openai.APIStatusError):
        body: Any = exc.body
        if not isinstance(body, dict):
            try:
                body = json.loads(exc.response.text)
            except Exception:  # best effort: the body may be unread, absent or not JSON
                body = {}
        inner = body.get("error", body) if isinstance(body, dict) else body
        if not isinstance(inner, dict):
            inner = {"message": inner} if isinstance(inner, str) else {}
        detail, code = str(inner.get("message") or exc.message), str(inner.get("code") or "")
        window = refused_window(exc.status_code, detail, code, str(inner.get("type") or ""),
                                inner.get("n_ctx"))
        try:  # the retries the client made; none for a response built without a request
            retries = int(exc.response.request.headers.get("x-stainless-retry-count", "0"))
        except (RuntimeError, ValueError):
            retries = 0
        final = exc.response.headers.get("x-should-retry", "").lower() == "false"
        return status_error(exc.status_code, detail, endpoint, code, retries=retries,
                            final=final, window=window)
    cause = str(exc.__cause__ or "") if isinstance(exc, openai.APIConnectionError) else str(exc)
    why = f" ({cause})" if cause and cause != "Connection error." else ""
    url = endpoint.url
    if received:  # the HTTP library's words ("incomplete chunked read") help nobody
        return ModelError(f"the connection to the model endpoint at {url} dropped mid-reply "
                          "(the server closed it before the reply was complete): send the "
                          "prompt again (any text that arrived is kept, marked as cut off)",
                          status_code=None, mid_reply=True)
    if isinstance(exc, openai.APITimeoutError):
        text = (f"the model endpoint at {url} did not answer in time: check that the server "
                "is running and not overloaded, then send the prompt again")
    elif isinstance(exc, openai.APIConnectionError) or not isinstance(exc, openai.OpenAIError):
        if OPENAI_HOST in url:
            text = (f"cannot reach the OpenAI API at {url}{why}: check your network "
                    "connection (and proxy), then send the prompt again")
        else:
            text = (f"cannot reach the model endpoint at {url}{why}: check that the server "
                    "is running and that the URL and port are right (--base-url or %config "
                    "AgentMagics.base_url), then send the prompt again")
    else:
        text = f"the model call failed{why}: send the prompt again"
    return ModelError(text, status_code=None)
