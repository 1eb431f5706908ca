"""The plain-Python API behind the magics, the sessions panel and tests.

The active session's agent holds its lease (the controller takes none); a new session is
made active before the previous one is closed, so a failed resume leaves the old one.
Options of a session: explicit > those this kernel last used for it > (model, API,
vision) what its checkpoint remembers > the settings. The endpoint is never taken from a
session file; the API key is never kept (only a hash, to notice a change).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_agent.artefacts.fork import Forked, fork_session
from jupyter_agent.artefacts.steps import Call, Request, steps
from jupyter_agent.errors import JupyterAgentError, LimitExceededError, ModelNotConfiguredError
from jupyter_agent.notebook import CellLog, attach_references, notebook_so_far
from jupyter_agent.project import (
    chosen_store_url,
    find_project_root,
    kernel_label,
    newest_session,
    open_store,
    resolve_memory_dir,
)
from jupyter_agent.settings import (
    LIMITS,
    SessionOptions,
    Settings,
    build_client,
    build_model,
    endpoint_id,
    model_key,
    not_configured_message,
    resume_options,
    saved_base_url,
)
from jupyter_agent.store import Usage, new_session_id, validate_session_id
from jupyter_agent.store.engine import NOTE_FILES, unseen_notes
from jupyter_agent.text import format_bytes

if TYPE_CHECKING:
    import openai

    from jupyter_agent.agent.adapters import Model
    from jupyter_agent.agent.config import Limits
    from jupyter_agent.agent.conversation import Conversation
    from jupyter_agent.agent.endpoint import ContextWindow
    from jupyter_agent.agent.loop import Agent, TurnOutcome
    from jupyter_agent.artefacts.export import Exported
    from jupyter_agent.store import FigureData, SessionRecord, Store


@dataclass(frozen=True)
class UsageReport:
    """A session's usage (tokens, USD) and limits, for ``%agent_usage`` or after a turn.

    The turn's fields are set by :meth:`AgentController.ask` only: ``stop_reason`` is a
    limit's name, ``"length"``, ``"content_filter"``, ``"interrupted"``, ``"error"`` or
    ``None``; ``limits_from_options``: the limits the session's options set
    (``%agent_resume --max-...``).
    """

    session_id: str
    session_usage: Usage
    session_tool_calls: int
    limits: Limits
    context_tokens: int = 0
    window: ContextWindow | None = None
    context_privacy: str = "schema"
    reply: str = ""
    stop_reason: str | None = None
    turn_usage: Usage = field(default_factory=Usage)
    turn_tool_calls: int = 0
    limits_from_options: frozenset[str] = frozenset()
    limit_error: LimitExceededError | None = None


@dataclass(frozen=True)
class Resumed:
    """A resumed session's record; ``endpoint_note``: one line (without credentials) when
    it last used another endpoint."""

    record: SessionRecord
    unarchived: bool = False
    endpoint_note: str = ""


@dataclass(frozen=True)
class SessionChange:
    """What archiving, unarchiving or deleting a session did; ``was_active``: it was this
    kernel's active session (its lease is released)."""

    session_id: str
    action: str  # "archived", "unarchived" or "deleted"
    was_active: bool = False
    title: str = ""


@dataclass
class ActiveSession:
    """A session this kernel runs; its agent holds the lease. ``settings`` (with the
    session's options) and ``model_key`` are what the agent was last configured from."""

    session_id: str
    store: Store
    options: SessionOptions
    agent: Agent
    settings: Settings
    model_key: tuple[Any, ...]


class AgentController:
    """The active session of one kernel and every operation on sessions. ``cwd`` (default:
    now) and its project root are found once: a later ``os.chdir`` does not move the sessions.
    """

    def __init__(self, settings: Callable[[], Settings], *, shell: Any = None,
                 environ: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None,
                 show_question: Callable[..., Any] | None = None) -> None:
        self._settings = settings
        self._shell = shell
        self._environ = environ
        self._show_question = show_question
        self._cwd = Path(os.getcwd() if cwd is None else cwd).expanduser().resolve()
        self.root = find_project_root(self._cwd)
        self._stores: dict[tuple[str, Path], Store] = {}  # by (URL, memory directory)
        self._active: ActiveSession | None = None
        self._client: tuple[tuple[str, str], openai.OpenAI] | None = None  # by endpoint_id
        self._remembered: dict[str, SessionOptions] = {}
        self._last_options: SessionOptions | None = None  # of the latest active session
        #: ``(session ID, "deleted" or "archived")`` when the active session ended so and
        #: no session was made active since.
        self.ended: tuple[str, str] | None = None
        self.cells = CellLog(shell)
        if shell is not None:
            self.cells.start()
        #: Lines about the notes of the session :meth:`new_session` started last: notes
        #: new to this user (they instruct the model) and notes left out.
        self.notes_notice: list[str] = []

    def target(self, session_id: str | None) -> tuple[str, Store]:
        """A session's ID (default: the active one's), checked, and the store holding it."""
        sid = validate_session_id(self._require_active().session_id if session_id is None
                                  else session_id)
        active = self._active
        return sid, active.store if active and active.session_id == sid else self.store

    @property
    def memory_dir(self) -> Path:
        """The memory directory the settings select now (absolute; it may not exist yet)."""
        return resolve_memory_dir(self._settings().memory_dir or None, environ=self._environ,
                                  cwd=self._cwd, project_root=self.root)

    @property
    def store(self) -> Store:
        """The store the settings select now, kept until :meth:`close`."""
        root = self.memory_dir
        url = chosen_store_url(self._settings().store_url or None, self._environ)
        if (url, root) not in self._stores:
            label = kernel_label(self._shell, self._environ, self.root)
            self._stores[url, root] = open_store(root, url or None, holder_label=label,
                                                 project_root=self.root, environ=self._environ)
        return self._stores[url, root]

    @property
    def active_session_id(self) -> str | None:
        return None if self._active is None else self._active.session_id

    def _require_active(self) -> ActiveSession:
        if self._active is None:
            raise JupyterAgentError("no active session: start one with %agent_new or pick "
                                    "one with %agent_resume")
        return self._active

    def _model(self, settings: Settings) -> Model:
        # one client per endpoint and key: building one takes ~20 ms
        ident = endpoint_id(settings, self._environ)
        if self._client is None or self._client[0] != ident:
            self._client = (ident, build_client(settings, self._environ))
        return build_model(settings, self._environ, client=self._client[1])

    def _start(self, model: Model, conversation: Conversation, options: SessionOptions,
               settings: Settings, remembered: SessionOptions) -> None:
        # on failure ``conversation`` is closed and the previous session stays active;
        # ``remembered``: the options for its next resume here, and for a session
        # ensure_session() starts
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
                                     agent, settings, model_key(settings, self._environ))
        if previous is not None:
            previous.agent.conversation.close()
        self._last_options = replace(remembered, title=None)
        self._remembered[conversation.session_id] = self._last_options
        self.ended = None

    def new_session(self, options: SessionOptions | None = None) -> str:
        """Create a session, make it active and return its ID (``UnsafeDirectoryError``,
        ``ModelNotConfiguredError``: nothing is created)."""
        from jupyter_agent.agent.conversation import Conversation  # imports openai

        options = options or SessionOptions()
        settings = self._settings().with_options(options)
        store = self.store
        store.exists(new_session_id())  # checks the memory directory, creates nothing
        model = self._model(settings)  # fails before anything is created
        conversation = Conversation.create(store, title=options.title or "",
                                           project_root=str(self.root),
                                           notes_cap=settings.max_notes_kib * 1024)
        self._start(model, conversation, options, settings, options)
        assert conversation.session_id is not None
        notes, folder = conversation.notes, self.memory_dir.resolve()
        files = {folder / NOTE_FILES[kind]: text for kind, text in notes.used.items()}
        new = unseen_notes(files, self._environ)
        named = ", ".join(f"{path.name} ({format_bytes(len(files[path].encode()))})"
                          for path in new)
        self.notes_notice = [f"This session's instructions include notes new to you: {named}, "
                             f"in {new[0].parent} — read them if you did not write them."
                             ] if new else []
        self.notes_notice += notes.left_out
        return conversation.session_id

    def ensure_session(self) -> str | None:
        """If none is active, start a session with the options (not the title) of this
        kernel's latest one and return its ID."""
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

    def resume(self, session_id: str | None = None,
               options: SessionOptions | None = None) -> Resumed:
        """Make a saved session (default: the newest no one else holds) the active one,
        unarchiving it; its record is read once, after its lease is taken."""
        from jupyter_agent.agent.conversation import Conversation  # imports openai

        explicit = options or SessionOptions()
        if session_id is None:
            session_id = newest_session(self.store)
        session_id, store = self.target(session_id)
        chosen = explicit.over(self._remembered.get(session_id, SessionOptions()))
        conversation = Conversation.open(store, session_id)  # the lease, then one read
        state = conversation.state
        try:
            effective, note = resume_options(self._settings(), chosen, state, session_id,
                                             self._environ)
            settings = self._settings().with_options(effective)
            try:
                model = self._model(settings)
            except ModelNotConfiguredError as err:
                raise ModelNotConfiguredError(not_configured_message(
                    settings, session_id=session_id, last_model=state.model,
                    last_url=saved_base_url(state.base_url))) from err
        except BaseException:
            conversation.close()
            raise
        self._start(model, conversation, effective, settings, chosen)
        record = conversation.record()
        changes: dict[str, Any] = {} if explicit.title is None else {"title": explicit.title}
        if record.archived:
            changes["archived"] = False
        if changes:
            conversation.update(**changes)
            record = conversation.record()
        return Resumed(record, unarchived="archived" in changes, endpoint_note=note)

    def _refreshed(self) -> tuple[ActiveSession, Agent]:
        # the agent, reconfigured when the kernel's settings or the API key changed
        active = self._require_active()
        mine = self._settings().with_options(active.options)
        key = model_key(mine, self._environ)
        if key != active.model_key:
            active.agent.reconfigure(model=self._model(mine))
            active.model_key = key
        if mine != active.settings:
            active.agent.reconfigure(config=mine.agent_config())
            active.settings = mine
        return active, active.agent

    def _report(self, active: ActiveSession, limits: Limits, privacy: str) -> UsageReport:
        conversation = active.agent.conversation
        return UsageReport(active.session_id, conversation.state.usage.model_copy(),
                           conversation.state.tool_calls, limits,
                           context_tokens=conversation.estimated_tokens(),
                           window=active.agent.window, context_privacy=privacy)

    def ask(self, prompt: str, *, on_event: Callable[[Any], None] | None = None) -> UsageReport:
        """Run a turn of the active session; ``@`` references attach what
        ``context_privacy`` allows.

        Raises
        ------
        JupyterAgentError
            No active session; or the model endpoint failed (the prompt stays saved).
        ModelError, KeyboardInterrupt
            The exception carries the turn so far as ``turn`` (a :class:`UsageReport`, or
            ``None`` when the turn did not start).
        """
        from jupyter_agent.agent.events import Notice  # the agent imports openai (~0.6 s)

        active, agent = self._refreshed()
        open_ = [True]

        def forward(event: Any) -> None:
            # the agent keeps its last callback; events after this turn must not reach
            # this turn's renderer (it may update an old cell's output)
            if open_[0] and on_event is not None:
                on_event(event)

        def result(outcome: TurnOutcome) -> UsageReport:
            return replace(
                self._report(active, agent.config.limits, agent.config.context_privacy),
                reply=outcome.reply, stop_reason=outcome.stop_reason, turn_usage=outcome.usage,
                turn_tool_calls=outcome.tool_calls, limit_error=outcome.limit,
                limits_from_options=active.options.given() & set(LIMITS))

        privacy = agent.config.context_privacy
        refs = attach_references(prompt, self.cells, privacy, limit=agent.config.max_output_chars)
        context = notebook_so_far(self.cells, privacy, active.settings.notebook_context_tokens)
        lines = [*refs.attached, *refs.unknown]
        if context is not None:
            cells_run = sum(line.startswith("In [") for line in context.splitlines())
            lines.append(f"sent the notebook since the last prompt: {cells_run} cell(s), "
                         f"{len(context):,} characters (with this turn only)")
        for line in lines:
            forward(Notice(line))
        try:
            outcome = agent.run(refs.prompt, on_event=forward, context=context)
        except (KeyboardInterrupt, JupyterAgentError) as exc:
            carried = getattr(exc, "outcome", None)  # what Agent.run attached
            exc.turn = None if carried is None else result(carried)  # type: ignore[union-attr]
            raise
        finally:
            open_[0] = False
            self.cells.mark()  # the next section starts after this turn
        return result(outcome)

    def compact(self, *, on_event: Callable[[Any], None] | None = None) -> bool:
        """``False`` (and a ``Notice``) when there was nothing to compact or the call failed."""
        return self._refreshed()[1].compact(on_event=on_event)

    def record(self, session_id: str | None = None) -> SessionRecord:
        """Default: the active session's."""
        sid, store = self.target(session_id)
        return store.load_session(sid)

    def read_figure(self, session_id: str, figure_id: str) -> FigureData:
        """Read without the session's lease."""
        sid, store = self.target(session_id)
        return store.read_figure(sid, figure_id)

    def usage(self) -> UsageReport:
        """Of the active session, with the limits the settings say now."""
        active = self._require_active()
        mine = self._settings().with_options(active.options)
        return self._report(active, mine.limits(), mine.context_privacy)

    def agent_cell(self, n: int | None = None) -> tuple[int, int, str]:
        """The active session's ``n``-th ``run_python`` call (default: the last), recorded
        in the checkpoint as handed out: its user turn, its number (1-based) and its code,
        tagged with a first-line comment naming both."""
        from jupyter_agent.agent.working_context import SUMMARY_MARKER  # imports openai

        active = self._require_active()
        found: list[tuple[int, str, str]] = []  # (turn, call ID, code)
        turn = 0
        for step in steps(active.store.load_session(active.session_id).transcript):
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
        return turn, number, f"{tag}\n{code}"

    def _deactivate(self, session_id: str, why: str) -> bool:
        if self._active is None or self._active.session_id != session_id:
            return False
        active, self._active = self._active, None
        active.agent.conversation.close()
        self.ended = (session_id, why)
        return True

    def archive(self, session_id: str | None = None, *, undo: bool = False) -> SessionChange:
        """Archive (``undo``: unarchive) a session, default the active one; archiving the
        active session also deactivates it, so a session in use is never hidden."""
        sid, store = self.target(session_id)
        record = store.load_session(sid)
        if record.archived != undo:
            state = "archived already" if not undo else "not archived"
            raise JupyterAgentError(
                f"session {sid} is {state}: nothing to do"
                + ("" if undo else f" (%agent_archive {sid} --undo unarchives it)"))
        store.update(sid, archived=not undo)
        was_active = not undo and self._deactivate(sid, "archived")
        return SessionChange(sid, "unarchived" if undo else "archived", was_active, record.title)

    def delete(self, session_id: str) -> SessionChange:
        """Deactivate the session first if it is the active one."""
        sid, store = self.target(session_id)
        try:
            title = store.load_session(sid).title
        except JupyterAgentError:
            if self.active_session_id == sid:  # unreadable: say so before deactivating anything
                raise
            title = ""  # a corrupt one can be deleted
        was_active = self._deactivate(sid, "deleted")
        store.delete_session(sid)
        self._remembered.pop(sid, None)
        return SessionChange(sid, "deleted", was_active, title)

    def fork(self, session_id: str | None = None, *, at: int | None = None,
             title: str | None = None) -> Forked:
        """Fork a session (default: the active one; read without its lease), keeping user
        turns 1 to ``at``, and resume the fork with the parent's options in this kernel
        (``ModelNotConfiguredError`` leaves the fork saved, not active)."""
        parent, store = self.target(session_id)
        forked = fork_session(store, parent, at=at, title=title, into=self.store)
        self._remembered[forked.record.id] = self._remembered.get(parent, SessionOptions())
        return replace(forked, record=self.resume(forked.record.id).record)

    def export(self, session_id: str | None = None, *, fmt: str | None = None,
               output: str | os.PathLike[str] | None = None, force: bool = False) -> Exported:
        """Export a session (default: the active one) to a file, without its lease, with
        secrets (also the ``api_key_env`` variable's value) redacted."""
        # (detect-secrets: ~0.25 s to import)
        from jupyter_agent.artefacts.export import export_record
        from jupyter_agent.artefacts.redact import secrets_from_environ

        sid, store = self.target(session_id)
        secrets = secrets_from_environ(os.environ if self._environ is None else self._environ,
                                       [self._settings().api_key_env])
        return export_record(store.load_session(sid), fmt, output, force=force, secrets=secrets,
                             figures=lambda fid: store.read_figure(sid, fid))

    def close(self) -> None:
        """Deactivate the active session (releasing its lease) and close the stores."""
        active, self._active = self._active, None
        if active is not None:
            active.agent.conversation.close()
        self.cells.stop()
        for store in self._stores.values():
            getattr(store, "close", lambda: None)()
        self._stores.clear()


def share_session(store: Store, session_id: str, roles: Sequence[str], *,
                  undo: bool = False) -> tuple[list[str], str]:
    """Share a session read-only with database roles, or stop (``undo``); return the roles
    it is shared with now and the line saying so (``JupyterAgentError`` for the JSON files:
    nobody to share with)."""
    share = getattr(store, "share_session", None)
    if share is None:
        raise JupyterAgentError("sharing needs the team store (AgentMagics.store_url or "
                                "$JUPYTER_AGENT_STORE_URL): the JSON files are one user's")
    if not roles:
        raise JupyterAgentError("name the database roles to share with (or stop sharing with)")
    try:
        now = list(share(session_id, list(roles), undo=undo))
    except ValueError as err:
        raise JupyterAgentError(str(err)) from None
    return now, f"Session {session_id} is shared with {', '.join(map(repr, now)) or 'nobody'}."
