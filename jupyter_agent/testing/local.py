"""The scripted server playing a local model server: its context window, said and kept.

:class:`LocalServer` makes :class:`~jupyter_agent.testing.ScriptedModelServer` report a
context window the way llama.cpp, vLLM or Ollama do, and treat a request whose prompt
(estimated as :func:`~jupyter_agent.testing.protocol.estimate_prompt_tokens` does) does
not fit the way they do:

============  ==================================================  ==========================
plays         reports the window in                                a prompt past it
============  ==================================================  ==========================
llama.cpp     ``GET /v1/models`` ``data[].meta.n_ctx``,             400
              ``GET /props`` ``default_generation_settings.n_ctx``  ``exceed_context_size_error``
vllm          ``GET /v1/models`` ``data[].max_model_len``           400 "maximum context length"
ollama        ``POST /api/show`` (``num_ctx`` parameter,            the oldest messages after
              ``model_info["llama.context_length"]``)              the system message dropped
============  ==================================================  ==========================

A refused request consumes no step; a truncated one is answered from the truncated body
(what a callable step sees), and :attr:`Exchange.dropped` counts the messages dropped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from jupyter_agent.testing.protocol import estimate_prompt_tokens
from jupyter_agent.testing.rejections import RequestRejected, error_body

__all__ = ["PLAYS", "LocalServer"]

PLAYS = ("llama.cpp", "vllm", "ollama")
"""The servers :class:`LocalServer` can play."""


@dataclass(frozen=True)
class LocalServer:
    """How the scripted server plays a local model server (see the module docstring).

    Attributes
    ----------
    play : {"llama.cpp", "vllm", "ollama"}
    context_window : int
        The window in tokens.
    truncate : bool or None
        Drop the oldest messages of a prompt past the window instead of refusing it;
        None: as the played server does (Ollama truncates, the others refuse).
    trained : int
        The model's trained context, reported beside the window (llama.cpp
        ``n_ctx_train``, Ollama ``<arch>.context_length``).

    Raises
    ------
    ValueError
        For an unknown server or a window under 1 token.
    """

    play: str
    context_window: int
    truncate: bool | None = None
    trained: int = 8_192

    def __post_init__(self) -> None:
        if self.play not in PLAYS:
            raise ValueError(f"play must be one of {', '.join(PLAYS)} (got {self.play!r})")
        if self.context_window < 1:
            raise ValueError(f"context_window must be a positive number of tokens "
                             f"(got {self.context_window!r})")

    @property
    def truncates(self) -> bool:
        """Whether a prompt past the window is cut rather than refused."""
        return self.play == "ollama" if self.truncate is None else self.truncate

    def model_fields(self) -> dict[str, Any]:
        """Fields the played server adds to each ``GET /v1/models`` entry."""
        if self.play == "llama.cpp":
            return {"owned_by": "llamacpp", "meta": {"n_ctx": self.context_window,
                                                     "n_ctx_train": self.trained}}
        if self.play == "vllm":
            return {"owned_by": "vllm", "max_model_len": self.context_window}
        return {"owned_by": "library"}

    def answer(self, method: str, path: str, body: Any, model_ids: tuple[str, ...]) -> Any:
        """The JSON the played server answers to a request outside ``/v1``, or None (404)."""
        if self.play == "llama.cpp" and method == "GET" and path == "/props":
            return {"default_generation_settings": {"n_ctx": self.context_window, "params": {}},
                    "total_slots": 1, "model_path": f"/models/{model_ids[0]}.gguf"}
        if self.play == "ollama" and method == "POST" and path == "/api/show":
            name = body.get("model") if isinstance(body, dict) else None
            if name not in model_ids:
                raise RequestRejected(404, error_body(404, f"model '{name}' not found"))
            return {"parameters": f"num_ctx                        {self.context_window}\n"
                                  "stop                           \"<|im_end|>\"",
                    "model_info": {"general.architecture": "llama",
                                   "llama.context_length": self.trained},
                    "modified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        return None

    def fit(self, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """The chat request as the played server runs it, and how many messages it dropped.

        Raises
        ------
        RequestRejected
            When the prompt does not fit and the played server refuses (400, its shape).
        """
        tokens = estimate_prompt_tokens(body)
        if tokens <= self.context_window:
            return body, 0
        if not self.truncates:
            raise RequestRejected(400, self._refusal(tokens))
        messages = list(body.get("messages") or [])
        head = [m for m in messages[:1] if isinstance(m, dict) and m.get("role") == "system"]
        rest = messages[len(head):]
        dropped = 0
        while len(rest) > 1 and estimate_prompt_tokens({**body, "messages": head + rest}) \
                > self.context_window:
            rest.pop(0)
            dropped += 1
        return {**body, "messages": head + rest}, dropped

    def _refusal(self, tokens: int) -> dict[str, Any]:
        window = self.context_window
        if self.play == "llama.cpp":
            return {"error": {"code": 400, "type": "exceed_context_size_error",
                              "message": f"request ({tokens} tokens) exceeds the available "
                                         f"context size ({window} tokens), try increasing it",
                              "n_prompt_tokens": tokens, "n_ctx": window}}
        if self.play == "vllm":
            return {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                    "message": f"This model's maximum context length is {window} tokens. "
                               f"However, you requested {tokens} tokens in the messages, "
                               "Please reduce the length of the messages."}
        return error_body(400, f"the prompt ({tokens} tokens) is longer than the context "
                               f"length ({window})")
