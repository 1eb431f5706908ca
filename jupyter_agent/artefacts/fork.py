"""Forking a session: a new session that starts as a copy of another, whole or cut after a
user turn (what it holds: docs/design.md "Forks, exports and search"). The parent is read
without its lease and never written.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

from jupyter_agent.artefacts.steps import (
    SYNTHETIC_PREFIX,
    complete_length,
    turn_starts,
)
from jupyter_agent.errors import FigureNotFoundError, ForkPointError
from jupyter_agent.store import ForkOrigin, SessionRecord, SessionState, Store, new_session_id
from jupyter_agent.store.messages import fallback_summary, figure_refs, message_text
from jupyter_agent.store.records import utc_now

STATE_TOOLS = ("write_scratchpad", "add_todo", "update_todo", "write_summary")


@dataclass(frozen=True)
class Forked:
    """A fork as saved, the user turns of its parent and its own, and whether its working
    context was ``rebuilt`` from the transcript (the parent was compacted after the cut)."""

    record: SessionRecord
    parent_turns: int
    turns: int
    rebuilt: bool = False


def fork_label(origin: ForkOrigin | None) -> str:
    """``"fork of ID after turn N"`` / ``"fork of ID"`` for listings; "" for no parent."""
    if origin is None:
        return ""
    after = f" after turn {origin.turn}" if origin.turn is not None else ""
    return f"fork of {origin.session_id}{after}"


def replay_state(parent: SessionRecord, cut: int) -> tuple[SessionState, str]:
    """The checkpoint and summary after the parent's first ``cut`` transcript messages, by
    running the state tools' calls again on an empty state (nothing else runs); usage,
    model and endpoint are the parent's. A call counts unless its result says it never ran;
    an interrupted one is counted, not replayed."""
    # the agent package imports openai (~0.5 s); listings only need fork_label
    from jupyter_agent.agent.tools import BuiltinTools, tool_from_function
    from jupyter_agent.agent.working_context import NOT_RUN_PREFIXES, tool_calls_run

    state = SessionState(usage=parent.state.usage.model_copy(), model=parent.state.model,
                         base_url=parent.state.base_url)
    summaries = [""]  # the store stand-in where the summary tool saves: the last text
    recorder = SimpleNamespace(store=True, update=lambda *, summary: summaries.append(summary))
    tools = BuiltinTools(lambda: state, approval="deny")
    tools.conversation = cast(Any, recorder)
    replayable = {name: tool_from_function(getattr(tools, name)) for name in STATE_TOOLS}
    kept, not_run = parent.transcript[:cut], (*NOT_RUN_PREFIXES, SYNTHETIC_PREFIX)
    results = {str(m.get("tool_call_id")): message_text(m) for m in kept
               if m.get("role") == "tool"}
    for message in kept:  # only the calls: a fork of a long session is cut in milliseconds
        for call in message.get("tool_calls") or () if message.get("role") == "assistant" else ():
            function, result = call.get("function") or {}, results.get(str(call.get("id")))
            tool = replayable.get(str(function.get("name")))
            if tool is not None and result is not None and not result.lstrip().startswith(not_run):
                tool.invoke(str(function.get("arguments") or ""))
    state.tool_calls = tool_calls_run(kept)
    return state, summaries[-1]


def fork_record(parent: SessionRecord, *, at: int | None = None,
                title: str | None = None) -> Forked:
    """The record of a fork of ``parent`` keeping user turns 1 to ``at`` (default: all).

    Raises
    ------
    ForkPointError
        When ``at`` is not between 1 and the parent's number of user turns.
    """
    transcript = parent.transcript
    starts = turn_starts(transcript)
    parent_turns = len(starts)
    if at is not None and not 1 <= at <= parent_turns:
        raise ForkPointError(parent.id, at, parent_turns)
    when = utc_now()
    if title is None:
        title = f"{parent.title} (fork)" if parent.title.strip() else f"fork of {parent.id}"
    common: dict[str, Any] = {
        "id": new_session_id(), "created_at": when, "updated_at": when,
        "title": title, "archived": False, "parent": ForkOrigin(session_id=parent.id, turn=at)}
    # without a tool batch still running, or up to where turn at + 1 starts
    cut = complete_length(transcript) if at is None else [*starts, len(transcript)][at]
    kept, messages = transcript[:cut], parent.messages
    update: dict[str, Any] = {"transcript": kept,
                              "messages": messages[: len(messages) - len(transcript) + cut]}
    rebuilt = False
    if at is not None:
        # the context as it was at the cut, unless the parent was compacted after it
        since = len(transcript) - max((c.transcript_length for c in parent.compactions),
                                      default=0)
        in_step = 0 <= since <= len(messages) and (
            since == 0 or messages[-since:] == transcript[-since:])
        rebuilt = not in_step or any(c.transcript_length > cut for c in parent.compactions)
        replayed, summary = replay_state(parent, cut)
        update |= {
            "messages": kept if rebuilt else update["messages"],
            "compactions": [c for c in parent.compactions if c.transcript_length <= cut],
            "state": replayed,
            "summary": summary or fallback_summary(kept),
        }
    # validated from plain data: the fork's record, lists and message dicts are its own
    plain = parent.model_dump(exclude={"transcript", "messages"})
    record = SessionRecord.model_validate({**plain, **update, **common})
    return Forked(record, parent_turns, sum(1 for start in starts if start < cut), rebuilt)


def fork_session(store: Store, session_id: str, *, at: int | None = None,
                 title: str | None = None, into: Store | None = None) -> Forked:
    """Fork a saved session of ``store`` into a new one in ``into`` (default: ``store``),
    with the figures its kept messages refer to (see :func:`fork_record`).

    Raises
    ------
    InvalidSessionIdError, SessionNotFoundError, CorruptSessionError
        For the parent.
    ForkPointError
        When ``at`` names no user turn of the parent.
    SessionLockedError, OSError
        From saving the fork or copying its figures (a figure the parent no longer has
        is left out).
    """
    target = store if into is None else into
    parent = store.load_session(session_id)
    forked = fork_record(parent, at=at, title=title)
    while target.exists(forked.record.id):  # a fresh random ID: practically never taken
        forked = fork_record(parent, at=at, title=title)
    target.create_session(record=forked.record)
    for fid in dict.fromkeys(str(ref["id"]) for ref in figure_refs(forked.record.transcript)):
        try:
            found = store.read_figure(session_id, fid)
        except FigureNotFoundError:
            continue
        target.save_figure(forked.record.id, fid, found.data, found.media_type)
    return forked
