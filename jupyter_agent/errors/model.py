"""Errors of the model endpoint and of the limits that end a turn (design §11, §22)."""

from __future__ import annotations

from jupyter_agent.errors.base import JupyterAgentError

__all__ = [
    "LimitExceededError",
    "ModelError",
    "ModelNotConfiguredError",
    "PromptTooLongError",
]


class ModelError(JupyterAgentError):
    """The model endpoint failed: unreachable, rejected the key, rate limited, or errored.

    Raised by the agent loop after the ``openai`` client's own retries. The user's
    message is already saved, so the next run can go on.

    Attributes
    ----------
    status_code : int or None
        The HTTP status, or ``None`` when no response arrived (connection refused,
        timeout).
    code : str
        The error code the endpoint sent (e.g. ``"context_length_exceeded"``), or "".
    mid_reply : bool
        The connection dropped while the reply was arriving (the text that arrived is
        kept in the session, marked as cut off; design §22).
    detail : str
        The endpoint's own reason, as its error body gave it ("" when there was no error
        answer): the message already contains it; this is for quoting it elsewhere.
    """

    def __init__(self, message: str, status_code: int | None = None, code: str = "", *,
                 mid_reply: bool = False, detail: str = "") -> None:
        self.status_code = status_code
        self.code = code
        self.mid_reply = mid_reply
        self.detail = detail
        super().__init__(message)


class ModelNotConfiguredError(JupyterAgentError):
    """No model endpoint is configured (no API key and no ``base_url``)."""


class LimitExceededError(JupyterAgentError):
    """A resource limit of the session is reached (tool calls, cost, iterations).

    Attributes
    ----------
    limit : str
        ``"max_tool_calls"``, ``"max_cost_usd"`` or ``"max_iterations"``.
    value : float
        The value that reached the limit.
    maximum : float
        The configured limit.
    """

    def __init__(self, limit: str, value: float, maximum: float) -> None:
        self.limit = limit
        self.value = value
        self.maximum = maximum
        super().__init__(f"limit reached: {limit} = {maximum:g} (session is at {value:g})")


class PromptTooLongError(JupyterAgentError, ValueError):
    """A prompt that cannot fit the model's context window even alone (design §22).

    Raised before anything is sent or saved: compaction never summarizes the newest
    request, so such a turn could not succeed.

    Attributes
    ----------
    tokens : int
        The estimated size of the system message and the prompt (tokens).
    window : int
        The context window (tokens).
    model : str
        The model name.
    """

    def __init__(self, tokens: int, window: int, model: str) -> None:
        self.tokens, self.window, self.model = tokens, window, model
        super().__init__(
            f"this prompt is about {tokens:,} tokens with the system message, more than the "
            f"{window:,}-token context window of model {model}: nothing was sent or saved; "
            "shorten the prompt (put large data in a variable or file the agent can read), "
            "or set AgentMagics.context_window if the model's window is larger")
