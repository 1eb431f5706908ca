"""The plain-Python API behind the magics, the sessions panel and tests.

The active session's agent holds its lease (the controller takes none); a new session is
made active before the previous one is closed, so a failed resume leaves the old one.
Options of a session: explicit > those this kernel last used for it > (model, API,
vision) what its checkpoint remembers > the settings. The endpoint is never taken from a
session file; the API key is never kept (only a hash, to notice a change).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jupyter_agent import client
from jupyter_agent.active import ActiveSession, HandedCell, Resumed, SessionChange, UsageReport
from jupyter_agent.artefacts.fork import Forked, fork_record
from jupyter_agent.artefacts.steps import Call, Request, steps
from jupyter_agent.errors import JupyterAgentError, ModelNotConfiguredError
from jupyter_agent.notebook import CellLog
from jupyter_agent.project import Project, newest_session
from jupyter_agent.settings import OPTIONS, SessionOptions, Settings
from jupyter_agent.store import new_session_id, validate_session_id
from jupyter_agent.store.notes import NOTE_FILES, unseen_notes

if TYPE_CHECKING:
    import openai

    from jupyter_agent.active import TurnResult
    from jupyter_agent.agent.adapters import Model
    from jupyter_agent.agent.conversation import Conversation
    from jupyter_agent.agent.working_context import NotesRead
    from jupyter_agent.artefacts.export import Exported
    from jupyter_agent.store import FigureData, SessionRecord, SessionState, Store, TodoItem


class AgentController:
    """The active session of one kernel and every operation on sessions.

    ``settings`` returns the current :class:`Settings`; ``environ`` defaults to
    :data:`os.environ`; ``cwd`` (default: now) and its project root are resolved once.
    """

    def __init__(self, settings: Callable[[], Settings], *, shell: Any = None,
                 environ: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None,
                 show_question: Callable[..., Any] | None = None) -> None:
        self._settings = settings
        self._shell = shell
        self._environ = environ
        self._show_question = show_question
        self.project = Project(settings, shell=shell, environ=environ, cwd=cwd)
        self._active: ActiveSession | None = None
        self._client: tuple[tuple[str, str], openai.OpenAI] | None = None  # by endpoint_id
        self._remembered: dict[str, SessionOptions] = {}
        self._last_options: SessionOptions | None = None  # of the latest active session
        #: ``(session ID, "deleted" or "archived")`` when the active session ended so and
        #: no session was made active since.
        self.ended: tuple[str, str] | None = None
        #: The user's cells, as the notebook tools and ``@`` references read them.
        self.cells = CellLog(shell)
        if shell is not None:
            self.cells.start()
        #: Lines about the notes of the session :meth:`new_session` started last: notes
        #: new to this user (they instruct the model) and notes left out.
        self.notes_notice: list[str] = []

    def _store_for(self, session_id: str) -> Store:
        if self._active is not None and self._active.session_id == session_id:
            return self._active.store
        return self.project.store

    @property
    def active_session_id(self) -> str | None:
        return None if self._active is None else self._active.session_id

    def _require_active(self) -> ActiveSession:
        if self._active is None:
            raise JupyterAgentError(
                "no active session: start one with %agent_new or pick one with %agent_resume"
            )
        return self._active

    def _model(self, settings: Settings) -> Model:
        # one client per endpoint and key: building one takes ~20 ms
        ident = client.endpoint_id(settings, self._environ)
        if self._client is None or self._client[0] != ident:
            self._client = (ident, client.build_client(settings, self._environ))
        return client.build_model(settings, self._environ, client=self._client[1])

    def _start(self, model: Model, conversation: Conversation, options: SessionOptions,
               settings: Settings) -> None:
        # on failure ``conversation`` is closed and the previous session stays active
        from jupyter_agent.agent.loop import Agent  # the agent imports openai (~0.6 s)

        try:
            agent = Agent(model, conversation, config=settings.agent_config(),
                          shell=self._shell, show_question=self._show_question,
                          cells=self.cells)
        except BaseException:
            conversation.close()
            raise
        assert conversation.store is not None and conversation.session_id is not None
        previous = self._active
        self._active = ActiveSession(conversation.session_id, conversation.store, options,
                                     agent, client.model_key(settings, self._environ),
                                     self._model)
        if previous is not None:
            previous.agent.close()

    def _remember(self, session_id: str, options: SessionOptions) -> None:
        # for its next resume here, and for a session ensure_session() starts
        self._remembered[session_id] = self._last_options = replace(options, title=None)
        self.ended = None

    def new_session(self, options: SessionOptions | None = None) -> str:
        """Create a session, make it active and return its ID.

        Raises
        ------
        UnsafeDirectoryError
            The memory directory may not be used (checked first; nothing is created).
        ModelNotConfiguredError
            No model is configured (nothing is created).
        """
        from jupyter_agent.agent.conversation import Conversation  # imports openai

        options = options or SessionOptions()
        settings = self._settings().with_options(options)
        store = self.project.store
        store.exists(new_session_id())  # checks the memory directory, creates nothing
        model = self._model(settings)  # fails before anything is created
        conversation = Conversation.create(store, title=options.title or "",
                                           project_root=str(self.project.root),
                                           notes_cap=settings.max_notes_kib * 1024)
        self._start(model, conversation, options, settings)
        assert conversation.session_id is not None
        self._remember(conversation.session_id, options)
        self.notes_notice = self._notes_notice(conversation.notes)
        return conversation.session_id

    def _notes_notice(self, notes: NotesRead) -> list[str]:
        from jupyter_agent.agent.working_context import format_bytes  # imports openai

        folder = self.project.memory_dir.resolve()
        files = {folder / NOTE_FILES[kind]: text for kind, text in notes.used.items()}
        new = unseen_notes(files, self._environ)
        lines = []
        if new:
            named = ", ".join(f"{path.name} ({format_bytes(len(files[path].encode()))})"
                              for path in new)
            lines.append(f"This session's instructions include notes new to you: {named}, in "
                         f"{new[0].parent} — read them if you did not write them.")
        return lines + notes.left_out

    def ensure_session(self) -> str | None:
        """Start a session with the options of this kernel's latest one (not its title)
        if none is active; return the new ID, or ``None`` if one was active.

        Raises
        ------
        JupyterAgentError
            No model is configured (saying why no session is active).
        """
        if self._active is not None:
            return None
        ended, options = self.ended, self._last_options or SessionOptions()
        try:
            return self.new_session(options)
        except ModelNotConfiguredError as err:
            if ended is None:
                raise
            raise JupyterAgentError(
                f"no active session (session {ended[0]} was {ended[1]}), and a new one cannot "
                f"start: {err}. Or pick a saved session with %agent_resume ID "
                "(%agent_sessions lists them)") from err

    def _resume_options(self, session_id: str, chosen: SessionOptions,
                        state: SessionState) -> tuple[SessionOptions, str]:
        # The record's values are data: its endpoint is only compared with the
        # configured one, its model kept only for that endpoint, its API only if known,
        # its vision mode only if this kernel does not turn images off.
        settings = self._settings()
        saved_url = client.saved_base_url(state.base_url).rstrip("/")  # the client adds a "/"
        configured = (client.saved_base_url(chosen.base_url) if chosen.base_url is not None
                      else client.configured_base_url(settings, self._environ)).rstrip("/")
        note, said = "", client.describe_endpoint
        if state.base_url and saved_url != configured:
            if not configured:
                raise ModelNotConfiguredError(
                    f"session {session_id} last used the endpoint {said(saved_url)}, and this "
                    "kernel configures none (a session file never chooses where the API key "
                    "goes): resume it with --base-url URL naming the endpoint you trust, or "
                    "set AgentMagics.base_url or $OPENAI_BASE_URL")
            note = (f"This session last used {said(saved_url)}; it now talks to "
                    f"{said(configured)}, the endpoint this kernel configures.")
        model = chosen.model
        if model is None and state.model and saved_url == configured:
            model = state.model
        values: dict[str, Any] = {"title": None, "model": model}
        for row in OPTIONS:  # the other settings the checkpoint remembers: API, vision
            saved = getattr(state, row.name, None)
            if (not row.saved or row.name in values or getattr(chosen, row.name) is not None
                    or not saved
                    or (row.choices is not None and saved not in row.choices)):
                continue
            if row.name == "vision" and settings.vision == "off":
                continue  # a record never turns on images this kernel turned off
            values[row.name] = saved
        return replace(chosen, **values), note

    def resume(self, session_id: str | None = None,
               options: SessionOptions | None = None) -> Resumed:
        """Make a saved session (default: the newest no one else holds) the active one,
        unarchiving it; its record is read once, after its lease is taken.

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError, SessionLockedError
        ModelNotConfiguredError
            Naming what the session last used; also when it used an endpoint and this
            kernel configures none.
        """
        from jupyter_agent.agent.conversation import Conversation  # imports openai

        explicit = options or SessionOptions()
        if session_id is None:
            session_id = newest_session(self.project.store)
        session_id = validate_session_id(session_id)
        chosen = explicit.over(self._remembered.get(session_id, SessionOptions()))
        # the lease, then one read
        conversation = Conversation.open(self._store_for(session_id), session_id)
        state = conversation.state
        try:
            effective, note = self._resume_options(session_id, chosen, state)
            settings = self._settings().with_options(effective)
            try:
                model = self._model(settings)
            except ModelNotConfiguredError as err:
                raise ModelNotConfiguredError(client.not_configured_message(
                    settings, session_id=session_id, last_model=state.model,
                    last_url=client.saved_base_url(state.base_url))) from err
        except BaseException:
            conversation.close()
            raise
        self._start(model, conversation, effective, settings)
        self._remember(session_id, chosen)
        record = conversation.record()
        unarchived = record.archived
        if explicit.title is not None:
            conversation.update(title=explicit.title)
        if unarchived:
            conversation.update(archived=False)
        if explicit.title is not None or unarchived:
            record = conversation.record()
        return Resumed(record, unarchived=unarchived, endpoint_note=note)

    def ask(self, prompt: str, *, on_event: Callable[[Any], None] | None = None) -> TurnResult:
        """Run a turn of the active session; ``@`` references attach what
        ``context_privacy`` allows.

        Raises
        ------
        JupyterAgentError
            No active session; or the model endpoint failed (the prompt stays saved; the
            exception carries the turn so far as ``turn``, as a Ctrl-C does).
        """
        active = self._require_active()
        return active.ask(prompt, self._settings(), self._environ, on_event=on_event,
                          cells=self.cells)

    def compact(self, *, on_event: Callable[[Any], None] | None = None) -> bool:
        """Compact the working context now; ``False`` (and a ``Notice``) when there was
        nothing to compact or the call failed.

        Raises
        ------
        LimitExceededError
            The session reached ``max_cost_usd`` (no model call is made).
        """
        agent = self._require_active().refreshed(self._settings(), self._environ)
        return agent.compact(on_event=on_event)

    def record(self, session_id: str | None = None) -> SessionRecord:
        """A session's record (default: the active session's)."""
        sid = self._require_active().session_id if session_id is None else session_id
        return self._store_for(sid).load_session(sid)

    def read_figure(self, session_id: str, figure_id: str) -> FigureData:
        """A figure of a session, read without its lease.

        Raises
        ------
        FigureNotFoundError, InvalidSessionIdError, InvalidFigureError, UnsafePathError
        """
        return self._store_for(session_id).read_figure(session_id, figure_id)

    def set_summary(self, text: str) -> None:
        active = self._require_active()
        active.store.update(active.session_id, summary=text)

    def set_title(self, text: str) -> None:
        active = self._require_active()
        active.store.update(active.session_id, title=text)

    def usage(self) -> UsageReport:
        """Usage and limits of the active session (limits as the settings say now)."""
        active = self._require_active()
        mine, agent = active.settings(self._settings()), active.agent
        return UsageReport(active.session_id, agent.state.usage.model_copy(),
                           agent.state.tool_calls, mine.limits(),
                           context_tokens=agent.conversation.estimated_tokens(),
                           window=agent.window, context_privacy=mine.context_privacy)

    def agent_cell(self, n: int | None = None) -> HandedCell:
        """The code of the active session's ``n``-th ``run_python`` call (default: the
        last), recorded in the checkpoint as handed out.

        Raises
        ------
        JupyterAgentError
            No active session, no ``run_python`` call yet, or no call ``n``.
        SessionLockedError, OSError
            From the store while recording it.
        """
        from jupyter_agent.agent.working_context import SUMMARY_MARKER  # imports openai

        active = self._require_active()
        found: list[tuple[int, str, str]] = []  # (turn, call ID, code)
        turn = 0
        for step in steps(active.store.load_session(active.session_id)):
            if isinstance(step, Request) and not step.text.startswith(SUMMARY_MARKER):
                turn += 1
            elif isinstance(step, Call) and step.name == "run_python":
                found.append((turn, step.id, step.code or ""))
        if not found:
            raise JupyterAgentError(f"session {active.session_id} has no run_python call yet")
        if n is not None and not 1 <= n <= len(found):
            raise JupyterAgentError(f"no run_python call {n} in session {active.session_id}: "
                                    f"its calls are 1 to {len(found)}")
        number = len(found) if n is None else n
        turn, call_id, code = found[number - 1]
        conversation = active.agent.conversation
        if call_id and call_id not in conversation.state.handed_out:
            with conversation.lease():
                conversation.state.handed_out.append(call_id)
                conversation.save()
        tag = f"# from jupyter-agent session {active.session_id}, turn {turn}, call {number}"
        return HandedCell(active.session_id, turn, number, call_id, f"{tag}\n{code}")

    def todos(self) -> list[TodoItem]:
        return list(self._require_active().agent.state.todos)

    def _deactivate(self, session_id: str, why: str) -> bool:
        if self._active is None or self._active.session_id != session_id:
            return False
        active, self._active = self._active, None
        active.agent.close()
        self.ended = (session_id, why)
        return True

    def share(self, session_id: str | None, roles: Sequence[str], *,
              undo: bool = False) -> list[str]:
        """Share a session (default: the active one) read-only with database roles, or
        stop (``undo``); return the roles it is shared with now.

        Raises
        ------
        JupyterAgentError
            Not a team store, or a role is not the database's (nothing changed).
        SessionNotFoundError, SessionReadOnlyError, InvalidSessionIdError
        """
        sid = self._require_active().session_id if session_id is None else session_id
        return share_session(self._store_for(sid), sid, roles, undo=undo)

    def archive(self, session_id: str | None = None, *, undo: bool = False) -> SessionChange:
        """Archive (``undo``: unarchive) a session, default the active one; archiving the
        active session also deactivates it, so a session in use is never hidden.

        Raises
        ------
        JupyterAgentError
            The session is archived already (with ``undo``: is not archived).
        SessionNotFoundError, SessionLockedError, InvalidSessionIdError
        """
        sid = self._require_active().session_id if session_id is None else session_id
        sid = validate_session_id(sid)
        store = self._store_for(sid)
        record = store.load_session(sid)
        if record.archived != undo:
            state = "archived already" if not undo else "not archived"
            raise JupyterAgentError(
                f"session {sid} is {state}: nothing to do"
                + ("" if undo else f" (%agent_archive {sid} --undo unarchives it)"))
        store.update(sid, archived=not undo)
        was_active = not undo and self._deactivate(sid, "archived")
        return SessionChange(sid, "unarchived" if undo else "archived", was_active,
                             record.title)

    def delete(self, session_id: str) -> SessionChange:
        """Delete a session (deactivating it first if it is the active one).

        Raises
        ------
        SessionLockedError
        """
        sid = validate_session_id(session_id)
        store = self._store_for(sid)
        was_active, title = False, ""
        if self._active is not None and self._active.session_id == sid:
            # unreadable: say so before deactivating anything
            title = store.load_session(sid).title
            was_active = self._deactivate(sid, "deleted")
        else:
            with contextlib.suppress(JupyterAgentError):  # a corrupt one can be deleted
                title = store.load_session(sid).title
        store.delete_session(sid)
        self._remembered.pop(sid, None)
        return SessionChange(sid, "deleted", was_active, title)

    def fork(self, session_id: str | None = None, *, at: int | None = None,
             title: str | None = None) -> Forked:
        """Fork a session (default: the active one; read without its lease), keeping user
        turns 1 to ``at``, and resume the fork with the parent's options in this kernel.

        Raises
        ------
        ForkPointError, InvalidSessionIdError, SessionNotFoundError, CorruptSessionError
        ModelNotConfiguredError
            The fork is saved but not made active.
        """
        parent = validate_session_id(self._require_active().session_id if session_id is None
                                     else session_id)
        forked = fork_record(self._store_for(parent).load_session(parent), at=at, title=title)
        self.project.store.create_session(record=forked.record)
        self._remembered[forked.record.id] = self._remembered.get(parent, SessionOptions())
        return replace(forked, record=self.resume(forked.record.id).record)

    def export(self, session_id: str | None = None, *, fmt: str | None = None,
               output: str | os.PathLike[str] | None = None, force: bool = False) -> Exported:
        """Export a session (default: the active one) to a file, without its lease, with
        secrets (also the ``api_key_env`` variable's value) redacted.

        Raises
        ------
        ExportExistsError, ExportError, ValueError
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError
        """
        # (detect-secrets: ~0.25 s to import)
        from jupyter_agent.artefacts.export import export_record
        from jupyter_agent.artefacts.redact import secrets_from_environ

        record = self.record(session_id)
        secrets = secrets_from_environ(os.environ if self._environ is None else self._environ,
                                       [self._settings().api_key_env])
        store = self._store_for(record.id)
        return export_record(record, fmt, output, force=force, secrets=secrets,
                             figures=lambda fid: store.read_figure(record.id, fid))

    def close(self) -> None:
        """Deactivate the active session, releasing its lease (extension unload)."""
        active, self._active = self._active, None
        if active is not None:
            active.agent.close()
        self.cells.stop()
        self.project.close()


def share_session(store: Store, session_id: str, roles: Sequence[str], *,
                  undo: bool = False) -> list[str]:
    """:meth:`AgentController.share` for any store (``JupyterAgentError`` for the JSON
    files, which have nobody to share with)."""
    share = getattr(store, "share_session", None)
    if share is None:
        raise JupyterAgentError("sharing needs the team store (AgentMagics.store_url or "
                                "$JUPYTER_AGENT_STORE_URL): the JSON files are one user's")
    if not roles:
        raise JupyterAgentError("name the database roles to share with (or stop sharing with)")
    try:
        return list(share(session_id, list(roles), undo=undo))
    except ValueError as err:
        raise JupyterAgentError(str(err)) from None
