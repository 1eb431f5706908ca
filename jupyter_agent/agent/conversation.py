"""A session's conversation: working messages, checkpointed state, and their persistence.

:class:`Conversation` is the one owner of a saved session while an agent works on it:

- **The lease.** :meth:`Conversation.create` and :meth:`Conversation.open` take the
  session's lease (``store.acquire_lease``) and hold it until :meth:`close`; nothing
  else in the agent or the controller takes or counts it. The OS frees it if the
  process dies.
- **One read per resume.** :meth:`open` loads the record once, after taking the lease;
  the working context, the checkpoint, the summary flag and the recap
  (:meth:`record`) all come from that one read.
- **One store call per save point.** :meth:`save` records the messages appended since
  the last save *and* the checkpoint, when either changed, with one
  ``store.save(session_id, messages, state)``; when nothing changed it
  does not call the store at all.
- **The stored format.** Every message enters through :meth:`append`, which normalizes
  it with :func:`~jupyter_agent.store.to_message_dict` (plain Chat Completions JSON, no
  lone surrogates), so the working context in memory always equals what was saved.
- **Figures.** :meth:`save_figure` keeps a figure with the session (``store.save_figure``,
  under the lease) before any message refers to it; :meth:`read_figure` reads it back.
  An in-memory conversation keeps them in memory.

Without a store the conversation lives in memory and every persistence method is a
no-op. Everything is typed against the :class:`~jupyter_agent.store.Store` protocol.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from jupyter_agent.agent.context import estimate_tokens, repair_tool_pairs
from jupyter_agent.agent.prompts import (
    DEFAULT_SYSTEM_PROMPT,
    NOTES_CAP,
    NotesRead,
    build_system_prompt,
    read_session_notes,
)
from jupyter_agent.agent.reconcile import reconcile_counters
from jupyter_agent.store import (
    FigureData,
    SessionRecord,
    SessionState,
    Store,
    ensure_summary,
    holding,
    new_session_id,
    to_message_dict,
)
from jupyter_agent.store.records import utc_now

__all__ = ["MEMORY_REPAIR", "RESUME_REPAIR", "Conversation"]

RESUME_REPAIR = (
    "result unknown: the session ended while this tool batch was running; "
    "check before repeating it"
)
"""The synthetic result given on resume to a saved tool call without a result: the
process that saved the call died before saving the batch's results, so the call may or
may not have run."""

MEMORY_REPAIR = "not executed: this tool call had no result when the next model request was made"
"""The synthetic result for an unanswered call found in a live agent's memory (the agent
never ran it: every batch it runs is answered in full)."""


class Conversation:
    """The working messages and checkpoint of one session (see the module docstring).

    Build one with :meth:`create`, :meth:`open` or ``Conversation([...])`` (in memory).

    Parameters
    ----------
    messages : sequence of dict
        The working context.
    state : SessionState, optional
        The checkpoint (a copy is kept).

    Attributes
    ----------
    messages : list of dict
        The working context, in the stored (Chat Completions) format.
    state : SessionState
        Scratchpad, todos, tool-call count, usage, and the model, endpoint and API the
        session last used; changed in place by the agent and its tools.
    store : Store or None
    session_id : str or None
    has_summary : bool
        Whether the session has a summary (so the fallback is not needed).
    notes : NotesRead
        For a session :meth:`create` started: the notes its system prompt got and
        those left out (empty otherwise).
    """

    def __init__(self, messages: Sequence[Any] = (), state: SessionState | None = None) -> None:
        self.messages: list[dict[str, Any]] = [to_message_dict(m) for m in messages]
        self.state = SessionState() if state is None else state.model_copy(deep=True)
        self.store: Store | None = None
        self.session_id: str | None = None
        self.has_summary = False
        self._leased = False
        self._record: SessionRecord | None = None
        self._saved_len = len(self.messages)
        self._saved_state = self.state.model_copy(deep=True)
        self._reported_tokens: int | None = None
        self._reported_len = 0
        self._in_order = 0  # messages[:_in_order] have intact tool pairs (see repair)
        self._figures: dict[str, FigureData] = {}  # in memory only (no store)
        self.notes = NotesRead()  # the notes a new session's system prompt got

    # ---- starting -------------------------------------------------------------------
    @classmethod
    def create(cls, store: Store | None, *, session_id: str | None = None,
               system_prompt: str | None = None, title: str = "",
               project_root: str | None = None, notes_cap: int = NOTES_CAP) -> Conversation:
        """Start a new session whose first message is the system prompt with the notes.

        Parameters
        ----------
        store : Store or None
            Where the session is saved; ``None``: in memory only.
        session_id : str, optional
            Default: a new random ID.
        system_prompt : str, optional
            Replaces the default system prompt (the notes are added after it).
        title, project_root : optional
            Saved with the session.
        notes_cap : int
            Bytes a note may have; a larger one (or one that may not be read) is left
            out, never an error: :attr:`notes` says which were used and which left out.

        Raises
        ------
        InvalidSessionIdError, SessionLockedError, OSError
            From the store; the lease is released again.
        FileExistsError
            When a session with ``session_id`` exists.
        """
        base = DEFAULT_SYSTEM_PROMPT if system_prompt is None else system_prompt
        notes = read_session_notes(store, notes_cap)
        system = build_system_prompt(base, project_notes=notes.used.get("project", ""),
                                     user_notes=notes.used.get("user", ""))
        conversation = cls([{"role": "system", "content": system}])
        conversation.notes = notes
        if store is None:
            return conversation
        sid = new_session_id() if session_id is None else session_id
        conversation._hold(store, sid)
        try:
            store.create_session(conversation.messages, session_id=sid, title=title,
                                 project_root=project_root)
        except BaseException:
            conversation.close()
            raise
        return conversation

    @classmethod
    def open(cls, store: Store, session_id: str, *, repair: bool = True) -> Conversation:
        """Resume a saved session: take its lease, then read its record (once).

        Parameters
        ----------
        store : Store
        session_id : str
        repair : bool
            Answer tool calls that a dead process left without results
            (:data:`RESUME_REPAIR`), recording the repair in the store.

        The tool-call counter is raised to the calls the transcript shows as run when
        the checkpoint missed some (:mod:`~jupyter_agent.agent.reconcile`), and saved.

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError
            Before any lease is taken (no lock file is created for an unknown ID).
        SessionLockedError
            When another process or store object holds the session.
        CorruptSessionError, OSError
            From the store; the lease is released again.
        """
        if not store.exists(session_id):
            store.load_session(session_id)  # raises SessionNotFoundError, naming the path
        conversation = cls()
        conversation._hold(store, session_id)
        try:
            record = store.load_session(session_id)
            conversation.messages = list(record.messages)
            conversation._saved_len = len(record.messages)
            conversation.state = record.state.model_copy(deep=True)
            conversation._saved_state = record.state.model_copy(deep=True)
            conversation.has_summary = bool(record.summary.strip())
            conversation._record = record
            if reconcile_counters(conversation.state, record.transcript):
                conversation.save()  # calls a lost checkpoint missed count
            if repair:
                conversation.repair(RESUME_REPAIR)
        except BaseException:
            conversation.close()
            raise
        return conversation

    def _hold(self, store: Store, session_id: str) -> None:
        store.acquire_lease(session_id)  # held until close()
        self.store, self.session_id, self._leased = store, session_id, True

    # ---- the lease --------------------------------------------------------------------
    @property
    def saved(self) -> bool:
        """Whether this conversation is saved in a store."""
        return self.store is not None and self.session_id is not None

    @property
    def closed(self) -> bool:
        """True after :meth:`close` (never for an in-memory conversation)."""
        return self.store is not None and not self._leased

    def close(self) -> None:
        """Release the session's lease; idempotent. Nothing is written."""
        if self._leased and self.store is not None and self.session_id is not None:
            self._leased = False
            self.store.release_lease(self.session_id)

    @contextlib.contextmanager
    def lease(self) -> Iterator[None]:
        """Re-enter the lease for a block (a turn): fails at once if it was lost."""
        if self.store is None or self.session_id is None:
            yield
            return
        with holding(self.store, self.session_id):
            yield

    # ---- messages and saves ----------------------------------------------------------
    def append(self, *messages: Any) -> None:
        """Add messages to the working context (normalized to the stored format)."""
        self.messages.extend(to_message_dict(m) for m in messages)

    def save(self) -> None:
        """One save point: new messages and the checkpoint, in one store call if either
        changed; nothing when neither did.

        Raises
        ------
        ContextMismatchError
            The saved working context is not a prefix of this one; nothing is written.
        SessionLockedError, CorruptSessionError, OSError
            From the store; nothing is recorded as saved, so the next save retries.
        """
        if self.store is None or self.session_id is None:
            return
        grown = len(self.messages) > self._saved_len
        changed = self.state != self._saved_state
        if not grown and not changed:
            return
        self.store.save(self.session_id, self.messages, self.state if changed else None)
        self._saved_len = len(self.messages)
        if changed:
            self._saved_state = self.state.model_copy(deep=True)

    def take_back(self, message: dict[str, Any]) -> bool:
        """Remove ``message`` from the end of the working context if it was never saved
        (a save that failed).

        Returns
        -------
        bool
            Whether it was removed.
        """
        if len(self.messages) > self._saved_len and self.messages[-1] is message:
            self.messages.pop()
            self._in_order = min(self._in_order, len(self.messages))
            return True
        return False

    def replace(self, messages: Sequence[Any], *, summary: str, replaced: int) -> None:
        """Replace the working context (compaction, repair); the transcript keeps the
        originals and the store records a compaction event.

        Messages appended since the last save are saved first, with the checkpoint (and
        so the usage of the summarizing call), so they reach the transcript and a kill
        at any later step undercounts nothing. Then the compaction is recorded.
        """
        new = [to_message_dict(m) for m in messages]
        if self.store is not None and self.session_id is not None:
            self.save()
            self.store.compact(self.session_id, new, summary=summary, replaced=replaced)
        self.messages = new
        self._saved_len = len(new)
        self._reported_tokens, self._reported_len = None, 0
        self._in_order = 0
        self.save()

    def repair(self, reason: str) -> bool:
        """Give every tool call a result and drop orphan results.

        Only the messages added since the last check are looked at (and the tool batch
        they may continue), so checking before every model request stays cheap. Code
        that changes :attr:`messages` other than by :meth:`append` or :meth:`replace`
        must not remove or reorder messages before the end of the last check.

        A repair that only appends is saved as a save point; one that removes messages
        is recorded as a compaction ("repaired tool pairs: ...").

        Parameters
        ----------
        reason : str
            Text of the synthetic results.

        Returns
        -------
        bool
            Whether anything changed.
        """
        repaired, report = repair_tool_pairs(self.messages, reason, start=self._in_order)
        if not report.changed:
            self._in_order = len(self.messages)
            return False
        if report.appended_only:
            self.messages = repaired
            self.save()
        else:
            self.replace(repaired, summary=report.describe(), replaced=report.dropped)
        self._in_order = len(self.messages)
        return True

    def ensure_summary(self) -> None:
        """Write the fallback summary if the session has none."""
        if self.store is None or self.session_id is None or self.has_summary:
            return
        self.has_summary = bool(ensure_summary(self.store, self.session_id).strip())

    def set_title(self, title: str) -> None:
        """Set the session's title (saved at once)."""
        if self.store is not None and self.session_id is not None:
            self.store.update(self.session_id, title=title)
            if self._record is not None:
                self._record = self._record.model_copy(update={"title": title})

    def set_archived(self, archived: bool) -> None:
        """Archive or unarchive the session (saved at once)."""
        if self.store is not None and self.session_id is not None:
            self.store.update(self.session_id, archived=archived)
            if self._record is not None:
                self._record = self._record.model_copy(update={"archived": archived})

    def record(self) -> SessionRecord:
        """The session's record as this conversation knows it, e.g. for a recap.

        For a resumed session: the record read by :meth:`open` with the current working
        context, checkpoint, title and archive flag (no second read). Otherwise it is
        read from the store.

        Raises
        ------
        ValueError
            For an in-memory conversation.
        """
        if self.store is None or self.session_id is None:
            raise ValueError("an in-memory conversation has no saved record")
        if self._record is None:
            return self.store.load_session(self.session_id)
        loaded = self._record
        transcript = list(loaded.transcript)
        if self.messages[: len(loaded.messages)] == loaded.messages:
            transcript += self.messages[len(loaded.messages):]
        return loaded.model_copy(update={
            "messages": list(self.messages), "transcript": transcript,
            "state": self.state.model_copy(deep=True),
            "updated_at": utc_now() if self.messages != loaded.messages else loaded.updated_at,
        })

    # ---- figures ------------------------------------------------------------
    def save_figure(self, figure_id: str, data: bytes, media_type: str) -> None:
        """Keep a figure with the session (in memory without a store).

        Raises
        ------
        InvalidFigureError, SessionLockedError, OSError
            From the store (nothing refers to the figure yet).
        """
        if self.store is None or self.session_id is None:
            from jupyter_agent.store.figure_files import check_figure

            check_figure(figure_id, data, media_type)
            self._figures[figure_id] = FigureData(data, media_type)
            return
        self.store.save_figure(self.session_id, figure_id, data, media_type)

    def read_figure(self, figure_id: str) -> FigureData:
        """A figure of the session.

        Raises
        ------
        FigureNotFoundError
            When the session has no such figure.
        UnsafePathError, OSError
            From the store.
        """
        if self.store is None or self.session_id is None:
            found = self._figures.get(figure_id)
            if found is None:
                from jupyter_agent.errors import FigureNotFoundError

                raise FigureNotFoundError("(in memory)", figure_id, "memory")
            return found
        return self.store.read_figure(self.session_id, figure_id)

    # ---- size --------------------------------------------------------------------------
    def note_reported_tokens(self, tokens: int) -> None:
        """The endpoint counted ``tokens`` (prompt + completion) for the whole working
        context as it is now; later estimates start from there."""
        self._reported_tokens, self._reported_len = tokens, len(self.messages)

    @property
    def counted(self) -> bool:
        """Whether the endpoint has counted the working context (its reported count then
        covers the tool schemas too)."""
        return self._reported_tokens is not None

    def estimated_tokens(self) -> int:
        """Estimated size of the working context in tokens: the last reported count plus
        ~4 characters per token for the messages since (all estimated when nothing was
        reported since a resume or a compaction)."""
        return estimate_tokens(self.messages, base_tokens=self._reported_tokens,
                               base_len=self._reported_len)
