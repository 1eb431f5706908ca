"""The scripted server's HTTP and the local servers (llama.cpp, vLLM, Ollama) it can play.

The accept loop waits on a selector with a wake-up socket (no polling), so stopping is
immediate, and tracks each accepted connection so that stopping closes idle keep-alive
ones. JSON answers carry ``Content-Length``; streams are chunked.
"""

from __future__ import annotations

import contextlib
import json
import selectors
import socket
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from jupyter_agent.testing.script import ScriptError, Step
from jupyter_agent.testing.wire import (
    Answer,
    RequestRejected,
    ResponseAnswer,
    estimate_prompt_tokens,
    image_parts,
    validate_chat_request,
    validate_responses_request,
)

if TYPE_CHECKING:
    from jupyter_agent.testing import ScriptedModelServer


@dataclass
class Exchange:
    """A request to ``/chat/completions`` or ``/responses``, recorded when the body parses.

    ``status`` is None while the answer is pending; ``response`` is the answer object, the
    list of stream chunks or events, or the error body; ``authorization`` is kept in memory
    only; ``dropped``: messages a server playing Ollama dropped to fit its window.
    """

    request: Any
    status: int | None = None
    response: Any = None
    raw: bytes = b""
    path: str = "/v1/chat/completions"
    authorization: str | None = field(default=None, repr=False)
    dropped: int = 0

    @property
    def stream(self) -> bool:
        return isinstance(self.request, dict) and self.request.get("stream") is True


PLAYS = ("llama.cpp", "vllm", "ollama")
TRAINED = 8_192  # tokens: the played model's trained context


@dataclass(frozen=True)
class LocalServer:
    """docs/scripted-model.md, "Playing a local server"; ``context_window`` in tokens;
    ``truncate`` None: as the played server does. ``ValueError`` for an unknown server or a
    window under 1 token."""

    play: str
    context_window: int
    truncate: bool | None = None

    def __post_init__(self) -> None:
        if self.play not in PLAYS:
            raise ValueError(f"play must be one of {', '.join(PLAYS)} (got {self.play!r})")
        if self.context_window < 1:
            raise ValueError(f"context_window must be a positive number of tokens "
                             f"(got {self.context_window!r})")

    def model_fields(self) -> dict[str, Any]:
        if self.play == "llama.cpp":
            return {"owned_by": "llamacpp", "meta": {"n_ctx": self.context_window,
                                                     "n_ctx_train": TRAINED}}
        if self.play == "vllm":
            return {"owned_by": "vllm", "max_model_len": self.context_window}
        return {"owned_by": "library"}

    def answer(self, method: str, path: str, raw: bytes, model_ids: tuple[str, ...]) -> Any:
        """The JSON answering a request outside ``/v1`` with body ``raw``, or None (404)."""
        if self.play == "llama.cpp" and method == "GET" and path == "/props":
            return {"default_generation_settings": {"n_ctx": self.context_window, "params": {}},
                    "total_slots": 1, "model_path": f"/models/{model_ids[0]}.gguf"}
        if self.play == "ollama" and method == "POST" and path == "/api/show":
            name = None
            with contextlib.suppress(ValueError, AttributeError):  # not JSON, not an object
                name = json.loads(raw).get("model")
            if name not in model_ids:
                raise RequestRejected(f"model '{name}' not found", 404)
            return {"parameters": f"num_ctx                        {self.context_window}\n"
                                  "stop                           \"<|im_end|>\"",
                    "model_info": {"general.architecture": "llama",
                                   "llama.context_length": TRAINED},
                    "modified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        return None

    def fit(self, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """The chat request as the played server runs it, and how many messages it dropped;
        ``RequestRejected`` (400 in that server's shape) when it does not fit and is refused."""
        tokens, window = estimate_prompt_tokens(body), self.context_window
        if tokens <= window:
            return body, 0
        if not (self.play == "ollama" if self.truncate is None else self.truncate):
            refusal: dict[str, dict[str, Any]] = {  # worded as the played server words it
                "llama.cpp": {"error": {
                    "code": 400, "type": "exceed_context_size_error",
                    "message": f"request ({tokens} tokens) exceeds the available context size "
                               f"({window} tokens), try increasing it",
                    "n_prompt_tokens": tokens, "n_ctx": window}},
                "vllm": {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                         "message": f"This model's maximum context length is {window} tokens. "
                                    f"However, you requested {tokens} tokens in the messages, "
                                    "Please reduce the length of the messages."},
            }
            raise RequestRejected(  # Ollama words it in the OpenAI shape
                f"the prompt ({tokens} tokens) is longer than the context length ({window})",
                body=refusal.get(self.play))
        messages = list(body.get("messages") or [])
        head = [m for m in messages[:1] if isinstance(m, dict) and m.get("role") == "system"]
        rest = messages[len(head):]
        while len(rest) > 1 and estimate_prompt_tokens({**body, "messages": head + rest}) > window:
            rest.pop(0)
        return {**body, "messages": head + rest}, len(messages) - len(head) - len(rest)


class _HTTPServer(ThreadingHTTPServer):
    """Serves from a daemon thread from construction until :meth:`stop`."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    timeout = 0  # handle_request() never blocks (the selector already waited)
    owner: ScriptedModelServer

    def __init__(self, address: tuple[str, int], owner: ScriptedModelServer) -> None:
        super().__init__(address, _Handler)
        self._wake_r, self._wake_w = socket.socketpair()
        self.owner = owner
        self._connections: set[socket.socket] = set()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, daemon=True,
                                        name=f"ScriptedModelServer:{self.server_address[1]}")
        self._thread.start()

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.socket, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping:
                ready = selector.select()
                if self._stopping:
                    break
                if any(key.fileobj is self.socket for key, _ in ready):
                    self.handle_request()  # timeout = 0: accept if still pending, never block

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(timeout=10)
        self.server_close()
        self._wake_r.close()
        self._wake_w.close()
        with self.owner._lock:  # after the accept loop ended: no new connections appear
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.owner._lock:  # in the accept thread, so stop() sees it
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.owner._lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:  # no stderr traceback
        if not isinstance(sys.exc_info()[1], OSError):  # not a client gone away, nor stop()
            with self.owner._lock:
                self.owner._errors.append(traceback.format_exc())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    timeout = 300  # seconds an idle keep-alive connection may stay open
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.owner.log_requests:
            sys.stderr.write(f"ScriptedModelServer: {format % args}\n")

    def _head(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in {"x-request-id": "req_" + uuid.uuid4().hex[:24], **headers}.items():
            self.send_header(key, value)
        self.end_headers()

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        self._head(status, {"Content-Type": "application/json",
                            "Content-Length": str(len(data)), **(headers or {})})
        self.wfile.write(data)

    def _send_stream(self, chunks: list[dict[str, Any]], step: Step, *, named: bool) -> None:
        self._head(200, {"Content-Type": "text/event-stream; charset=utf-8",
                         "Cache-Control": "no-cache", "Transfer-Encoding": "chunked"})
        if named:  # Responses: each event names its type; no [DONE] marker
            events = [f"event: {c['type']}\ndata: {json.dumps(c)}\n\n".encode() for c in chunks]
        else:
            events = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
            events.append(b"data: [DONE]\n\n")
        frames = [b"%X\r\n%s\r\n" % (len(event), event) for event in events[:step.drop_after]]
        for frame in frames if step.chunk_delay > 0 else [b"".join(frames)]:
            self.wfile.write(frame)
            time.sleep(step.chunk_delay)
        if step.drop_after is None:
            self.wfile.write(b"0\r\n\r\n")
        else:  # the connection breaks after that many events
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

    def _dispatch(self) -> None:
        """Answer one request; an ``OSError`` (the client went away, or stop() closed the
        connection) ends the connection and is not recorded."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""  # drained: keep-alive in sync
        method, path = self.command, self.path.split("?", 1)[0].rstrip("/")
        owner = self.server.owner
        try:
            if method == "POST" and path in ("/v1/chat/completions", "/v1/responses"):
                self._answer(path, raw)
                return
            owner._check_auth(self.headers.get("Authorization"))
            if method == "GET" and path == "/v1/models":
                models = [owner._model_object(m) for m in owner.model_ids]
                payload: Any = {"object": "list", "data": models}
            elif method == "GET" and path.startswith("/v1/models/"):
                payload = owner._model_object(path[len("/v1/models/"):])
            else:
                payload = owner.local and owner.local.answer(method, path, raw, owner.model_ids)
                if payload is None:
                    raise RequestRejected(f"Invalid URL ({method} {self.path})", 404)
            self._send(200, payload)
        except RequestRejected as err:
            self._send(err.status, err.body, err.headers)
        except OSError:
            raise
        except Exception:
            detail = traceback.format_exc()
            with owner._lock:
                owner._errors.append(detail)
            message = "ScriptedModelServer internal error: " + detail.strip().splitlines()[-1]
            self._send(500, RequestRejected(message, 500).body, {"x-should-retry": "false"})

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _dispatch

    def _answer(self, path: str, raw: bytes) -> None:
        owner = self.server.owner
        exchange: Exchange | None = None
        with contextlib.suppress(ValueError):  # UnicodeDecodeError too
            exchange = Exchange(json.loads(raw), raw=raw, path=path,
                                authorization=self.headers.get("Authorization"))
            with owner._lock:
                owner._exchanges.append(exchange)
        responses = path == "/v1/responses"
        try:
            owner._check_auth(self.headers.get("Authorization"))
            if exchange is None:
                raise RequestRejected(
                    "We could not parse the JSON body of your request. (HINT: This likely means"
                    " you aren't using your HTTP library correctly. The OpenAI API expects a"
                    " JSON payload, but what was sent was not valid JSON.)")
            body = exchange.request
            if responses:
                validate_responses_request(body, owner._issued)
            else:
                validate_chat_request(body)
            images = [] if owner.accept_images else image_parts(body)
            if images:  # as a text-only model refuses them
                raise RequestRejected("Invalid input: this model does not support image inputs."
                                      if responses else "Invalid content type. image_url is"
                                      " only supported by certain models.",
                                      param=images[0].where.replace("[", ".["))
            if owner.local is not None and not responses:
                body, exchange.dropped = owner.local.fit(body)
            try:
                step = owner._next(body)
            except ScriptError as err:
                if err.__cause__ is not None:  # a callable step failed
                    with owner._lock:
                        owner._errors.append(traceback.format_exc())
                raise RequestRejected(f"ScriptedModelServer: {err}", 500, code="script_error",
                                      headers={"x-should-retry": "false"}) from err
            time.sleep(step.delay)
            if step.error is not None:  # a scripted error, answered as one
                raise RequestRejected(**step.error.model_dump())
        except RequestRejected as err:
            if exchange is not None:
                exchange.response, exchange.status = err.body, err.status
            raise
        answer = ResponseAnswer(step, body, owner._issued) if responses else Answer(step, body)
        payload: Any = answer.stream() if exchange.stream else answer.whole()
        exchange.response, exchange.status = payload, 200  # status last: then the answer is there
        if exchange.stream:
            self._send_stream(payload, step, named=responses)
        else:
            self._send(200, payload)
