"""A session's conversation: the working context, its checkpoint and their saves.

:class:`Conversation` holds the session's lease from ``create``/``open`` to ``close``
and reads the record once; without a store it lives in memory. ``replace`` records a
compaction (the transcript keeps the replaced messages); :func:`drop_old_images` is the
cheaper first step of one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from jupyter_agent.agent.working_context import (
    DEFAULT_SYSTEM_PROMPT,
    NOTES_CAP,
    NotesRead,
    build_system_prompt,
    estimate_tokens,
    read_session_notes,
    repair_tool_pairs,
    tool_calls_run,
)
from jupyter_agent.errors import FigureNotFoundError
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
from jupyter_agent.store.records import check_figure, utc_now

RESUME_REPAIR = ("result unknown: the session ended while this tool batch was running; "
                 "check before repeating it")

MEMORY_REPAIR = "not executed: this tool call had no result when the next model request was made"


class Conversation:
    """The working messages and checkpoint of one session; ``Conversation([...])`` is an
    in-memory one. ``notes`` says which notes a session ``create`` started got."""

    def __init__(self, messages: Sequence[Any] = ()) -> None:
        self.messages: list[dict[str, Any]] = [to_message_dict(m) for m in messages]
        self.state = SessionState()
        self.store: Store | None = None
        self.session_id: str | None = None
        self.has_summary = self._leased = False
        self._record: SessionRecord | None = None
        self._saved_len = len(self.messages)
        self._saved_state = self.state.model_copy(deep=True)
        # (tokens, n): the endpoint's count for messages[:n] (tool schemas included)
        self.reported: tuple[int, int] | None = None
        self._in_order = 0  # messages[:_in_order] have intact tool pairs (see repair)
        self._figures: dict[str, FigureData] = {}  # in memory only (no store)
        self.notes = NotesRead()  # the notes a new session's system prompt got

    @classmethod
    def create(cls, store: Store | None, *, session_id: str | None = None,
               system_prompt: str | None = None, title: str = "",
               project_root: str | None = None, notes_cap: int = NOTES_CAP) -> Conversation:
        """Start a new session whose first message is the system prompt with the notes (a
        note over ``notes_cap`` bytes, or one that may not be read, is left out).

        Raises
        ------
        InvalidSessionIdError, SessionLockedError, OSError
            From the store; the lease is released again.
        FileExistsError
            A session ``session_id`` exists.
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
        with conversation._holding(store, sid):
            store.create_session(conversation.messages, session_id=sid, title=title,
                                 project_root=project_root)
        return conversation

    @classmethod
    def open(cls, store: Store, session_id: str) -> Conversation:
        """Resume a saved session: take its lease, then read its record (once). Calls a
        dead process left without results are answered; the tool-call counter is raised
        to what the transcript shows as run.

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError
            Before any lease is taken.
        SessionLockedError, CorruptSessionError, OSError
            From the store; the lease is released again.
        """
        if not store.exists(session_id):
            store.load_session(session_id)  # raises SessionNotFoundError, naming the path
        conversation = cls()
        with conversation._holding(store, session_id):
            record = store.load_session(session_id)
            conversation.messages = list(record.messages)
            conversation._saved_len = len(record.messages)
            conversation.state = record.state.model_copy(deep=True)
            conversation._saved_state = record.state.model_copy(deep=True)
            conversation.has_summary = bool(record.summary.strip())
            conversation._record = record
            ran = tool_calls_run(record.transcript)  # calls a lost checkpoint missed count
            if ran > conversation.state.tool_calls:
                conversation.state.tool_calls = ran
                conversation.save()
            conversation.repair(RESUME_REPAIR)
        return conversation

    @contextlib.contextmanager
    def _holding(self, store: Store, session_id: str) -> Iterator[None]:
        """Take the lease, kept after the block (until :meth:`close`) unless it fails."""
        store.acquire_lease(session_id)
        self.store, self.session_id, self._leased = store, session_id, True
        try:
            yield
        except BaseException:
            self.close()
            raise

    @property
    def closed(self) -> bool:
        """True after :meth:`close` (never for an in-memory conversation)."""
        return self.store is not None and not self._leased

    def close(self) -> None:
        """Release the session's lease; idempotent. Nothing is written."""
        if self._leased and self.store is not None and self.session_id is not None:
            self._leased = False
            self.store.release_lease(self.session_id)

    def lease(self) -> contextlib.AbstractContextManager[None]:
        """Re-enter the lease for a block (a turn): fails at once if it was lost."""
        if self.store is None or self.session_id is None:
            return contextlib.nullcontext()
        return holding(self.store, self.session_id)

    def append(self, *messages: Any) -> None:
        """Add messages to the working context (normalized to the stored format)."""
        self.messages.extend(to_message_dict(m) for m in messages)

    def save(self) -> None:
        """One save point: new messages and the checkpoint, in one store call if either
        changed; nothing when neither did.

        Raises
        ------
        ContextMismatchError, SessionLockedError, CorruptSessionError, OSError
            Nothing is recorded as saved (the next save retries); on a mismatch (the saved
            working context is not a prefix of this one) nothing is written.
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

    def take_back(self, message: dict[str, Any]) -> None:
        """Remove ``message`` from the end of the working context if it was never saved."""
        if len(self.messages) > self._saved_len and self.messages[-1] is message:
            self.messages.pop()
            self._in_order = min(self._in_order, len(self.messages))

    def replace(self, messages: Sequence[Any], *, summary: str, replaced: int) -> None:
        """Replace the working context (compaction, repair); the transcript keeps the
        originals and the store records a compaction event."""
        new = [to_message_dict(m) for m in messages]
        if self.store is not None and self.session_id is not None:
            self.save()
            self.store.compact(self.session_id, new, summary=summary, replaced=replaced)
        self.messages = new
        self._saved_len = len(new)
        self.reported = None
        self._in_order = 0
        self.save()

    def repair(self, reason: str) -> None:
        """Give every tool call a result (``reason``) and drop orphan results, saved; only
        messages added since the last check are looked at."""
        repaired, report = repair_tool_pairs(self.messages, reason, start=self._in_order)
        if report.changed and report.appended_only:
            self.messages = repaired
            self.save()
        elif report.changed:
            self.replace(repaired, summary=report.describe(), replaced=report.dropped)
        self._in_order = len(self.messages)

    def ensure_summary(self) -> None:
        """Write the fallback summary if the session has none."""
        if self.store is None or self.session_id is None or self.has_summary:
            return
        self.has_summary = bool(ensure_summary(self.store, self.session_id).strip())

    def update(self, **fields: Any) -> None:
        """Set the session's ``title`` and/or ``archived`` (saved at once, as ``Store.update``)."""
        if self.store is not None and self.session_id is not None:
            self.store.update(self.session_id, **fields)
            if self._record is not None:
                self._record = self._record.model_copy(update=fields)

    def record(self) -> SessionRecord:
        """The session's record as this conversation knows it, e.g. for a recap."""
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

    def save_figure(self, figure_id: str, data: bytes, media_type: str) -> None:
        """Keep a figure with the session (in memory without a store)."""
        if self.store is None or self.session_id is None:
            check_figure(figure_id, data, media_type)
            self._figures[figure_id] = FigureData(data, media_type)
            return
        self.store.save_figure(self.session_id, figure_id, data, media_type)

    def read_figure(self, figure_id: str) -> FigureData:
        """``FigureNotFoundError`` when the session has no figure ``figure_id``."""
        if self.store is not None and self.session_id is not None:
            return self.store.read_figure(self.session_id, figure_id)
        if figure_id not in self._figures:
            raise FigureNotFoundError("(in memory)", figure_id, "memory")
        return self._figures[figure_id]

    def estimated_tokens(self) -> int:
        """The last reported count plus ~4 characters per token for the messages since."""
        tokens, count = self.reported or (None, 0)
        return estimate_tokens(self.messages, base_tokens=tokens, base_len=count)


def drop_old_images(conversation: Conversation) -> int:
    """Drop the figure references of the tool messages before the newest user message
    (their text still names the figures), recorded like a compaction; how many."""
    messages = conversation.messages
    newest = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
    old = {i for i in range(newest) if messages[i].get("figures") is not None}
    if not old:
        return 0
    dropped = sum(len(refs) if isinstance(refs := messages[i]["figures"], list) else 1
                  for i in old)
    kept = [{k: v for k, v in m.items() if k != "figures"} if i in old else m
            for i, m in enumerate(messages)]
    conversation.replace(kept, replaced=len(old), summary=(
        f"[jupyter-agent] The images of {dropped} earlier figure(s) were dropped from the "
        "working context; the tool results still name them and the transcript keeps them."))
    return dropped
