"""ScriptedModelServer: an OpenAI-compatible model server on loopback.

The server is a :class:`http.server.ThreadingHTTPServer` (stdlib only) run in a
daemon thread. It answers ``POST /v1/chat/completions`` and ``POST /v1/responses``
(plain or streamed as server-sent events; :mod:`~jupyter_agent.testing.protocol`,
:mod:`~jupyter_agent.testing.responses`) from one script of steps
(:mod:`jupyter_agent.testing.script`), and ``GET /v1/models``; anything else is a 404
in the OpenAI error shape.

Invariants
----------
- Every ``/chat/completions`` and ``/responses`` body that parses as JSON is recorded
  in :attr:`requests` on arrival, in order, including rejected ones (400, 401,
  exhausted script); :attr:`exchanges` adds each status, answer, raw body and path.
- A rejected request (400/401) never consumes a step; an accepted one consumes
  exactly one, even if the client disconnects mid-stream.
- One lock guards the script and the records, so the server is thread-safe;
  callable steps run outside the lock.
- Responses carry ``Content-Length`` (keep-alive safe); streams use chunked
  transfer encoding. ``stop()`` also closes idle keep-alive connections, so a
  stopped server refuses connections instead of answering on old ones.
- Nothing is logged unless ``log_requests=True`` (then one line per request on
  stderr). The API key is never logged or echoed.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import traceback
from collections.abc import Iterable
from typing import Any

from jupyter_agent.testing.handler import Exchange, _HTTPServer
from jupyter_agent.testing.local import LocalServer
from jupyter_agent.testing.protocol import RequestRejected, error_body
from jupyter_agent.testing.script import (
    ScriptError,
    Step,
    StepCallable,
    load_script,
    parse_step,
    parse_steps,
)

__all__ = ["Exchange", "ScriptedModelServer"]


class ScriptedModelServer:
    """An OpenAI-compatible model server on loopback that answers from a script.

    Parameters
    ----------
    script : iterable of steps, optional
        Steps (dicts, strings, :class:`~jupyter_agent.testing.script.Step` or
        callables ``f(request_body) -> step``), validated now.
    require_api_key : str, optional
        When set, every request must send ``Authorization: Bearer <key>``, else 401
        ``invalid_api_key``.
    model_ids : iterable of str
        Ids listed by ``GET /v1/models``. Requests may name any model; the
        response's ``model`` echoes the requested one.
    host : str
        IPv4 address to bind (loopback by default).
    port : int
        TCP port; 0 picks a free ephemeral port at :meth:`start`.
    log_requests : bool
        Print one line per HTTP request on stderr.
    accept_images : bool
        False: answer a request that carries images (``image_url`` / ``input_image``
        parts) with 400, as a text-only model does; it consumes no step.
    play : {"llama.cpp", "vllm", "ollama"}, optional
        Play that local server: report ``context_window`` its way and refuse (or, for
        Ollama, silently truncate) a chat request past it
        (:class:`~jupyter_agent.testing.local.LocalServer`).
    context_window : int
        The window (tokens) of the played server.
    truncate : bool, optional
        Truncate rather than refuse past the window (None: as the played server does).

    Raises
    ------
    ScriptError
        If a step is invalid.

    Examples
    --------
    >>> with ScriptedModelServer([{"text": "hi"}]) as server:  # doctest: +SKIP
    ...     client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    ...     client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
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
        self._steps: list[Step | StepCallable] = parse_steps(script or [])
        self._served = 0
        self._api_key = require_api_key
        self.model_ids: tuple[str, ...] = tuple(model_ids)
        self.host = host
        self._port = port
        self.log_requests = log_requests
        self.accept_images = accept_images
        self.local = None if play is None else LocalServer(play, context_window, truncate)
        self._lock = threading.RLock()
        self._exchanges: list[Exchange] = []
        self._errors: list[str] = []
        self._issued: set[str] = set()  # encrypted reasoning contents handed out
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._created = int(time.time())

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> ScriptedModelServer:
        """Build a server whose script is the JSON file at *path* (see ``load_script``).

        Parameters
        ----------
        path : str or os.PathLike
            A UTF-8 JSON file holding a list of steps.
        **kwargs
            Passed to the constructor (``require_api_key``, ``model_ids``, ``host``,
            ``port``).

        Returns
        -------
        ScriptedModelServer
            Not started yet (use it as a context manager or call :meth:`start`).

        Raises
        ------
        ScriptError
            If the file is unreadable, not a JSON list, or holds an invalid step.
        """
        return cls(load_script(path), **kwargs)

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> ScriptedModelServer:
        """Bind and serve in a daemon thread; no-op when running. Returns ``self``.

        After :meth:`stop`, ``start()`` binds the same port again, so
        :attr:`base_url` stays valid across a restart.

        Raises
        ------
        OSError
            If the port cannot be bound.
        """
        with self._lock:
            if self._httpd is not None:
                return self
            httpd = _HTTPServer((self.host, self._port), self)
            self._port = httpd.server_address[1]
            self._httpd = httpd
            self._thread = threading.Thread(
                target=httpd.serve_until_stopped,
                name=f"ScriptedModelServer:{self._port}", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and open connections; idempotent."""
        with self._lock:
            httpd, thread = self._httpd, self._thread
            self._httpd = self._thread = None
        if httpd is None:
            return
        httpd.request_stop()
        if thread is not None:
            thread.join(timeout=10)
        httpd.server_close()
        with self._lock:  # after the accept loop ended: no new connections appear
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    close = stop

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """Whether the server is serving."""
        return self._httpd is not None

    @property
    def port(self) -> int:
        """The bound TCP port (0 before the first :meth:`start` with ``port=0``)."""
        return self._port

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1`` — pass as ``openai.OpenAI(base_url=...)``.

        Raises
        ------
        RuntimeError
            Before the server was first started (the port is not known yet).
        """
        if not self._port:
            raise RuntimeError("ScriptedModelServer is not started; call start() or use `with`")
        return f"http://{self.host}:{self._port}/v1"

    # -- script -------------------------------------------------------------------
    def add_steps(self, steps: Iterable[Any]) -> None:
        """Append steps to the script at runtime (also while serving).

        Parameters
        ----------
        steps : iterable
            Step dicts (``{"text": ...}``, ``{"tool_calls": [...]}``, ...), plain
            strings (text replies) or callables ``f(request_body) -> step``.

        Raises
        ------
        ScriptError
            If a step is invalid (validated now, naming its index); nothing is
            appended then.
        """
        with self._lock:
            self._steps.extend(parse_steps(steps, start=len(self._steps)))

    extend = add_steps

    @property
    def remaining(self) -> int:
        """Number of steps not yet consumed."""
        with self._lock:
            return len(self._steps) - self._served

    @property
    def served(self) -> int:
        """Number of steps consumed so far."""
        with self._lock:
            return self._served

    # -- records ------------------------------------------------------------------
    @property
    def requests(self) -> list[Any]:
        """Every parsed request body, in order (a snapshot copy).

        Includes rejected requests; use :attr:`exchanges` to see each status.
        """
        with self._lock:
            return [x.request for x in self._exchanges]

    @property
    def exchanges(self) -> list[Exchange]:
        """Every model request with its status and answer (a copy)."""
        with self._lock:
            return list(self._exchanges)

    @property
    def images(self) -> list[list[Any]]:
        """The images each request carried, parallel to :attr:`requests` (lists of
        :class:`~jupyter_agent.testing.images.ImagePart`)."""
        with self._lock:
            return [x.images for x in self._exchanges]

    @property
    def responses(self) -> list[Any]:
        """The answers parallel to :attr:`requests` (completion, chunk list or error body)."""
        with self._lock:
            return [x.response for x in self._exchanges]

    @property
    def errors(self) -> list[str]:
        """Tracebacks of server-side failures: exceptions raised by callable steps
        and unexpected internal errors (the latter should never happen)."""
        with self._lock:
            return list(self._errors)

    def clear_requests(self) -> None:
        """Forget the recorded exchanges (the script position is kept)."""
        with self._lock:
            self._exchanges.clear()

    # -- handler helpers ------------------------------------------------------------
    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _record(self, exchange: Exchange) -> None:
        with self._lock:
            self._exchanges.append(exchange)

    def _settle(self, exchange: Exchange, status: int, response: Any) -> None:
        with self._lock:
            exchange.status, exchange.response = status, response

    def _issue(self, secret: str) -> str:
        with self._lock:
            self._issued.add(secret)
        return secret

    def _record_error(self, detail: str) -> None:
        with self._lock:
            self._errors.append(detail)

    def _check_auth(self, header: str | None) -> None:
        if self._api_key is None:
            return
        if not header or not header.startswith("Bearer ") or not header[7:].strip():
            raise RequestRejected(401, error_body(
                401, "You didn't provide an API key. You need to provide your API key in an"
                " Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."))
        if header[7:].strip() != self._api_key:
            raise RequestRejected(401, error_body(
                401, "Incorrect API key provided. You can find your API key at"
                " https://platform.openai.com/account/api-keys."))

    def _next_step(self, body: dict[str, Any]) -> Step:
        with self._lock:
            if self._served >= len(self._steps):
                raise RequestRejected(500, error_body(
                    500, f"ScriptedModelServer: script exhausted after {self._served} steps;"
                    " add steps to the script (add_steps() in Python, or more entries in the"
                    " script file)",
                    code="script_exhausted"), {"x-should-retry": "false"})
            index = self._served
            step = self._steps[index]
            self._served += 1
        if isinstance(step, Step):
            return step
        try:
            return parse_step(step(body), index=index)
        except Exception as err:
            message = f"ScriptedModelServer: callable step {index} failed: {err!r}"
            if isinstance(err, ScriptError):
                message = f"ScriptedModelServer: callable step returned an invalid step: {err}"
            self._record_error(traceback.format_exc())
            raise RequestRejected(500, error_body(500, message, code="script_error"),
                                  {"x-should-retry": "false"}) from err

    def _model_object(self, model_id: str) -> dict[str, Any]:
        if model_id not in self.model_ids:
            raise RequestRejected(404, error_body(
                404, f"The model '{model_id}' does not exist", param="model",
                code="model_not_found"))
        entry = {"id": model_id, "object": "model", "created": self._created,
                 "owned_by": "jupyter-agent"}
        return entry if self.local is None else {**entry, **self.local.model_fields()}

    def _model_objects(self) -> list[dict[str, Any]]:
        return [self._model_object(m) for m in self.model_ids]

    def __repr__(self) -> str:
        where = self.base_url if self._port else "not started"
        return f"<ScriptedModelServer {where} remaining={self.remaining}>"
