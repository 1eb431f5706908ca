"""Binding an agent's working context and checkpoint to a session in a store.

:class:`SessionPersistence` is the part of :class:`~jupyter_agent.agent.loop.Agent`
that talks to the :class:`~jupyter_agent.store.SessionStore`: creating a session with
its system message (the notes included), resuming one, the save point
(``save_messages``), the checkpoint (``save_state``), tool-pair repair and the
fallback summary. Without a store (or session ID) every method is a no-op on disk
and the session lives in memory only.

Every message enters ``messages`` through :meth:`SessionPersistence._append`, which
normalizes it with :func:`~jupyter_agent.store.to_message_dict` -- so the in-memory
working context always equals what the store saved, and ``save_messages``' prefix
check holds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import openai

from jupyter_agent.agent.context import repair_tool_pairs
from jupyter_agent.agent.prompts import DEFAULT_SYSTEM_PROMPT, build_system_prompt
from jupyter_agent.store import SessionState, Store, to_message_dict

__all__ = ["MEMORY_REPAIR", "RESUME_REPAIR", "SessionPersistence"]

RESUME_REPAIR = (
    "result unknown: the session ended while this tool batch was running; "
    "check before repeating it"
)
"""The synthetic result given on resume to a saved tool call without a result.

The process that saved the call died (e.g. SIGKILL) somewhere between saving the
assistant message and saving the batch's results: the call may or may not have run,
so the model is told to check rather than that it was not executed."""

MEMORY_REPAIR = "not executed: this tool call had no result when the next model request was made"
"""The synthetic result for an unanswered call found in a live agent's memory (the
agent itself never ran it: every batch it runs is answered in full)."""


class SessionPersistence:
    """Mixin: the store-facing half of the agent (see the module docstring)."""

    store: Store | None
    session_id: str | None
    messages: list[dict[str, Any]]
    state: SessionState
    model: str
    client: openai.OpenAI
    _has_summary: bool

    def _create(self, system_prompt: str | None, title: str, project_root: str | None) -> None:
        base = DEFAULT_SYSTEM_PROMPT if system_prompt is None else system_prompt
        project = user = ""
        if self.store is not None:
            project, user = self.store.read_notes("project"), self.store.read_notes("user")
        system = build_system_prompt(base, project_notes=project, user_notes=user)
        self.messages = [to_message_dict({"role": "system", "content": system})]
        if self.store is not None:
            self.session_id = self.store.create_session(
                self.messages, session_id=self.session_id, title=title, project_root=project_root
            )

    def _resume(self) -> None:
        assert self.store is not None and self.session_id is not None
        with self.store.lease(self.session_id):
            record = self.store.load_session(self.session_id)
            self.messages = list(record.messages)
            self.state = record.state.model_copy(deep=True)
            self._has_summary = bool(record.summary.strip())
            self._repair(RESUME_REPAIR)

    @contextlib.contextmanager
    def _lease(self) -> Iterator[None]:
        if self.store is None or self.session_id is None:
            yield
            return
        with self.store.lease(self.session_id):
            yield

    def _save(self) -> None:
        if self.store is not None and self.session_id is not None:
            self.store.save_messages(self.session_id, self.messages)

    def _checkpoint(self) -> None:
        if self.store is not None and self.session_id is not None:
            self.state.model = self.model
            self.state.base_url = str(self.client.base_url)
            self.store.save_state(self.session_id, self.state)

    def _append(self, *messages: dict[str, Any]) -> None:
        self.messages.extend(to_message_dict(m) for m in messages)

    def _repair(self, reason: str) -> None:
        """Restore tool-pair integrity and record the change (see the module docstring)."""
        repaired, report = repair_tool_pairs(self.messages, reason)
        if not report.changed:
            return
        if self.store is not None and self.session_id is not None:
            if report.appended_only:
                self.store.save_messages(self.session_id, repaired)
            else:
                self.store.compact(
                    self.session_id, repaired, summary=report.describe(), replaced=report.dropped
                )
        self.messages = repaired

    def _after_turn(self) -> None:
        """Fallback summary when the session still has none (spec: "Session Summaries")."""
        if self.store is None or self.session_id is None or self._has_summary:
            return
        self._has_summary = bool(self.store.ensure_summary(self.session_id).strip())
