"""The model protocol: what the agent needs from a model API, and what it gets back.

A :class:`Model` sends the working context (Chat Completions message dicts, the stored
format) and the tool schemas to a model and returns one
:class:`ModelReply`: text, tool calls (as Chat Completions ``tool_calls`` dicts), the
finish reason and the usage the endpoint reported. Implementations own everything
API-specific -- request building, streaming, usage fields, error mapping -- so the loop
never sees a wire format:

- :class:`~jupyter_agent.agent.chat.ChatModel`: Chat Completions;
- ``jupyter_agent.testing.ScriptedModel``: in-process, for unit tests.

While a reply streams, what has arrived is kept in a caller-owned
:class:`PartialReply`, so a reply cut short by an interrupt (or by a broken stream)
still has its text; the loop decides what to keep.

Failures of the endpoint raise :class:`~jupyter_agent.errors.ModelError` worded for the
user (:mod:`~jupyter_agent.agent.model_errors`); anything else that stops a request
(``KeyboardInterrupt``, an exception from ``on_text``) propagates unchanged.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Model", "ModelReply", "PartialReply", "TextCallback", "TokenUsage", "request_arguments",
           "usage_of"]

TextCallback = Callable[[str], object]
"""Receives each piece of reply text as it arrives (once with the whole text when not
streaming)."""


@dataclass(frozen=True)
class TokenUsage:
    """Tokens of one model call, as the endpoint reported them.

    Attributes
    ----------
    input_tokens : int
        Prompt tokens (cached ones included).
    output_tokens : int
        Completion tokens (reasoning tokens included).
    cached_tokens : int
        Prompt tokens served from the provider's prompt cache (part of ``input_tokens``).
    """

    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0


def usage_of(data: Any, input_key: str, output_key: str, details_key: str) -> TokenUsage | None:
    """The :class:`TokenUsage` of a reported usage object (a dict), or None when it lacks
    the token counts.

    Parameters
    ----------
    data : object
        E.g. ``{"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details":
        {"cached_tokens": 4}}``.
    input_key, output_key, details_key : str
        Where the API puts the input and output tokens and the input details (whose
        ``cached_tokens`` are read).
    """
    if not isinstance(data, dict):
        return None
    tokens_in, tokens_out = data.get(input_key), data.get(output_key)
    if not isinstance(tokens_in, int) or not isinstance(tokens_out, int):
        return None
    details = data.get(details_key)
    cached = details.get("cached_tokens") if isinstance(details, dict) else 0
    return TokenUsage(tokens_in, tokens_out, cached if isinstance(cached, int) else 0)


def request_arguments(kwargs: dict[str, Any], bulk: dict[str, Any], *,
                      fast: bool) -> dict[str, Any]:
    """The keyword arguments of one ``openai`` request.

    Parameters
    ----------
    kwargs : dict
        Small typed fields (model, stream, ...).
    bulk : dict
        Large fields already in wire format (messages or input, tools).
    fast : bool
        Pass ``bulk`` in ``extra_body`` past the client's request transform, with an empty
        placeholder of each field in the typed arguments so that every field keeps its
        place in the body (the bytes sent are the same either way).

    Returns
    -------
    dict
    """
    if not fast:
        return {**kwargs, **bulk}
    return {**kwargs, **{key: [] for key in bulk}, "extra_body": bulk}


@dataclass
class PartialReply:
    """What a (possibly streaming) reply has delivered so far; owned by the caller.

    Attributes
    ----------
    text_parts : list of str
        Text pieces in arrival order.
    calls : dict
        Tool calls by position: ``{index: {"id", "name", "arguments"}}`` (strings that
        grow as deltas arrive).
    usage : TokenUsage or None
        Set when the endpoint reports usage.
    finish_reason : str or None
        As reported ("stop", "tool_calls", "length", "content_filter", ...).
    received : bool
        Whether any part of the answer arrived (a failure after that is a broken
        stream, not an unreachable endpoint).
    """

    text_parts: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    usage: TokenUsage | None = None
    finish_reason: str | None = None
    received: bool = False

    @property
    def text(self) -> str:
        """The reply text received so far."""
        return "".join(self.text_parts)

    def add_text(self, text: str, on_text: TextCallback | None) -> None:
        """Record a text piece and pass it to ``on_text``."""
        if text:
            self.text_parts.append(text)
            if on_text is not None:
                on_text(text)

    def tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls as Chat Completions ``tool_calls`` dicts, in position order.

        A call without an ID gets a fresh ``call_...`` one; empty arguments become ``"{}"``.
        """
        out = []
        for index in sorted(self.calls):
            call = self.calls[index]
            out.append({
                "id": call.get("id") or f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": call.get("name", ""),
                             "arguments": call.get("arguments", "") or "{}"},
            })
        return out

    def reply(self) -> ModelReply:
        """The :class:`ModelReply` of what arrived."""
        return ModelReply(self.text, self.tool_calls(), self.finish_reason, self.usage)


@dataclass(frozen=True)
class ModelReply:
    """One model response, reduced to what the loop needs.

    Attributes
    ----------
    text : str
    tool_calls : list of dict
        ``{"id", "type": "function", "function": {"name", "arguments"}}`` each.
    finish_reason : str or None
        "stop", "tool_calls", "length" (the output token limit), "content_filter", ...
    usage : TokenUsage or None
        As reported; ``None`` when the endpoint reported none (the caller estimates).
    """

    text: str
    tool_calls: list[dict[str, Any]]
    finish_reason: str | None
    usage: TokenUsage | None = None


@runtime_checkable
class Model(Protocol):
    """A model the agent can talk to (see the module docstring).

    Attributes
    ----------
    api : str
        Which API it speaks ("chat", ...); saved in the session's checkpoint.
    name : str
        The model name sent with requests (also what usage is priced as).
    base_url : str
        The endpoint, saved in the checkpoint ("" when there is none, in process).
    """

    api: str
    name: str
    base_url: str

    def respond(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        *,
        stream: bool,
        partial: PartialReply,
        on_text: TextCallback | None = None,
    ) -> ModelReply:
        """Send one request and return the reply.

        Parameters
        ----------
        messages : sequence of dict
            The working context in the stored (Chat Completions) format, tool pairs intact.
        tools : sequence of dict
            Chat Completions tool schemas (``{"type": "function", "function": {...}}``);
            empty: no tools are offered.
        stream : bool
            Stream the reply; ``on_text`` then sees text as it is generated.
        partial : PartialReply
            Filled as the reply arrives (read it after an interrupt).
        on_text : callable, optional
            Called with each piece of reply text.

        Returns
        -------
        ModelReply

        Raises
        ------
        ModelError
            When the endpoint fails (after the client's own retries), with a message
            that says what to do next.
        """
        ...
