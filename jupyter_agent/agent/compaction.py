"""Compaction: replace older turns of the working context with one summary message.

Policy (issue 3): the system message (which carries the notes) stays first; the most
recent turns stay verbatim (:func:`~jupyter_agent.agent.context.choose_cut`: the last
``keep_turns`` user turns if they fit in ``keep_tokens``, else as much recent context
as fits, cut only before a user or assistant message so a tool call never loses its
results); everything in between is summarized by *one* model call (no tools, not
streamed) into a single ``user`` message starting with
:data:`~jupyter_agent.agent.context.SUMMARY_MARKER`. The caller records the new
context with ``store.compact`` (the transcript keeps the originals). If the call
fails, nothing changes.

:class:`Compacting` is the part of :class:`~jupyter_agent.agent.loop.Agent` that
decides when to compact (the estimated context passes ``compact_at`` of the window)
and applies the result: ``store.compact(..., replaced=...)``, the usage of the
summarizing call (it counts toward session cost, not iterations), a checkpoint and a
:class:`~jupyter_agent.agent.events.Notice`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import openai

from jupyter_agent.agent.client import ReplyAccumulator, request_reply
from jupyter_agent.agent.context import (
    CHARS_PER_TOKEN,
    SUMMARY_MARKER,
    choose_cut,
    estimate_tokens,
    render_for_summary,
)
from jupyter_agent.agent.events import EventCallback, Notice, ignore_event
from jupyter_agent.agent.prompts import SUMMARIZER_PROMPT
from jupyter_agent.errors import ModelError
from jupyter_agent.store import Store, Usage, to_message_dict

__all__ = ["KEEP_FRACTION", "Compacting", "CompactionResult", "summarize_older_turns"]

KEEP_FRACTION = 0.5
"""Share of the compaction threshold that the verbatim recent turns may use."""


@dataclass(frozen=True)
class CompactionResult:
    """The outcome of one summarizing call.

    Attributes
    ----------
    messages : list of dict or None
        The new working context, or None when the model returned no summary text.
    summary : str
        The summary text (recorded in the store's compaction log).
    replaced : int
        How many messages the summary replaces.
    input_tokens, output_tokens : int
        Usage of the summarizing call (reported, else estimated).
    cached_tokens : int
        Cached prompt tokens the endpoint reported for it.
    """

    messages: list[dict[str, Any]] | None
    summary: str
    replaced: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0


def summarize_older_turns(
    client: openai.OpenAI,
    model: str,
    messages: list[dict[str, Any]],
    *,
    keep_tokens: int,
    keep_turns: int,
    max_chars: int,
) -> CompactionResult | None:
    """Summarize ``messages[1:cut]`` with one model call.

    Parameters
    ----------
    client, model
        Where to send the summarizing request.
    messages : list of dict
        The working context (tool pairs intact).
    keep_tokens : int
        Budget (tokens, estimated) for the verbatim recent part.
    keep_turns : int
        Recent user turns to keep when they fit.
    max_chars : int
        Cap on the rendered conversation sent for summarizing (code points).

    Returns
    -------
    CompactionResult or None
        None when there is nothing worth compacting (no model call was made).

    Raises
    ------
    ModelError
        When the summarizing call fails; the caller keeps the context unchanged.
    """
    cut = choose_cut(messages, keep_tokens=keep_tokens, keep_turns=keep_turns)
    if cut is None:
        return None
    head = messages[1:cut]
    request = [
        {"role": "system", "content": SUMMARIZER_PROMPT},
        {
            "role": "user",
            "content": "Summarize this conversation:\n\n"
            + render_for_summary(head, max_chars=max(4_000, max_chars)),
        },
    ]
    reply = request_reply(
        client, model=model, messages=request, tools=None, stream=False, acc=ReplyAccumulator()
    )
    input_tokens = reply.prompt_tokens
    if input_tokens is None:
        input_tokens = estimate_tokens(request)
    output_tokens = reply.completion_tokens
    if output_tokens is None:
        output_tokens = len(reply.text) // CHARS_PER_TOKEN
    summary = reply.text.strip()
    if not summary:
        return CompactionResult(
            None, "", len(head), input_tokens, output_tokens, reply.cached_tokens
        )
    note = to_message_dict(
        {
            "role": "user",
            "content": f"{SUMMARY_MARKER} ({len(head)} messages replaced):\n\n{summary}",
        }
    )
    new = [messages[0], note, *messages[cut:]]
    return CompactionResult(
        new, summary, len(head), input_tokens, output_tokens, reply.cached_tokens
    )


class Compacting:
    """Mixin: when and how the agent compacts its working context."""

    client: openai.OpenAI
    model: str
    store: Store | None
    session_id: str | None
    messages: list[dict[str, Any]]
    context_window: int
    compact_at: float
    keep_turns: int
    _emit: EventCallback
    _base_tokens: int | None
    _base_len: int

    if TYPE_CHECKING:  # provided by the other parts of Agent

        def account(
            self,
            input_tokens: int,
            output_tokens: int,
            *,
            cached_tokens: int = 0,
            emit: bool = True,
        ) -> Usage: ...
        def _checkpoint(self) -> None: ...
        def _check_open(self) -> None: ...
        def _lease(self) -> contextlib.AbstractContextManager[None]: ...

    def estimated_tokens(self) -> int:
        """Estimated size of the working context.

        Returns
        -------
        int
            Tokens: the last reported usage plus ~4 characters per token for the
            messages since (everything estimated after a resume or compaction).
        """
        return estimate_tokens(
            self.messages, base_tokens=self._base_tokens, base_len=self._base_len
        )

    def _maybe_compact(self) -> None:
        if self.estimated_tokens() > self.compact_at * self.context_window:
            self._compact()

    def compact(self, *, on_event: EventCallback | None = None) -> bool:
        """Summarize the older turns now (also done automatically before a model call
        when the context passes ``compact_at`` of the window).

        Parameters
        ----------
        on_event : callable, optional
            Receives the :class:`Notice` (compacted, or why not) and the usage.

        Returns
        -------
        bool
            False when there is nothing to compact or the summarizing call failed
            (the working context then stays as it was and a Notice says why).

        Raises
        ------
        RuntimeError
            When the agent was closed.
        SessionLockedError, CorruptSessionError, ContextMismatchError, OSError
            From the store while recording the compaction.
        """
        self._check_open()
        self._emit = on_event or ignore_event
        try:
            with self._lease():
                return self._compact()
        finally:
            self._emit = ignore_event

    def _compact(self) -> bool:
        before = self.estimated_tokens()
        try:
            result = summarize_older_turns(
                self.client,
                self.model,
                self.messages,
                keep_tokens=int(self.context_window * self.compact_at * KEEP_FRACTION),
                keep_turns=self.keep_turns,
                max_chars=int(self.context_window * CHARS_PER_TOKEN * KEEP_FRACTION),
            )
        except ModelError as exc:
            self._emit(Notice(f"compaction failed, the context stays as it was: {exc}"))
            return False
        if result is None:
            return False
        self.account(result.input_tokens, result.output_tokens, cached_tokens=result.cached_tokens)
        if result.messages is None:
            self._checkpoint()
            self._emit(Notice("compaction failed: the model returned an empty summary"))
            return False
        if self.store is not None and self.session_id is not None:
            self.store.compact(
                self.session_id, result.messages, summary=result.summary, replaced=result.replaced
            )
        self.messages = result.messages
        self._base_tokens = None
        self._base_len = 0
        self._checkpoint()
        self._emit(
            Notice(
                f"compacted {result.replaced} earlier messages into a summary "
                f"(about {before:,} -> {self.estimated_tokens():,} tokens)"
            )
        )
        return True
