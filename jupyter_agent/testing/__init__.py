"""Scripted models for tests, demos and notebooks (docs/scripted-model.md): no network, no key.

``ScriptedModelServer`` speaks Chat Completions and Responses over real HTTP on loopback, so
the real ``openai`` client parses real responses; ``ScriptedModel`` answers in process.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any

from jupyter_agent.agent.adapters import ModelReply, PartialReply, TextCallback, TokenUsage
from jupyter_agent.agent.endpoint import Endpoint, refused_window, status_error
from jupyter_agent.testing.handler import Exchange, LocalServer, _HTTPServer
from jupyter_agent.testing.script import Script, load_script
from jupyter_agent.testing.script import ScriptError as ScriptError
from jupyter_agent.testing.wire import Answer, ImagePart, RequestRejected, image_parts, split_text


class ScriptedModelServer(Script):
    """An OpenAI-compatible model server on loopback answering from a script.

    Each accepted ``/chat/completions`` or ``/responses`` request consumes exactly one step,
    even when the client disconnects mid-stream; a rejected one (400, 401) consumes none.
    Every body that parses is recorded on arrival. One lock guards the script and the
    records (callable steps run outside it). The API key is never logged. ``port`` 0 picks
    a free port at :meth:`start`, kept across restarts; ``play``: see
    :class:`~jupyter_agent.testing.handler.LocalServer`.
    """

    def __init__(
        self,
        script: Iterable[Any] | None = None,
        *,
        require_api_key: str | None = None,
        model_ids: Iterable[str] = ("scripted",),
        host: str = "127.0.0.1",
        port: int = 0,
        log_requests: bool = False,
        accept_images: bool = True,
        play: str | None = None,
        context_window: int = 4_096,
        truncate: bool | None = None,
    ) -> None:
        super().__init__(script)
        self._api_key = require_api_key
        self.model_ids: tuple[str, ...] = tuple(model_ids)
        self.host, self.port = host, port
        self.log_requests = log_requests
        self.accept_images = accept_images
        self.local = None if play is None else LocalServer(play, context_window, truncate)
        self._exchanges: list[Exchange] = []
        self._errors: list[str] = []
        self._issued: set[str] = set()  # encrypted reasoning contents handed out
        self._httpd: _HTTPServer | None = None
        self._created = int(time.time())

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> ScriptedModelServer:
        """Not started; ``ScriptError`` as :func:`~jupyter_agent.testing.script.load_script`."""
        return cls(load_script(path), **kwargs)

    def start(self) -> ScriptedModelServer:
        """Serve in a daemon thread (no-op when running); ``OSError`` if the port cannot be
        bound."""
        with self._lock:
            if self._httpd is None:
                self._httpd = _HTTPServer((self.host, self.port), self)
                self.port = self._httpd.server_address[1]
        return self

    def stop(self) -> None:
        """Also closes the open connections; idempotent."""
        with self._lock:
            httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.stop()

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1``; ``RuntimeError`` before the first start."""
        if not self.port:
            raise RuntimeError("ScriptedModelServer is not started; call start() or use `with`")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def requests(self) -> list[Any]:
        """Every parsed body in order, rejected ones included (a copy)."""
        return [x.request for x in self.exchanges]

    @property
    def exchanges(self) -> list[Exchange]:
        """In arrival order (a copy)."""
        with self._lock:
            return list(self._exchanges)

    @property
    def images(self) -> list[list[ImagePart]]:
        """The images each request carried, parallel to :attr:`requests`."""
        return [image_parts(x.request) for x in self.exchanges]

    @property
    def errors(self) -> list[str]:
        """Tracebacks of failed callable steps and of internal errors (never expected)."""
        with self._lock:
            return list(self._errors)

    def clear_requests(self) -> None:
        """The script position is kept."""
        with self._lock:
            self._exchanges.clear()

    def _check_auth(self, header: str | None) -> None:
        key = header[7:].strip() if header and header.startswith("Bearer ") else ""
        if self._api_key is not None and key != self._api_key:
            raise RequestRejected(
                "Incorrect API key provided. You can find your API key at"
                " https://platform.openai.com/account/api-keys." if key else
                "You didn't provide an API key. You need to provide your API key in an"
                " Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                401)

    def _model_object(self, model_id: str) -> dict[str, Any]:
        if model_id not in self.model_ids:
            raise RequestRejected(f"The model '{model_id}' does not exist", 404,
                                  param="model", code="model_not_found")
        entry = {"id": model_id, "object": "model", "created": self._created,
                 "owned_by": "jupyter-agent"}
        return entry if self.local is None else {**entry, **self.local.model_fields()}

    def __repr__(self) -> str:
        where = self.base_url if self.port else "not started"
        return f"<ScriptedModelServer {where} remaining={self.remaining}>"


class ScriptedModel(Script):
    """An in-process model (the agent's ``Model`` protocol) answering from a script.

    Usage is the server's estimate unless a step sets it; an ``error`` step raises the
    ``ModelError`` a real model raises for that status; streamed text arrives in the
    server's pieces, ``chunk_delay`` seconds apart. ``requests`` holds JSON copies of each
    request shaped as a Chat Completions body. ``ScriptError`` for an invalid step, and from
    :meth:`respond` when the script is exhausted or a callable step fails.
    """

    api = name = "scripted"
    base_url = ""

    def __init__(self, script: Iterable[Any] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        super().__init__(script)

    def __repr__(self) -> str:
        return f"<ScriptedModel {self.name!r} remaining={self.remaining}>"

    def respond(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *,
                stream: bool, partial: PartialReply,
                on_text: TextCallback | None = None) -> ModelReply:
        request: dict[str, Any] = {"model": self.name, "messages": list(messages)}
        if tools:
            request["tools"] = list(tools)
        if stream:
            request["stream"] = True
        body: dict[str, Any] = json.loads(json.dumps(request))
        self.requests.append(body)
        step = self._next(body)
        time.sleep(step.delay)
        if step.error is not None:
            e = step.error
            raise status_error(e.status, e.message, Endpoint("", self.name, api=self.api),
                               e.code or "", window=refused_window(e.status, e.message,
                                                                   e.code or "", e.type or ""))
        partial.received = True
        answer = Answer(step, body)
        for piece in split_text(step.text or "") if stream else [step.text or ""]:
            partial.add_text(piece, on_text)
            if stream and step.chunk_delay:
                time.sleep(step.chunk_delay)
        for index, (call_id, name, arguments) in enumerate(answer.calls):
            partial.calls[index] = {"id": call_id, "name": name, "arguments": arguments}
        partial.finish_reason = answer.finish_reason
        partial.usage = TokenUsage(answer.prompt, answer.completion, answer.cached)
        return partial.reply()
