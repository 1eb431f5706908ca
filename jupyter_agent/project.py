"""Where a kernel's sessions live: project root, memory directory, and the one place that
opens a store (also for the CLI).

The memory directory is ``AgentMagics.memory_dir`` if not empty, else
``$JUPYTER_AGENT_MEMORY_DIR`` if not empty, else ``<project root>/.jupyter_agent``. The
project root is the nearest of the working directory and its ancestors holding
``.jupyter_agent``, ``.git`` or ``pyproject.toml``, else the working directory; a
``.jupyter_agent`` counts only if it is a real directory and both it and its parent
belong to the current user. Nothing is created on disk.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.notebook import can_ask, is_jupyter
from jupyter_agent.paths import STORE_URL_ENV, project_key
from jupyter_agent.store import FileStore, SessionRecord, Store

_ARCHIVED_COUNTED = 100  # archived sessions counted in the message of newest_session
_PAGE = 8
MEMORY_DIR_ENV = "JUPYTER_AGENT_MEMORY_DIR"
MEMORY_DIR_NAME = ".jupyter_agent"
PROJECT_MARKERS = (MEMORY_DIR_NAME, ".git", "pyproject.toml")


def _adoptable(candidate: Path, uid: int) -> bool:
    # a .jupyter_agent decides: only the user's own counts; else any other marker
    try:
        memory = os.lstat(candidate / MEMORY_DIR_NAME)
    except OSError:
        return any((candidate / marker).exists() for marker in PROJECT_MARKERS[1:])
    try:
        owner = os.stat(candidate).st_uid
    except OSError:
        return False
    return stat.S_ISDIR(memory.st_mode) and memory.st_uid == uid and owner == uid


def find_project_root(start: str | os.PathLike[str] | None = None, *,
                      uid: int | None = None) -> Path:
    """Absolute, symbolic links resolved; ``uid`` (default: this user) owns adoptable memory
    dirs."""
    me = os.geteuid() if uid is None else uid
    here = Path(os.getcwd() if start is None else start).expanduser().resolve()
    for candidate in (here, *here.parents):
        if _adoptable(candidate, me):
            return candidate
    return here


def resolve_memory_dir(setting: str | os.PathLike[str] | None = None, *,
                       environ: Mapping[str, str] | None = None,
                       cwd: str | os.PathLike[str] | None = None,
                       project_root: str | os.PathLike[str] | None = None) -> Path:
    """Absolute (relative paths taken from ``cwd``); it may not exist yet. ``setting``
    ``None`` or ``""`` means unset."""
    env = os.environ if environ is None else environ
    base = Path(os.getcwd() if cwd is None else cwd).expanduser().resolve()
    chosen = (os.fspath(setting) if setting is not None else "") or env.get(MEMORY_DIR_ENV, "")
    if chosen:
        path = Path(chosen).expanduser()
        return path if path.is_absolute() else base / path
    root = find_project_root(base) if project_root is None else Path(project_root)
    return root / MEMORY_DIR_NAME


def open_store(memory_dir: str | os.PathLike[str] | None = None, url: str | None = None, *,
               holder_label: str = "", project_root: str | os.PathLike[str] | None = None,
               environ: Mapping[str, str] | None = None) -> Store:
    """The team store of ``url`` (default: ``$JUPYTER_AGENT_STORE_URL``; ``JupyterAgentError``
    if not PostgreSQL), filing the sessions under ``project_root`` (close it when done), else
    the JSON files of ``memory_dir``. ``holder_label`` is written with each lease."""
    root = Path(memory_dir).expanduser() if memory_dir else resolve_memory_dir(environ=environ)
    url = chosen_store_url(url, environ)
    if not url:
        return FileStore(root, holder_label=holder_label)
    from jupyter_agent.store.postgres import PostgresStore  # see chosen_store_url

    project = project_key(project_root if project_root is not None else find_project_root())
    return PostgresStore(url, root, project=project, holder_label=holder_label)


def chosen_store_url(url: str | None, environ: Mapping[str, str] | None = None) -> str:
    """``url``, else ``$JUPYTER_AGENT_STORE_URL`` (``JupyterAgentError`` if not PostgreSQL);
    ``""`` for the JSON files."""
    if not url and not (os.environ if environ is None else environ).get(STORE_URL_ENV, "").strip():
        return ""
    # imported here: the team store's package costs ~16 ms at %load_ext (measured)
    from jupyter_agent.store.postgres.url import check_store_url, resolve_store_url

    try:
        return check_store_url(resolve_store_url(url, environ=environ))
    except ValueError as err:
        raise JupyterAgentError(str(err)) from None


def confirm_delete(shell: Any, record: SessionRecord, refused: str) -> bool:
    """``JupyterAgentError(refused)`` when nobody can answer."""
    if not can_ask(shell):
        raise JupyterAgentError(refused)
    name = f" ({record.title})" if record.title else ""
    try:  # (IPython's StdinNotImplementedError is a NotImplementedError)
        answer = input(f"Delete session {record.id}{name} for good? [y/N] ")
    except (EOFError, OSError, NotImplementedError) as err:
        print()  # the question is on screen without a line end
        raise JupyterAgentError(refused) from err
    return answer.strip().lower() in ("y", "yes")


def kernel_label(shell: Any = None, environ: Mapping[str, str] | None = None,
                 project_root: Path | None = None) -> str:
    """For people who find its session in use: the notebook's path, else what kind of
    kernel; never anything secret."""
    env = os.environ if environ is None else environ
    ns = getattr(shell, "user_ns", None) or {}
    name = str(ns.get("__session__") or env.get("JPY_SESSION_NAME") or "")
    if project_root is not None and Path(name).is_relative_to(project_root):
        return str(Path(name).relative_to(project_root))
    if name:
        return name
    if is_jupyter(shell):
        return "a Jupyter kernel"
    return "IPython (terminal)" if shell is not None else "Python"


def newest_session(store: Store) -> str:
    """The most recently changed session that loads, is not archived and no one else holds;
    ``JupyterAgentError`` saying whether others are in use or archived."""
    page = store.list_sessions(limit=_PAGE)
    busy: list[Any] = []
    while page:
        for listed in page:
            if listed.status != "in use":
                return listed.id
            busy.append(listed)
        page = store.list_sessions(limit=_PAGE, after=page[-1]) if len(page) == _PAGE else []
    where = getattr(store, "location", None) or getattr(store, "root", "the store")
    if busy:
        n = len(busy)
        who = busy[0].holder.describe() if busy[0].holder is not None else ""
        raise JupyterAgentError(
            f"no session to resume in {where}: the {n} saved session{'s are' if n > 1 else ' is'}"
            f" in use elsewhere (newest: {busy[0].id}, in use by {who or 'another process'});"
            " stop that kernel to resume it here, or start one with %agent_new")
    hidden = store.list_sessions(include_archived=True, limit=_ARCHIVED_COUNTED + 1)
    if not hidden:
        raise JupyterAgentError(f"no saved sessions in {where}: start one with %agent_new")
    n = len(hidden)
    count = (f"the {n} saved session{'s are' if n > 1 else ' is'}" if n <= _ARCHIVED_COUNTED
             else f"more than {_ARCHIVED_COUNTED} saved sessions are")
    raise JupyterAgentError(
        f"no session to resume in {where}: {count} archived; %agent_resume ID takes one "
        f"out of the archive (%agent_sessions --all lists them, newest: {hidden[0].id}), "
        "or start one with %agent_new")
