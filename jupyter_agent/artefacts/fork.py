"""Forking a session: a new session that starts as a copy of another.

:func:`fork_record` is pure: parent record in, new record out. :func:`fork_session`
reads the parent from a store without taking its lease (so a session another kernel
is running can be forked) and adds the fork with ``store.create_session(record=...)``, which
leases only the new ID, then copies the figures the fork's messages refer to. The
parent is never written.

What a fork holds
-----------------
Whole (no ``at``): everything the parent has -- working context, transcript,
compactions, checkpoint (scratchpad, todos, tool-call count, usage, model and
endpoint) and summary -- except a tool batch the parent was still running when it was
read (the assistant message whose calls have no results yet is left out, so no call is
separated from its result).

Cut after user turn N (``at=N``): the transcript up to the end of turn N, and

* the *working context the parent had at that point*, which is what its model would
  have been sent next: when no compaction happened after turn N, that is the parent's
  working context without the messages that came later. When a compaction happened
  later, the parent's working context no longer holds turn N's surroundings and the
  store keeps no earlier copy of it; the fork's working context is then rebuilt from
  the transcript up to the cut -- every message verbatim, more than the parent's model
  saw if it had been compacted before turn N too -- and the agent compacts it again
  before its next request if it is too large for the model;
* the compaction events recorded up to the cut (they mark where the parent's context
  was compacted in the part of the transcript the fork shares); later ones are dropped;
* the scratchpad, todos, tool-call count and summary as they were after turn N,
  rebuilt by replaying the state tools' calls (:mod:`jupyter_agent.artefacts.replay`);
  without a ``write_summary`` call by then, the fallback excerpt;
* the parent's usage as it is now: usage is not recorded per turn, and it is what the
  work the fork builds on cost, so a spend limit on the fork counts it.

Either way the fork gets a new ID, new timestamps, ``archived = False``, the title
given (default: the parent's title marked as a fork) and ``parent`` = the parent's ID
and ``N`` (``None`` when copied whole).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jupyter_agent.artefacts.replay import replay_state
from jupyter_agent.artefacts.turns import complete_length, cut_after_turn, turn_starts
from jupyter_agent.errors import ForkPointError
from jupyter_agent.store import ForkOrigin, SessionRecord, Store, new_session_id
from jupyter_agent.store.figure_files import copy_figures, figure_refs
from jupyter_agent.store.messages import fallback_summary
from jupyter_agent.store.records import utc_now

__all__ = ["Forked", "default_fork_title", "fork_label", "fork_record", "fork_session"]


@dataclass(frozen=True)
class Forked:
    """A fork and how it was cut.

    Attributes
    ----------
    record : SessionRecord
        The new session as saved.
    parent_turns : int
        User turns of the parent when it was forked.
    turns : int
        User turns the fork holds.
    rebuilt : bool
        True when the fork's working context was rebuilt from the transcript because
        the parent's context was compacted after the cut (see the module docstring).
    """

    record: SessionRecord
    parent_turns: int
    turns: int
    rebuilt: bool = False


def default_fork_title(parent: SessionRecord) -> str:
    """``"<parent title> (fork)"``, or ``"fork of <parent ID>"`` for an untitled parent."""
    return f"{parent.title} (fork)" if parent.title.strip() else f"fork of {parent.id}"


def fork_label(origin: ForkOrigin | None) -> str:
    """``"fork of ID after turn N"`` / ``"fork of ID"`` for listings; "" for no parent."""
    if origin is None:
        return ""
    after = f" after turn {origin.turn}" if origin.turn is not None else ""
    return f"fork of {origin.session_id}{after}"


def _cut_context(parent: SessionRecord, cut: int) -> tuple[list[dict[str, Any]], bool]:
    """The working context after a cut at transcript index ``cut``, and whether it
    had to be rebuilt from the transcript (see the module docstring)."""
    transcript, messages = parent.transcript, parent.messages
    later = [c for c in parent.compactions if c.transcript_length > cut]
    since = len(transcript) - max((c.transcript_length for c in parent.compactions), default=0)
    in_step = 0 <= since <= len(messages) and (
        since == 0 or messages[-since:] == transcript[-since:]
    )
    if not later and in_step:
        drop = len(transcript) - cut
        return list(messages[: len(messages) - drop]), False
    return list(transcript[:cut]), True


def fork_record(
    parent: SessionRecord,
    *,
    at: int | None = None,
    title: str | None = None,
    session_id: str | None = None,
    now: datetime | None = None,
) -> Forked:
    """Build the record of a fork of ``parent`` (pure; see the module docstring).

    Parameters
    ----------
    parent : SessionRecord
        The session to fork (not modified).
    at : int, optional
        Keep user turns 1 to ``at`` only. Default: copy the whole session.
    title : str, optional
        The fork's title; default :func:`default_fork_title`.
    session_id : str, optional
        The fork's ID; default a new random one.
    now : datetime, optional
        Its creation time (aware UTC); default now.

    Returns
    -------
    Forked

    Raises
    ------
    ForkPointError
        When ``at`` is not between 1 and the parent's number of user turns.
    """
    transcript = parent.transcript
    parent_turns = len(turn_starts(transcript))
    if at is not None and not 1 <= at <= parent_turns:
        raise ForkPointError(parent.id, at, parent_turns)
    when = now or utc_now()
    common: dict[str, Any] = {
        "id": session_id or new_session_id(),
        "created_at": when,
        "updated_at": when,
        "title": default_fork_title(parent) if title is None else title,
        "archived": False,
        "parent": ForkOrigin(session_id=parent.id, turn=at),
    }
    if at is None:
        end = complete_length(transcript)
        drop = len(transcript) - end
        update: dict[str, Any] = {
            "transcript": transcript[:end],
            "messages": parent.messages[: len(parent.messages) - drop],
        }
        rebuilt, turns = False, len(turn_starts(transcript[:end]))
    else:
        cut = cut_after_turn(transcript, at)
        kept = transcript[:cut]
        messages, rebuilt = _cut_context(parent, cut)
        state = parent.state
        replayed = replay_state(kept, usage=state.usage, model=state.model,
                                base_url=state.base_url)
        update = {
            "transcript": kept,
            "messages": messages,
            "compactions": [c for c in parent.compactions if c.transcript_length <= cut],
            "state": replayed.state,
            "summary": replayed.summary or fallback_summary(kept),
        }
        turns = at
    # Validated from plain data: the fork shares no object with the parent record.
    record = SessionRecord.model_validate({**parent.model_dump(), **update, **common})
    return Forked(record, parent_turns, turns, rebuilt)


def fork_session(
    store: Store, session_id: str, *, at: int | None = None, title: str | None = None
) -> Forked:
    """Fork a saved session into a new one in ``store``.

    The parent is read without its lease and never written: forking works while
    another kernel runs the parent. The fork is added with ``store.create_session(record=...)``.

    Parameters
    ----------
    store : Store
        Where the parent is read and the fork is saved.
    session_id : str
        The parent.
    at : int, optional
        Keep user turns 1 to ``at`` only (see :func:`fork_record`).
    title : str, optional

    Returns
    -------
    Forked

    Raises
    ------
    InvalidSessionIdError, SessionNotFoundError, CorruptSessionError
        For the parent.
    ForkPointError
        When ``at`` names no user turn of the parent.
    SessionLockedError, OSError
        From saving the fork or copying the figures its messages refer to (a figure the
        parent no longer has is left out).
    """
    parent = store.load_session(session_id)
    forked = fork_record(parent, at=at, title=title)
    while store.exists(forked.record.id):  # a fresh random ID: practically never taken
        forked = fork_record(parent, at=at, title=title)
    store.create_session(record=forked.record)
    # the figures its messages refer to go with it
    copy_figures(store, session_id, store, forked.record.id,
                 (str(ref["id"]) for ref in figure_refs(forked.record.transcript)))
    return forked
