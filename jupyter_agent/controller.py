"""The plain-Python API behind the magics and the sessions panel.

:class:`AgentController` owns the *active session* of one kernel: which session it is,
the :class:`~jupyter_agent.store.SessionStore` it lives in, the options it was started
with, and the :class:`~jupyter_agent.agent.Agent` that runs it. The magics parse their
arguments and call it; the panel's Resume button calls :meth:`AgentController.resume`;
tests call it directly.

Invariants
----------
- While a session is active, this controller holds its lease
  (``store.acquire_lease``, an ``fcntl`` lock, spec "Session Locks"). The lease of the
  previous session is released only after the next one is active (so a failed resume
  leaves the old one active), and every lease is dropped by :meth:`close` (extension
  unload). The operating system drops them when the kernel dies.
- Settings are read through a callable each time they are needed, so ``%config``
  changes apply to the next turn: limits are re-applied before every turn, and the
  agent is rebuilt from its saved session when a setting it was built with changes.
  Command-line options of ``%agent_new`` / ``%agent_resume`` override the settings for
  that session.
- The API key is read from the environment variable named by ``api_key_env`` when a
  client is built, and handed to :class:`openai.OpenAI` only. It is never kept on a
  setting, written to a session file, printed or logged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_agent.errors import JupyterAgentError, LimitExceededError
from jupyter_agent.paths import find_project_root, resolve_memory_dir
from jupyter_agent.settings import SessionOptions, Settings, build_client

if TYPE_CHECKING:
    from jupyter_agent.agent import Agent, Limits
    from jupyter_agent.store import SessionListing, SessionRecord, SessionStore, TodoItem, Usage

__all__ = ["AgentController", "SessionOptions", "Settings", "TurnResult", "UsageReport"]


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class UsageReport:
    """Usage of one session so far, with its limits (see :func:`display.format_usage`)."""

    session_id: str
    usage: Usage
    tool_calls: int
    limits: Limits


@dataclass(frozen=True)
class TurnResult:
    """What one ``%agent`` turn produced.

    Attributes
    ----------
    reply : str
        The final reply text (or the agent's limit notice).
    stop_reason : str or None
        ``None``, or the limit that ended the turn (``"max_tool_calls"``,
        ``"max_cost_usd"``, ``"max_iterations"``).
    turn_usage, session_usage : Usage
        Tokens and USD of this turn, and of the whole session so far.
    turn_tool_calls, session_tool_calls : int
    limits : Limits
    """

    session_id: str
    reply: str
    stop_reason: str | None
    turn_usage: Usage
    session_usage: Usage
    turn_tool_calls: int
    session_tool_calls: int
    limits: Limits

    @property
    def limit_error(self) -> LimitExceededError | None:
        """The :class:`LimitExceededError` describing ``stop_reason``, or ``None``."""
        if self.stop_reason is None:
            return None
        maximum = getattr(self.limits, self.stop_reason, None)
        value: float = {
            "max_tool_calls": self.session_tool_calls,
            "max_cost_usd": self.session_usage.cost_usd,
        }.get(self.stop_reason, maximum if maximum is not None else 0)
        return LimitExceededError(self.stop_reason, value, maximum if maximum is not None else 0)


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
    """

    def __init__(self, settings: Callable[[], Settings], *, shell: Any = None,
                 environ: Mapping[str, str] | None = None) -> None:
        self._settings = settings
        self._shell = shell
        self._environ = environ
        self._stores: dict[Path, SessionStore] = {}
        self._active: _Active | None = None

    # ---- stores
    @property
    def memory_dir(self) -> Path:
        """The memory directory the settings select now (see :mod:`jupyter_agent.paths`)."""
        return resolve_memory_dir(self._settings().memory_dir or None, environ=self._environ)

    @property
    def store(self) -> SessionStore:
        """The :class:`SessionStore` of :attr:`memory_dir` (one per directory, reused)."""
        from jupyter_agent.store import SessionStore

        root = self.memory_dir
        if root not in self._stores:
            self._stores[root] = SessionStore(root)
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

        client = build_client(settings, self._environ)
        return Agent(client, settings.model, store=active.store, session_id=active.session_id,
                     limits=settings.limits(), approval=settings.approve, shell=self._shell,
                     stream=settings.stream, context_window=settings.context_window,
                     title=title, project_root=project_root)

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
            previous.store.release_lease(previous.session_id)

    def _agent(self) -> Agent:
        """The active agent, rebuilt from disk if a setting it was built with changed."""
        active = self._require_active()
        settings = self._settings().with_options(active.options)
        if (active.agent is None or active.built_with is None
                or active.built_with.agent_key() != settings.agent_key()):
            active.agent = self._build_agent(active, settings)
            active.built_with = settings
        active.agent.limits = settings.limits()
        return active.agent

    def new_session(self, options: SessionOptions | None = None) -> str:
        """Create a session, make it active and hold its lease; return its ID.

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
        root = find_project_root()
        self._activate(active, settings, title=options.title or "", project_root=str(root))
        return active.session_id

    def ensure_session(self) -> str | None:
        """Start a session if none is active; return the new ID, or ``None`` if one was active."""
        return None if self._active is not None else self.new_session()

    def resume(self, session_id: str | None = None,
               options: SessionOptions | None = None) -> SessionRecord:
        """Make a saved session the active one and return its record (for the recap).

        Parameters
        ----------
        session_id : str, optional
            Default: the most recently updated non-archived session of :attr:`memory_dir`.
        options : SessionOptions, optional

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError
        SessionLockedError
            The session is active in another process (the message names its pid).
        ModelNotConfiguredError
        """
        from jupyter_agent.store import validate_session_id

        options = options or SessionOptions()
        store = self.store
        if session_id is None:
            listing = store.list_sessions()
            if not listing:
                raise JupyterAgentError(
                    f"no saved sessions in {store.root}: start one with %agent_new"
                )
            session_id = listing[0].id
        session_id = validate_session_id(session_id)
        if self._active is not None and self._active.session_id == session_id:
            store = self._active.store
        store.load_session(session_id)  # unknown or corrupt: say so before anything else
        settings = self._settings().with_options(options)
        build_client(settings, self._environ)
        self._activate(_Active(session_id, store, options), settings)
        if options.title is not None:
            store.set_title(session_id, options.title)
        return store.load_session(session_id)

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

        def forward(event: Any) -> None:
            # the agent keeps its last callback; events after this turn must not reach
            # this turn's renderer (it may update an old cell's output)
            if open_[0] and on_event is not None:
                on_event(event)

        try:
            reply = agent.run(prompt, on_event=forward)
        finally:
            open_[0] = False
        return TurnResult(
            session_id=self._require_active().session_id, reply=reply,
            stop_reason=agent.stop_reason, turn_usage=agent.last_turn_usage.model_copy(),
            session_usage=agent.state.usage.model_copy(),
            turn_tool_calls=agent.state.tool_calls - before,
            session_tool_calls=agent.state.tool_calls, limits=agent.limits,
        )

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

    def archive(self, session_id: str | None = None, *, undo: bool = False) -> str:
        """Archive (or with ``undo`` unarchive) a session, default the active one; return its ID."""
        from jupyter_agent.store import validate_session_id

        sid = self._require_active().session_id if session_id is None else session_id
        sid = validate_session_id(sid)
        self._store_for(sid).set_archived(sid, not undo)
        return sid

    def delete(self, session_id: str) -> None:
        """Delete a session's file; the active session is deactivated first.

        Raises
        ------
        SessionLockedError
            The session is active in another process.
        """
        from jupyter_agent.store import validate_session_id

        sid = validate_session_id(session_id)
        store = self._store_for(sid)
        if self._active is not None and self._active.session_id == sid:
            store.load_session(sid)
            active, self._active = self._active, None
            active.store.release_lease(sid)
        store.delete_session(sid)

    def close(self) -> None:
        """Deactivate the active session and release every lease (extension unload)."""
        self._active = None
        for store in self._stores.values():
            store.release_all()
        self._stores.clear()
