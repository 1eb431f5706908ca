"""The plain-Python API behind the magics and the sessions panel.

:class:`AgentController` owns the *active session* of one kernel: which session it is,
the :class:`~jupyter_agent.store.Store` it lives in, the options it was started with,
and the :class:`~jupyter_agent.agent.Agent` that runs it. The magics parse their
arguments and call it; the panel's Resume button calls :meth:`AgentController.resume`;
tests call it directly.

Invariants
----------
- One owner of the lease per session: the active session's
  :class:`~jupyter_agent.agent.Agent`, through its
  :class:`~jupyter_agent.agent.conversation.Conversation`, holds the session's lease for
  as long as the session is active. The controller takes no lease of its own; whenever
  it drops an agent -- switching sessions, deleting the session, :meth:`close` -- it
  closes it. The next session is made active before the previous one is closed (so a
  failed resume leaves the old one active). The operating system drops leases when the
  kernel dies.
- A resume reads the session record once (``Conversation.open``); the options, the
  agent and the recap all come from that read.
- Settings are read through a callable each time they are needed, so ``%config``
  changes apply to the next turn: the agent's config (limits, approval, streaming) is
  refreshed before every turn, and its model is rebuilt -- same session, same lease,
  nothing read from disk -- when a setting the model is built from, or the API key in
  the environment, changed.
- Options of a session (see :meth:`AgentController.resume`): explicit options of
  ``%agent_new`` / ``%agent_resume`` > the options this kernel last used for that
  session > (the settings the checkpoint remembers: model, API, vision) what the
  session last used > the settings. The endpoint is never taken from a session: it is
  what this kernel configures (options, settings, ``$OPENAI_BASE_URL``).
- The working directory and the project root are resolved once, when the controller
  is made (the extension is loaded): an ``os.chdir`` later does not switch the
  memory directory (:mod:`jupyter_agent.paths`).
- The API key is read from the environment variable named by ``api_key_env`` when a
  model is built, and handed to :class:`openai.OpenAI` only. It is never kept on a
  setting, written to a session file, printed or logged (the controller keeps only a
  hash of it, to notice that it changed).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_agent.active import ActiveSession, model_key
from jupyter_agent.client import (
    build_model,
    configured_base_url,
    describe_endpoint,
    not_configured_message,
    saved_base_url,
)
from jupyter_agent.errors import JupyterAgentError, ModelNotConfiguredError
from jupyter_agent.notebook import CellLog
from jupyter_agent.project import Project, newest_session
from jupyter_agent.settings import OPTIONS, SessionOptions, Settings
from jupyter_agent.ui.kernel import is_jupyter, kernel_label
from jupyter_agent.ui.results import (
    HandedCell,
    Resumed,
    SessionChange,
    TurnResult,
    UsageReport,
)

if TYPE_CHECKING:
    from jupyter_agent.agent import Agent
    from jupyter_agent.agent.conversation import Conversation
    from jupyter_agent.agent.model import Model
    from jupyter_agent.agent.prompts import NotesRead
    from jupyter_agent.artefacts.export import Exported
    from jupyter_agent.artefacts.fork import Forked
    from jupyter_agent.artefacts.search import SearchHit
    from jupyter_agent.store import (
        FigureData,
        SessionListing,
        SessionRecord,
        SessionState,
        Store,
        TodoItem,
    )

__all__ = ["AgentController", "HandedCell", "Resumed", "SessionChange", "SessionOptions",
           "Settings", "TurnResult", "UsageReport", "kernel_label"]


# --------------------------------------------------------------------------- controller
class AgentController:
    """The active session of one kernel and every operation on sessions.

    Parameters
    ----------
    settings : callable
        Returns the current :class:`Settings` (the magics pass a snapshot of their traits).
    shell : IPython.core.interactiveshell.InteractiveShell, optional
        Whose user namespace the agent's Python tool runs in.
    environ : mapping, optional
        Environment for the memory directory and the API key; :data:`os.environ` by default.
    cwd : path-like, optional
        The kernel's starting directory; default :func:`os.getcwd` now. It and its project
        root are resolved once, here.
    """

    def __init__(self, settings: Callable[[], Settings], *, shell: Any = None,
                 environ: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None) -> None:
        self._settings = settings
        self._shell = shell
        self._environ = environ
        self._project = Project(settings, shell=shell, environ=environ, cwd=cwd)
        self._active: ActiveSession | None = None
        self._remembered: dict[str, SessionOptions] = {}
        self._last_options: SessionOptions | None = None  # of the latest active session
        self._ended: tuple[str, str] | None = None  # (ID, "deleted"/"archived") of the last one
        self._last_turn: ActiveSession | None = None
        #: The user's cells as the notebook tools and ``@`` references read them (a
        #: ``post_run_cell`` hook on ``shell`` while the controller lives).
        self.cells = CellLog(shell)
        if shell is not None:
            self.cells.start()
        #: Lines for the user about the notes of the session :meth:`new_session` started
        #: last: notes new to them (named with their size) and notes left out.
        self.notes_notice: list[str] = []

    # ---- stores
    @property
    def project_root(self) -> Path:
        """The project root of the kernel's starting directory (resolved once)."""
        return self._project.root

    @property
    def memory_dir(self) -> Path:
        """The memory directory the settings select now (see :mod:`jupyter_agent.paths`)."""
        return self._project.memory_dir

    @property
    def store(self) -> Store:
        """The store the settings select now (see :attr:`jupyter_agent.project.Project.store`).

        Raises
        ------
        JupyterAgentError
            When the store URL is not a PostgreSQL URL.
        """
        return self._project.store

    def _store_for(self, session_id: str) -> Store:
        if self._active is not None and self._active.session_id == session_id:
            return self._active.store
        return self.store

    # ---- the active session
    @property
    def active_session_id(self) -> str | None:
        """The ID of the active session, or ``None``."""
        return None if self._active is None else self._active.session_id

    def _require_active(self) -> ActiveSession:
        if self._active is None:
            raise JupyterAgentError(
                "no active session: start one with %agent_new or pick one with %agent_resume"
            )
        return self._active

    def _model(self, settings: Settings) -> tuple[Model, tuple[Any, ...]]:
        """The model ``settings`` describe, and what it was built from (its key)."""
        return build_model(settings, self._environ), model_key(settings, self._environ)

    def _start(self, model: Model, key: tuple[Any, ...], conversation: Conversation,
               options: SessionOptions, settings: Settings) -> None:
        """Build the agent of ``conversation``, make it active, then close the previous one.

        On failure the conversation is closed (its lease released) and the previous
        session stays active.
        """
        from jupyter_agent.agent import Agent
        from jupyter_agent.ui.calls import show_question

        try:
            # The question shows the whole code (a scrollable view in Jupyter); the turn
            # renderers show only the call's name when it will be asked.
            agent = Agent(model, conversation, config=settings.agent_config(), shell=self._shell,
                          show_question=show_question if is_jupyter(self._shell) else None,
                          cells=self.cells)
        except BaseException:
            conversation.close()
            raise
        assert conversation.store is not None and conversation.session_id is not None
        previous = self._active
        self._active = ActiveSession(conversation.session_id, conversation.store, options,
                                     agent, key)
        if previous is not None:
            previous.agent.close()

    def _agent(self) -> Agent:
        """The active agent, brought up to date with the current settings."""
        return self._require_active().refreshed(self._settings(), self._environ)

    def _remember(self, session_id: str, options: SessionOptions) -> None:
        """Keep a session's options (not its title) for its next resume in this kernel,
        and as the options of a session :meth:`ensure_session` starts."""
        self._remembered[session_id] = options.replace(title=None)
        self._last_options = self._remembered[session_id]
        self._ended = None

    def new_session(self, options: SessionOptions | None = None) -> str:
        """Create a session, make it active (its agent holds its lease); return its ID.

        The options are remembered for this session's next resume in this kernel.

        The store is checked first, then the model, both before anything is created: a
        memory directory the store refuses is named as the cause even when no model is
        configured either (so ``%agent`` after a refused ``%agent_new`` names it again).

        Raises
        ------
        UnsafeDirectoryError
            Before anything is created, when the memory directory may not be used.
        ModelNotConfiguredError
            Before anything is created, when no model is configured.
        """
        from jupyter_agent.agent.conversation import Conversation
        from jupyter_agent.store import new_session_id

        options = options or SessionOptions()
        settings = self._settings().with_options(options)
        self.store.exists(new_session_id())  # checks the memory directory, creates nothing
        model, key = self._model(settings)  # fails before creating anything
        conversation = Conversation.create(self.store, title=options.title or "",
                                           project_root=str(self._project.root),
                                           notes_cap=settings.max_notes_kib * 1024)
        self._start(model, key, conversation, options, settings)
        assert conversation.session_id is not None
        self._remember(conversation.session_id, options)
        self.notes_notice = self._notes_notice(conversation.notes)
        return conversation.session_id

    def _notes_notice(self, notes: NotesRead) -> list[str]:
        """Lines telling the user which notes a new session uses that they have not seen in
        this content (they instruct the model), and which were left out."""
        from jupyter_agent.agent.prompts import format_bytes
        from jupyter_agent.store.notes import NOTE_FILES, unseen_notes

        folder = self.memory_dir.resolve()
        files = {folder / NOTE_FILES[kind]: text for kind, text in notes.used.items()}
        new = unseen_notes(files, self._environ)
        lines = []
        if new:
            named = ", ".join(f"{path.name} ({format_bytes(len(files[path].encode()))})"
                              for path in new)
            lines.append(f"This session's instructions include notes new to you: {named}, in "
                         f"{new[0].parent} — read them if you did not write them.")
        return lines + notes.left_out

    @property
    def ended(self) -> tuple[str, str] | None:
        """``(session ID, "deleted" or "archived")`` when the kernel's active session was
        deleted or archived and no session was made active since; else ``None``."""
        return self._ended

    def ensure_session(self) -> str | None:
        """Start a session if none is active; return the new ID, or ``None`` if one was active.

        The new session gets the options of this kernel's latest session (its model,
        endpoint, limits and approval; not its title), so a deleted or archived session
        is followed by one that talks to the same model.

        Raises
        ------
        JupyterAgentError
            No model is configured for the new session: the message says that no
            session is active (and why) and how to start or pick one.
        """
        if self._active is not None:
            return None
        ended, options = self._ended, self._last_options or SessionOptions()
        try:
            return self.new_session(options)
        except ModelNotConfiguredError as err:
            if ended is None:
                raise
            raise JupyterAgentError(
                f"no active session (session {ended[0]} was {ended[1]}), and a new one cannot "
                f"start: {err}. Or pick a saved session with %agent_resume ID "
                "(%agent_sessions lists them)") from err

    def _resume_options(self, session_id: str, explicit: SessionOptions,
                        state: SessionState) -> tuple[SessionOptions, str]:
        """The options a resumed session runs with (see :meth:`resume`), and the one line
        the recap says when the session last used another endpoint ("" if it did not).

        The record's values are data: its endpoint is only compared with the configured
        one, its model is kept only for that same endpoint, its API only if it is one of
        :data:`~jupyter_agent.settings.MODEL_APIS`, its vision mode only if this kernel
        does not turn images off.

        Raises
        ------
        ModelNotConfiguredError
            No endpoint is configured and the session last used one other than the
            OpenAI API: this kernel's user must name it (``--base-url``).
        """
        chosen = explicit.over(self._remembered.get(session_id, SessionOptions()))
        settings = self._settings()
        saved_url = saved_base_url(state.base_url).rstrip("/")  # the client adds a "/"
        configured = (saved_base_url(chosen.base_url) if chosen.base_url is not None
                      else configured_base_url(settings, self._environ)).rstrip("/")
        note = ""
        if state.base_url and saved_url != configured:
            if not configured:
                raise ModelNotConfiguredError(
                    f"session {session_id} last used the endpoint {describe_endpoint(saved_url)}"
                    ", and this kernel configures none (a session file never chooses where the"
                    " API key goes): resume it with --base-url URL naming the endpoint you "
                    "trust, or set AgentMagics.base_url or $OPENAI_BASE_URL")
            note = (f"This session last used {describe_endpoint(saved_url)}; it now talks to "
                    f"{describe_endpoint(configured)}, the endpoint this kernel configures.")
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
        return chosen.replace(**values), note

    def resume(self, session_id: str | None = None,
               options: SessionOptions | None = None) -> Resumed:
        """Make a saved session the active one and return its record (for the recap).

        The session is read once, after its lease is taken. Which options it runs with,
        option by option: the explicit ``options``, else those this kernel last used for
        the session (``%agent_new`` or an earlier resume), else -- for the model, the
        model API and vision, which the checkpoint remembers -- what the session last
        used (the saved model only when the endpoint is the same), else the settings.
        The endpoint is always this kernel's (options, remembered options, settings,
        ``$OPENAI_BASE_URL``): the saved one is only compared with it, and a difference
        is said in :attr:`Resumed.endpoint_note`. Limits come from the explicit or
        remembered options, else from the settings. An archived session is
        unarchived.

        Parameters
        ----------
        session_id : str, optional
            Default: the most recently updated non-archived session of :attr:`memory_dir`.
        options : SessionOptions, optional

        Returns
        -------
        Resumed

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError
        SessionLockedError
            The session is active in another process (the message names its pid).
        ModelNotConfiguredError
            The message names the model and endpoint the session last used; also when
            the session last used an endpoint other than the OpenAI API and this kernel
            configures none (the message asks for ``--base-url``).
        """
        from jupyter_agent.agent.conversation import Conversation
        from jupyter_agent.store import validate_session_id

        explicit = options or SessionOptions()
        store = self.store
        if session_id is None:
            session_id = newest_session(store)
        session_id = validate_session_id(session_id)
        if self._active is not None and self._active.session_id == session_id:
            store = self._active.store
        conversation = Conversation.open(store, session_id)  # the lease, then one read
        try:
            state = conversation.state
            effective, note = self._resume_options(session_id, explicit, state)
            settings = self._settings().with_options(effective)
            try:
                model, key = self._model(settings)
            except ModelNotConfiguredError as err:
                raise ModelNotConfiguredError(not_configured_message(
                    settings, session_id=session_id, last_model=state.model,
                    last_url=saved_base_url(state.base_url),
                )) from err
        except BaseException:
            conversation.close()
            raise
        self._start(model, key, conversation, effective, settings)
        self._remember(session_id, explicit.over(self._remembered.get(session_id,
                                                                       SessionOptions())))
        archived = conversation.record().archived
        if explicit.title is not None:
            conversation.set_title(explicit.title)
        if archived:
            conversation.set_archived(False)
        return Resumed(conversation.record(), unarchived=archived, endpoint_note=note)

    def ask(self, prompt: str, *, on_event: Callable[[Any], None] | None = None) -> TurnResult:
        """Send ``prompt`` to the active session and return what the turn produced
        (also kept, when the turn raises, as :attr:`last_result`).

        ``@name``, ``@In[N]``, ``@Out[N]`` and ``@error`` in the prompt attach what
        ``context_privacy`` allows (see
        :func:`~jupyter_agent.notebook.attach_references`): appended to the saved
        user message, each told to ``on_event`` as a ``Notice``, as is each reference
        not attached.

        Raises
        ------
        JupyterAgentError
            No active session (call :meth:`ensure_session` first).
        ModelError
            The model endpoint failed; the prompt stays saved.
        """
        active = self._require_active()
        self._last_turn = active
        return active.ask(prompt, self._settings(), self._environ, on_event=on_event,
                          cells=self.cells)

    @property
    def last_result(self) -> TurnResult | None:
        """What the latest :meth:`ask` produced, also when it raised; ``None`` before."""
        return None if self._last_turn is None else self._last_turn.last_result

    def compact(self, *, on_event: Callable[[Any], None] | None = None) -> bool:
        """Compact the active session's working context now.

        Returns ``False`` when there was nothing to compact or the summarizing call
        failed; ``on_event`` then receives a ``Notice`` saying which.

        Raises
        ------
        LimitExceededError
            The session reached ``max_cost_usd`` (no model call is made).
        """
        return self._agent().compact(on_event=on_event)

    def record(self, session_id: str | None = None) -> SessionRecord:
        """Load a session's record (default: the active session)."""
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
        """Replace the active session's summary."""
        active = self._require_active()
        active.store.update(active.session_id, summary=text)

    def set_title(self, text: str) -> None:
        """Set the active session's title."""
        active = self._require_active()
        active.store.update(active.session_id, title=text)

    def usage(self) -> UsageReport:
        """Usage and limits of the active session (limits as the current settings say)."""
        return self._require_active().usage(self._settings())

    def agent_cell(self, n: int | None = None) -> HandedCell:
        """The code of the active session's ``n``-th ``run_python`` call (default: the
        last), tagged ``# from jupyter-agent session ID, turn T, call N``, and recorded in
        the checkpoint as handed out (``SessionState.handed_out``).

        Raises
        ------
        JupyterAgentError
            No active session, no ``run_python`` call yet, or no call ``n``.
        SessionLockedError, OSError
            From the store while recording it.
        """
        from jupyter_agent.agent.context import SUMMARY_MARKER

        active = self._require_active()
        found: list[tuple[int, str, str]] = []  # (turn, call ID, code)
        turn = 0
        for message in active.store.load_session(active.session_id).transcript:
            role = message.get("role")
            if role == "user" and not str(message.get("content") or "").startswith(
                    SUMMARY_MARKER):
                turn += 1
            for call in (message.get("tool_calls") or ()) if role == "assistant" else ():
                function = call.get("function") or {}
                if function.get("name") != "run_python":
                    continue
                try:
                    code = json.loads(function.get("arguments") or "").get("code")
                except (ValueError, AttributeError):
                    code = None
                found.append((turn, str(call.get("id") or ""), code if isinstance(code, str)
                              else ""))
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
        """The active session's todo items."""
        return list(self._require_active().agent.state.todos)

    def list_sessions(self, include_archived: bool = False) -> list[SessionListing]:
        """Sessions of :attr:`memory_dir`, most recently updated first."""
        return self.store.list_sessions(include_archived=include_archived)

    def _deactivate(self, session_id: str, why: str) -> bool:
        """Let the active session go if it is ``session_id``; True if it was active."""
        if self._active is None or self._active.session_id != session_id:
            return False
        active, self._active = self._active, None
        active.agent.close()
        self._ended = (session_id, why)
        return True

    def share(self, session_id: str | None, roles: Sequence[str], *,
              undo: bool = False) -> list[str]:
        """Share a session (default the active one) read-only with database roles, or
        stop sharing it with them (``undo``); return the roles it is shared with now.

        Raises
        ------
        JupyterAgentError
            The store is not a team store, or a role is not the database's (nothing
            changed).
        SessionNotFoundError, SessionReadOnlyError, InvalidSessionIdError
        """
        sid = self._require_active().session_id if session_id is None else session_id
        return share_session(self._store_for(sid), sid, roles, undo=undo)

    def archive(self, session_id: str | None = None, *, undo: bool = False) -> SessionChange:
        """Archive (or with ``undo`` unarchive) a session, default the active one.

        Archiving the kernel's active session also deactivates it (its lease is
        released; the next prompt starts a new session with the same options), so a
        session the kernel goes on using is never hidden from the list.

        Returns
        -------
        SessionChange
            Says whether the session was the active one.

        Raises
        ------
        JupyterAgentError
            The session is already archived (or, with ``undo``, is not archived).
        SessionNotFoundError, SessionLockedError, InvalidSessionIdError
        """
        from jupyter_agent.store import validate_session_id

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
        """Delete a session's file; the active session is deactivated first.

        Returns
        -------
        SessionChange
            Says whether the session was this kernel's active one.

        Raises
        ------
        SessionLockedError
            The session is active in another process.
        """
        from jupyter_agent.store import validate_session_id

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

    # ---- artefacts
    def fork(self, session_id: str | None = None, *, at: int | None = None,
             title: str | None = None) -> Forked:
        """Fork a session (default: the active one) and make the fork the active session.

        The parent is read without its lease (another kernel may be running it) and never
        written. The fork is saved in :attr:`memory_dir` and resumed like ``%agent_resume``
        would, with the options this kernel last used for the parent.

        Parameters
        ----------
        session_id : str, optional
        at : int, optional
            Keep user turns 1 to ``at`` only (see :mod:`jupyter_agent.artefacts.fork`).
        title : str, optional

        Returns
        -------
        Forked
            The fork's record as it is now active.

        Raises
        ------
        ForkPointError, InvalidSessionIdError, SessionNotFoundError, CorruptSessionError
        ModelNotConfiguredError
            The fork is saved, but could not be made active (resume it later).
        """
        from jupyter_agent.artefacts.fork import fork_record
        from jupyter_agent.store import validate_session_id

        parent = validate_session_id(self._require_active().session_id if session_id is None
                                     else session_id)
        forked = fork_record(self._store_for(parent).load_session(parent), at=at, title=title)
        self.store.create_session(record=forked.record)
        self._remembered[forked.record.id] = self._remembered.get(parent, SessionOptions())
        return replace(forked, record=self.resume(forked.record.id).record)

    def export(self, session_id: str | None = None, *, fmt: str | None = None,
               output: str | os.PathLike[str] | None = None, force: bool = False) -> Exported:
        """Export a session (default: the active one) to a file; no lease is taken.

        Relative paths start from the kernel's current working directory; secrets are
        redacted (see :mod:`jupyter_agent.artefacts.redact`), among them the values of the
        environment's secret variables and of the ``api_key_env`` variable.
        See :func:`jupyter_agent.artefacts.export.export_record` for the parameters.

        Raises
        ------
        ExportExistsError, ExportError, ValueError
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError
        """
        from jupyter_agent.artefacts.export import export_record
        from jupyter_agent.artefacts.redact import secrets_from_environ

        record = self.record(session_id)
        secrets = secrets_from_environ(os.environ if self._environ is None else self._environ,
                                       [self._settings().api_key_env])
        store = self._store_for(record.id)
        return export_record(record, fmt, output, force=force, secrets=secrets,
                             figures=lambda fid: store.read_figure(record.id, fid))

    def search(self, text: str, *, deep: bool = False,
               include_archived: bool = False) -> list[SearchHit]:
        """Sessions of :attr:`memory_dir` matching ``text`` (see
        :func:`jupyter_agent.artefacts.search.search_sessions`)."""
        from jupyter_agent.artefacts.search import search_sessions

        return search_sessions(self.store, text, deep=deep, include_archived=include_archived)

    def close(self) -> None:
        """Deactivate the active session, releasing its lease (extension unload)."""
        active, self._active = self._active, None
        if active is not None:
            active.agent.close()
        self.cells.stop()
        self._project.close()


def share_session(store: Store, session_id: str, roles: Sequence[str], *,
                  undo: bool = False) -> list[str]:
    """:meth:`PostgresStore.share_session
    <jupyter_agent.store.postgres.PostgresStore.share_session>`, for any store: the JSON
    files of one user have nobody to share with (``JupyterAgentError``)."""
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
