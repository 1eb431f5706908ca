"""Errors of the model endpoint and of the limits that end a turn."""

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
        kept in the session, marked as cut off).
    detail : str
        The endpoint's own reason, as its error body gave it ("" when there was no error
        answer): the message already contains it; this is for quoting it elsewhere.
    context_window : int or None
        Not None when the endpoint refused the request as too long for its context
        window: the window it named in tokens, or 0 when it named none.
    """

    def __init__(self, message: str, status_code: int | None = None, code: str = "", *,
                 mid_reply: bool = False, detail: str = "",
                 context_window: int | None = None) -> None:
        self.status_code = status_code
        self.code = code
        self.mid_reply = mid_reply
        self.detail = detail
        self.context_window = context_window
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
    """A prompt that cannot fit the model's context window even alone.

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

    def __init__(self, tokens: int, window: int, model: str, *, saved: bool = False) -> None:
        self.tokens, self.window, self.model = tokens, window, model
        what = ("your prompt is saved, but it cannot be answered" if saved
                else "nothing was sent or saved")
        super().__init__(
            f"this prompt is about {tokens:,} tokens with the system message, tools and "
            f"room for the reply, more than the {window:,}-token context window of model "
            f"{model}: {what}; shorten the prompt (put large data in a variable or file the "
            "agent can read), or raise the window: start the server with a larger one "
            "(llama.cpp -c N, Ollama num_ctx) and, if it is not reported, tell the agent "
            "with --context-window N or %config AgentMagics.context_window = N")
