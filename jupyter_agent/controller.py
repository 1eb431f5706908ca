"""The plain-Python API behind the magics and the sessions panel.

:class:`AgentController` owns the *active session* of one kernel: which session it is,
the :class:`~jupyter_agent.store.SessionStore` it lives in, the options it was started
with, and the :class:`~jupyter_agent.agent.Agent` that runs it. The magics parse their
arguments and call it; the panel's Resume button calls :meth:`AgentController.resume`;
tests call it directly.

Invariants
----------
- While a session is active, this controller holds its lease
  (``store.acquire_lease``, an ``fcntl`` lock, design §7), and so does its
  :class:`~jupyter_agent.agent.Agent` (for the agent's whole life; same store, so the
  count nests). Whenever the controller drops an agent -- switching sessions,
  rebuilding it after a settings change, deleting the session, :meth:`close` -- it
  calls ``agent.close()``. The previous session's lease is released only after the
  next one is active (so a failed resume leaves the old one active), and every lease
  is dropped by :meth:`close` (extension unload). The operating system drops them
  when the kernel dies.
- Settings are read through a callable each time they are needed, so ``%config``
  changes apply to the next turn: limits are re-applied before every turn, and the
  agent is rebuilt from its saved session when a setting it was built with changes.
- Options of a session (see :meth:`AgentController.resume`): explicit options of
  ``%agent_new`` / ``%agent_resume`` > the options this kernel last used for that
  session > (model and endpoint only) what the session's checkpoint says it last used
  > the settings.
- The working directory and the project root are resolved once, when the controller
  is made (the extension is loaded): an ``os.chdir`` later does not switch the
  memory directory (:mod:`jupyter_agent.paths`).
- The API key is read from the environment variable named by ``api_key_env`` when a
  client is built, and handed to :class:`openai.OpenAI` only. It is never kept on a
  setting, written to a session file, printed or logged.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_agent.errors import JupyterAgentError, ModelNotConfiguredError
from jupyter_agent.paths import find_project_root, resolve_memory_dir
from jupyter_agent.settings import (
    SessionOptions,
    Settings,
    build_client,
    not_configured_message,
    saved_base_url,
)
from jupyter_agent.ui.kernel import kernel_label
from jupyter_agent.ui.results import Resumed, SessionChange, TurnResult, UsageReport

if TYPE_CHECKING:
    from jupyter_agent.agent import Agent
    from jupyter_agent.store import SessionListing, SessionRecord, SessionStore, TodoItem

__all__ = ["AgentController", "Resumed", "SessionChange", "SessionOptions", "Settings",
           "TurnResult", "UsageReport", "kernel_label"]


@dataclass
class _Active:
    session_id: str
    store: SessionStore
    options: SessionOptions
    agent: Agent | None = None
    built_with: Settings | None = None


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
        self._cwd = Path(os.getcwd() if cwd is None else cwd).expanduser().resolve()
        self._project_root = find_project_root(self._cwd)
        self._stores: dict[Path, SessionStore] = {}
        self._active: _Active | None = None
        self._remembered: dict[str, SessionOptions] = {}
        self._last_options: SessionOptions | None = None  # of the latest active session
        self._ended: tuple[str, str] | None = None  # (ID, "deleted"/"archived") of the last one
        self.last_result: TurnResult | None = None

    # ---- stores
    @property
    def project_root(self) -> Path:
        """The project root of the kernel's starting directory (resolved once)."""
        return self._project_root

    @property
    def memory_dir(self) -> Path:
        """The memory directory the settings select now (see :mod:`jupyter_agent.paths`)."""
        return resolve_memory_dir(self._settings().memory_dir or None, environ=self._environ,
                                  cwd=self._cwd, project_root=self._project_root)

    @property
    def store(self) -> SessionStore:
        """The :class:`SessionStore` of :attr:`memory_dir` (one per directory, reused)."""
        from jupyter_agent.store import SessionStore

        root = self.memory_dir
        if root not in self._stores:
            label = kernel_label(self._shell, self._environ, self._project_root)
            self._stores[root] = SessionStore(root, holder_label=label)
        return self._stores[root]

    def _store_for(self, session_id: str) -> SessionStore:
        if self._active is not None and self._active.session_id == session_id:
            return self._active.store
        return self.store

    # ---- the active session
    @property
    def active_session_id(self) -> str | None:
        """The ID of the active session, or ``None``."""
        return None if self._active is None else self._active.session_id

    def _require_active(self) -> _Active:
        if self._active is None:
            raise JupyterAgentError(
                "no active session: start one with %agent_new or pick one with %agent_resume"
            )
        return self._active

    def _build_agent(self, active: _Active, settings: Settings, *, title: str = "",
                     project_root: str | None = None) -> Agent:
        from jupyter_agent.agent import Agent
        from jupyter_agent.agent.builtin_tools import ask_on_stdin

        client = build_client(settings, self._environ)
        # The turn renderers already show the code of a tool call: ask without repeating it.
        return Agent(client, settings.model, store=active.store, session_id=active.session_id,
                     limits=settings.limits(), approval=settings.approve, shell=self._shell,
                     stream=settings.stream, context_window=settings.context_window,
                     title=title, project_root=project_root,
                     ask=functools.partial(ask_on_stdin, show_code=False))

    def _activate(self, active: _Active, settings: Settings, *, title: str = "",
                  project_root: str | None = None) -> None:
        """Take ``active``'s lease, build its agent, then let the previous session go."""
        active.store.acquire_lease(active.session_id)
        try:
            active.agent = self._build_agent(active, settings, title=title,
                                             project_root=project_root)
            active.built_with = settings
        except BaseException:
            active.store.release_lease(active.session_id)
            raise
        previous, self._active = self._active, active
        if previous is not None:
            self._drop(previous)

    @staticmethod
    def _drop(active: _Active) -> None:
        """Close ``active``'s agent and release the controller's own lease count."""
        if active.agent is not None:
            active.agent.close()
            active.agent = None
        active.store.release_lease(active.session_id)

    def _agent(self) -> Agent:
        """The active agent, rebuilt from disk if a setting it was built with changed."""
        active = self._require_active()
        settings = self._settings().with_options(active.options)
        if (active.agent is None or active.built_with is None
                or active.built_with.agent_key() != settings.agent_key()):
            old, active.agent = active.agent, self._build_agent(active, settings)
            active.built_with = settings
            if old is not None:
                old.close()
        active.agent.limits = settings.limits()
        return active.agent

    def _remember(self, session_id: str, options: SessionOptions) -> None:
        """Keep a session's options (not its title) for its next resume in this kernel,
        and as the options of a session :meth:`ensure_session` starts."""
        self._remembered[session_id] = replace(options, title=None)
        self._last_options = self._remembered[session_id]
        self._ended = None

    def new_session(self, options: SessionOptions | None = None) -> str:
        """Create a session, make it active and hold its lease; return its ID.

        The options are remembered for this session's next resume in this kernel.

        Raises
        ------
        ModelNotConfiguredError
            Before anything is created, when no model is configured.
        """
        from jupyter_agent.store import new_session_id

        options = options or SessionOptions()
        settings = self._settings().with_options(options)
        build_client(settings, self._environ)  # fail before creating anything
        active = _Active(new_session_id(), self.store, options)
        self._activate(active, settings, title=options.title or "",
                       project_root=str(self._project_root))
        self._remember(active.session_id, options)
        return active.session_id

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
                        record: SessionRecord) -> SessionOptions:
        """The options a resumed session runs with (see :meth:`resume`)."""
        chosen = explicit.over(self._remembered.get(session_id, SessionOptions()))
        saved_url = saved_base_url(record.state.base_url)
        url = chosen.base_url if chosen.base_url is not None else (saved_url or None)
        model = chosen.model
        same_endpoint = (url or self._settings().base_url) == saved_url
        if model is None and record.state.model and same_endpoint:
            model = record.state.model
        return replace(chosen, title=None, base_url=url, model=model)

    def resume(self, session_id: str | None = None,
               options: SessionOptions | None = None) -> Resumed:
        """Make a saved session the active one and return its record (for the recap).

        Which options the session runs with, option by option: the explicit ``options``,
        else those this kernel last used for the session (``%agent_new`` or an earlier
        resume), else -- for the model and the endpoint only -- the model and
        ``base_url`` its checkpoint says it last used (the OpenAI API's own URL counts as
        none; the saved model only together with its endpoint), else the settings.
        Limits therefore come from the explicit or remembered options, else from the
        settings (design §6). An archived session is
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
            The message names the model and endpoint the session last used.
        """
        from jupyter_agent.store import validate_session_id

        explicit = options or SessionOptions()
        store = self.store
        if session_id is None:
            listing = store.list_sessions()
            if not listing:
                archived = store.list_sessions(include_archived=True)
                if archived:
                    n = len(archived)
                    raise JupyterAgentError(
                        f"no session to resume in {store.root}: the {n} saved session"
                        f"{'s are' if n > 1 else ' is'} archived; %agent_resume ID takes one "
                        f"out of the archive (%agent_sessions --all lists them, newest: "
                        f"{archived[0].id}), or start one with %agent_new")
                raise JupyterAgentError(
                    f"no saved sessions in {store.root}: start one with %agent_new"
                )
            session_id = listing[0].id
        session_id = validate_session_id(session_id)
        if self._active is not None and self._active.session_id == session_id:
            store = self._active.store
        record = store.load_session(session_id)  # unknown or corrupt: say so first
        effective = self._resume_options(session_id, explicit, record)
        settings = self._settings().with_options(effective)
        try:
            build_client(settings, self._environ)
        except ModelNotConfiguredError as err:
            raise ModelNotConfiguredError(not_configured_message(
                settings, session_id=session_id, last_model=record.state.model,
                last_url=saved_base_url(record.state.base_url),
            )) from err
        self._activate(_Active(session_id, store, effective), settings)
        self._remember(session_id, explicit.over(self._remembered.get(session_id,
                                                                       SessionOptions())))
        if explicit.title is not None:
            store.set_title(session_id, explicit.title)
        if record.archived:
            store.set_archived(session_id, False)
        return Resumed(store.load_session(session_id), unarchived=record.archived)

    def ask(self, prompt: str, *, on_event: Callable[[Any], None] | None = None) -> TurnResult:
        """Send ``prompt`` to the active session and return what the turn produced.

        Raises
        ------
        JupyterAgentError
            No active session (call :meth:`ensure_session` first).
        ModelError
            The model endpoint failed; the prompt stays saved.
        """
        agent = self._agent()
        before = agent.state.tool_calls
        open_ = [True]
        self.last_result = None

        def forward(event: Any) -> None:
            # the agent keeps its last callback; events after this turn must not reach
            # this turn's renderer (it may update an old cell's output)
            if open_[0] and on_event is not None:
                on_event(event)

        def result(reply: str, stop_reason: str | None) -> TurnResult:
            return TurnResult(
                session_id=self._require_active().session_id, reply=reply,
                stop_reason=stop_reason, turn_usage=agent.last_turn_usage.model_copy(),
                session_usage=agent.state.usage.model_copy(),
                turn_tool_calls=agent.state.tool_calls - before,
                session_tool_calls=agent.state.tool_calls, limits=agent.limits,
                limits_from_options=self._require_active().options.given() & {
                    "max_tool_calls", "max_cost_usd", "max_iterations"},
            )

        try:
            reply = agent.run(prompt, on_event=forward)
        except KeyboardInterrupt:
            self.last_result = result("", "interrupted")
            raise
        except JupyterAgentError:
            self.last_result = result("", "error")
            raise
        finally:
            open_[0] = False
        self.last_result = result(reply, agent.stop_reason)
        return self.last_result

    def compact(self, *, on_event: Callable[[Any], None] | None = None) -> bool:
        """Compact the active session's working context now.

        Returns ``False`` when there was nothing to compact or the summarizing call
        failed; ``on_event`` then receives a ``Notice`` saying which.
        """
        return self._agent().compact(on_event=on_event)

    def record(self, session_id: str | None = None) -> SessionRecord:
        """Load a session's record (default: the active session)."""
        sid = self._require_active().session_id if session_id is None else session_id
        return self._store_for(sid).load_session(sid)

    def set_summary(self, text: str) -> None:
        """Replace the active session's summary."""
        active = self._require_active()
        active.store.write_summary(active.session_id, text)

    def set_title(self, text: str) -> None:
        """Set the active session's title."""
        active = self._require_active()
        active.store.set_title(active.session_id, text)

    def _current_agent(self) -> Agent:
        """The active agent as it is (no rebuild: reading state needs no model)."""
        agent = self._require_active().agent
        return self._agent() if agent is None else agent

    def usage(self) -> UsageReport:
        """Usage and limits of the active session (limits as the current settings say)."""
        agent = self._current_agent()
        settings = self._settings().with_options(self._require_active().options)
        agent.limits = settings.limits()
        return UsageReport(self._require_active().session_id, agent.state.usage.model_copy(),
                           agent.state.tool_calls, agent.limits)

    def todos(self) -> list[TodoItem]:
        """The active session's todo items."""
        return list(self._current_agent().state.todos)

    def list_sessions(self, include_archived: bool = False) -> list[SessionListing]:
        """Sessions of :attr:`memory_dir`, most recently updated first."""
        return self.store.list_sessions(include_archived=include_archived)

    def _deactivate(self, session_id: str, why: str) -> bool:
        """Let the active session go if it is ``session_id``; True if it was active."""
        if self._active is None or self._active.session_id != session_id:
            return False
        active, self._active = self._active, None
        self._drop(active)
        self._ended = (session_id, why)
        return True

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
        store.set_archived(sid, not undo)
        was_active = not undo and self._deactivate(sid, "archived")
        return SessionChange(sid, "unarchived" if undo else "archived", was_active)

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
        was_active = False
        if self._active is not None and self._active.session_id == sid:
            store.load_session(sid)
            was_active = self._deactivate(sid, "deleted")
        store.delete_session(sid)
        self._remembered.pop(sid, None)
        return SessionChange(sid, "deleted", was_active)

    def close(self) -> None:
        """Deactivate the active session and release every lease (extension unload)."""
        active, self._active = self._active, None
        if active is not None and active.agent is not None:
            active.agent.close()
        for store in self._stores.values():
            store.release_all()
        self._stores.clear()
