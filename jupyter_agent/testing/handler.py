"""HTTP plumbing of the scripted server: the accept loop and the request handler.

``_HTTPServer`` is a :class:`http.server.ThreadingHTTPServer` whose accept loop
waits on a selector with a wake-up socket instead of polling, so stopping is
immediate. It tracks every accepted connection (in the accept thread) so that
``stop()`` can shut idle keep-alive connections down. ``_Handler`` speaks
HTTP/1.1: JSON responses carry ``Content-Length``; streams use chunked transfer
encoding (Chat Completions: ``data: {chunk}`` events, then ``data: [DONE]``; Responses:
``event: {type}`` / ``data: {event}`` pairs). All decisions about *what* to answer are
delegated to the owning ``ScriptedModelServer``.
"""

from __future__ import annotations

import contextlib
import json
import selectors
import socket
import sys
import time
import traceback
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from jupyter_agent.testing.images import ImagePart, image_parts, refusal
from jupyter_agent.testing.protocol import (
    RequestRejected,
    build_chunks,
    build_completion,
    error_body,
)
from jupyter_agent.testing.responses import (
    build_events,
    build_response,
    validate_responses_request,
)
from jupyter_agent.testing.validation import validate_chat_request

if TYPE_CHECKING:
    from jupyter_agent.testing.server import ScriptedModelServer

__all__ = ["Exchange"]

_FLUSH_BYTES = 16384
_UNPARSED = object()


@dataclass
class Exchange:
    """One ``/chat/completions`` or ``/responses`` request and what the server answered.

    Recorded as soon as the request body is parsed; ``status`` stays None while
    the answer is pending (e.g. during a step's ``delay``).

    Attributes
    ----------
    request : dict or object
        The parsed JSON body.
    status : int or None
        HTTP status sent (None while pending).
    response : dict or list or None
        The ``chat.completion`` or ``response`` object, the list of stream chunks or
        events, or the error body.
    stream : bool
        Whether the request asked for a stream (``"stream": true``).
    raw : bytes
        The request body exactly as it arrived.
    path : str
        ``/v1/chat/completions`` or ``/v1/responses``.
    authorization : str or None
        The request's ``Authorization`` header (``"Bearer KEY"``), kept in memory only
        so that a test can see which key reached this server; never logged.
    dropped : int
        Messages a server playing Ollama dropped from the start of the prompt to fit its
        context window (:mod:`~jupyter_agent.testing.local`); the answer saw the rest.
    images : list of ImagePart
        The images the request carried (a property).
    """

    request: Any
    status: int | None = None
    response: Any = None
    stream: bool = False
    raw: bytes = b""
    path: str = "/v1/chat/completions"
    authorization: str | None = field(default=None, repr=False)
    dropped: int = 0

    @property
    def images(self) -> list[ImagePart]:
        """The images the request carried (``image_url`` / ``input_image`` parts), with
        their place, sizes (bytes, pixels) and estimated tokens."""
        return image_parts(self.request)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    timeout = 0  # handle_request() never blocks (the selector already waited)
    owner: ScriptedModelServer

    def __init__(self, address: tuple[str, int], owner: ScriptedModelServer) -> None:
        super().__init__(address, _Handler)
        self.owner = owner
        self._stopping = False
        self._wake_r, self._wake_w = socket.socketpair()

    def serve_until_stopped(self) -> None:
        """Accept connections until :meth:`request_stop`; no polling interval, so
        stopping takes no longer than waking a ``select``."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.socket, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping:
                ready = selector.select()
                if self._stopping:
                    break
                if any(key.fileobj is self.socket for key, _ in ready):
                    self.handle_request()  # timeout = 0: accept if still pending, never block

    def request_stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def server_close(self) -> None:
        super().server_close()
        self._wake_r.close()
        self._wake_w.close()

    def process_request(self, request: Any, client_address: Any) -> None:
        self.owner._track(request, True)  # in the accept thread, so stop() sees it
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        self.owner._track(request, False)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:  # no stderr traceback
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # the client went away (a reset keep-alive connection): not a failure
        self.owner._record_error(traceback.format_exc())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    timeout = 300  # seconds an idle keep-alive connection may stay open

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.owner.log_requests:
            sys.stderr.write(f"ScriptedModelServer: {format % args}\n")

    # -- plumbing ---------------------------------------------------------------
    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", "req_" + uuid.uuid4().hex[:24])
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, chunks: list[dict[str, Any]], chunk_delay: float,
                     *, named: bool = False, drop_after: int | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", "req_" + uuid.uuid4().hex[:24])
        self.end_headers()
        if named:  # Responses: each event names its type; no [DONE] marker
            events = [f"event: {c['type']}\ndata: {json.dumps(c)}\n\n".encode() for c in chunks]
        else:
            events = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
            events.append(b"data: [DONE]\n\n")
        if drop_after is not None:
            self._send_cut(events[:drop_after])
            return
        buffer = bytearray()
        try:
            for event in events:
                buffer += b"%X\r\n%s\r\n" % (len(event), event)
                if chunk_delay > 0 or len(buffer) >= _FLUSH_BYTES:
                    self.wfile.write(bytes(buffer))
                    buffer.clear()
                    if chunk_delay > 0:
                        time.sleep(chunk_delay)
            self.wfile.write(bytes(buffer) + b"0\r\n\r\n")
        except OSError:  # client went away mid-stream (e.g. KeyboardInterrupt)
            self.close_connection = True

    def _send_cut(self, events: list[bytes]) -> None:
        """Send ``events`` as chunks, then close the connection mid-stream (no last chunk)."""
        try:
            self.wfile.write(b"".join(b"%X\r\n%s\r\n" % (len(e), e) for e in events))
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True

    def _route(self, method: str) -> None:
        try:
            self._dispatch(method)
        except OSError:  # the client went away (or stop() closed the connection)
            self.close_connection = True

    def _dispatch(self, method: str) -> None:
        body = self._read_body()  # always drain, so keep-alive stays in sync
        path = self.path.split("?", 1)[0].rstrip("/")
        owner = self.server.owner
        try:
            if method == "POST" and path in ("/v1/chat/completions", "/v1/responses"):
                self._answer(path, body)
                return
            owner._check_auth(self.headers.get("Authorization"))
            played = None
            if owner.local is not None and not path.startswith("/v1/"):
                try:
                    parsed = json.loads(body) if body else None
                except ValueError:
                    parsed = None
                played = owner.local.answer(method, path, parsed, owner.model_ids)
            if method == "GET" and path == "/v1/models":
                self._send(200, {"object": "list", "data": owner._model_objects()})
            elif method == "GET" and path.startswith("/v1/models/"):
                self._send(200, owner._model_object(path[len("/v1/models/"):]))
            elif played is not None:
                self._send(200, played)
            else:
                raise RequestRejected(404, error_body(404, f"Invalid URL ({method} {self.path})"))
        except RequestRejected as err:
            self._send(err.status, err.body, err.headers)
        except OSError:
            raise
        except Exception:
            detail = traceback.format_exc()
            owner._record_error(detail)
            message = "ScriptedModelServer internal error: " + detail.strip().splitlines()[-1]
            self._send(500, error_body(500, message), {"x-should-retry": "false"})

    def _answer(self, path: str, raw: bytes) -> None:
        owner = self.server.owner
        exchange: Exchange | None = None
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            body = _UNPARSED
        else:
            exchange = Exchange(body, stream=isinstance(body, dict) and body.get("stream") is True,
                                raw=raw, path=path,
                                authorization=self.headers.get("Authorization"))
            owner._record(exchange)
        responses = path == "/v1/responses"
        try:
            owner._check_auth(self.headers.get("Authorization"))
            if exchange is None:
                raise RequestRejected(400, error_body(
                    400, "We could not parse the JSON body of your request. (HINT: This likely"
                    " means you aren't using your HTTP library correctly. The OpenAI API expects"
                    " a JSON payload, but what was sent was not valid JSON.)"))
            if responses:
                validate_responses_request(body, owner._issued)
            else:
                validate_chat_request(body)
            refused = None if owner.accept_images else refusal(body, responses=responses)
            if refused is not None:
                raise refused
            if owner.local is not None and not responses:
                body, exchange.dropped = owner.local.fit(body)
            step = owner._next_step(body)
        except RequestRejected as err:
            if exchange is not None:
                owner._settle(exchange, err.status, err.body)
            raise
        assert exchange is not None
        if step.delay:
            time.sleep(step.delay)
        if step.error is not None:
            e = step.error
            payload = error_body(e.status, e.message, type=e.type, param=e.param, code=e.code)
            owner._settle(exchange, e.status, payload)
            self._send(e.status, payload, e.headers)
        elif exchange.stream:
            chunks = (build_events(step, body, owner._issue) if responses
                      else build_chunks(step, body))
            owner._settle(exchange, 200, chunks)
            self._send_stream(chunks, step.chunk_delay, named=responses,
                              drop_after=step.drop_after)
        else:
            answer = (build_response(step, body, owner._issue) if responses
                      else build_completion(step, body))
            owner._settle(exchange, 200, answer)
            self._send(200, answer)

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def do_DELETE(self) -> None:
        self._route("DELETE")
