"""The HTTP side of a model request: streamed events, and failures as ModelErrors a user can act on.

Streams are read line by line to their end (so the connection is reused), each event
becoming a dict with one ``json.loads``. Every error message says what went wrong,
where, and what to do next, never a Python class name; it claims retries only when the
client made them (``x-stainless-retry-count``), and "send the prompt again" loses
nothing: the prompt is saved before the call.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import openai

from jupyter_agent.agent.window import OPENAI_HOST, refused_window
from jupyter_agent.errors import ModelError


def events(lines: Iterable[str], url: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The server-sent events of a stream's lines (line endings removed), read to the end
    (past any ``[DONE]``, so the connection can be reused): ``(event name or "", data)``.

    Raises
    ------
    ModelError
        The data is not a JSON object, or is an error reported mid-stream.
    """
    name, data = "", list[str]()
    for line in itertools.chain(lines, [""]):  # "" ends the last event
        if line.startswith(":"):
            continue
        if line:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
            elif field == "event":
                name = value
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
