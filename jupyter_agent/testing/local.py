"""The scripted server playing llama.cpp, vLLM or Ollama: their context window, said and kept.

=========  =====================================================  ==========================
plays      reports the window in                                   a prompt past it
=========  =====================================================  ==========================
llama.cpp  ``GET /v1/models`` ``meta.n_ctx``, ``GET /props``       400 ``exceed_context_size``
vllm       ``GET /v1/models`` ``max_model_len``                    400 "maximum context length"
ollama     ``POST /api/show`` (``num_ctx``, ``*.context_length``)  oldest messages dropped
=========  =====================================================  ==========================

A refused request consumes no step; a truncated one is answered from the truncated body,
and ``Exchange.dropped`` counts the dropped messages.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from jupyter_agent.testing.chat_wire import RequestRejected, error_body, estimate_prompt_tokens

PLAYS = ("llama.cpp", "vllm", "ollama")
TRAINED = 8_192  # tokens: the played model's trained context


@dataclass(frozen=True)
class LocalServer:
    """How the scripted server plays a local server; ``context_window`` is tokens;
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

    def answer(self, method: str, path: str, body: Any, model_ids: tuple[str, ...]) -> Any:
        """The JSON answering a request outside ``/v1``, or None (404)."""
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
                                   "llama.context_length": TRAINED},
                    "modified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        return None

    def fit(self, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """The chat request as the played server runs it, and how many messages it dropped;
        ``RequestRejected`` (400 in that server's shape) when it does not fit and is refused."""
        tokens = estimate_prompt_tokens(body)
        if tokens <= self.context_window:
            return body, 0
        if not (self.play == "ollama" if self.truncate is None else self.truncate):
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
