"""Where one kernel's sessions live: its project root, memory directory and store.

The project root is found once, from the kernel's starting directory, so an
``os.chdir`` later does not move the sessions. The memory directory and the store are
chosen from the current settings each time they are asked for (``%config`` applies at
once); a store is made once per (store URL, memory directory) and reused, so its
leases and caches live as long as the kernel.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_agent.errors import JupyterAgentError, describe_holder
from jupyter_agent.paths import find_project_root, project_key, resolve_memory_dir
from jupyter_agent.ui.kernel import kernel_label

if TYPE_CHECKING:
    from jupyter_agent.settings import Settings
    from jupyter_agent.store import Store

__all__ = ["Project", "newest_session"]

_ARCHIVED_COUNTED = 100  # archived sessions counted in the message of newest_session


class Project:
    """The project of a kernel and the stores its settings select.

    Parameters
    ----------
    settings : callable
        Returns the current :class:`~jupyter_agent.settings.Settings`.
    shell : InteractiveShell, optional
        For the label written with each lease (:func:`~jupyter_agent.ui.kernel.kernel_label`).
    environ : mapping, optional
        Environment (``$JUPYTER_AGENT_MEMORY_DIR``, ``$JUPYTER_AGENT_STORE_URL``);
        :data:`os.environ` by default.
    cwd : path-like, optional
        The kernel's starting directory; default :func:`os.getcwd` now.
    """

    def __init__(self, settings: Callable[[], Settings], *, shell: Any = None,
                 environ: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None) -> None:
        self._settings = settings
        self._shell = shell
        self._environ = environ
        self._cwd = Path(os.getcwd() if cwd is None else cwd).expanduser().resolve()
        self.root = find_project_root(self._cwd)
        """The project root of the starting directory (a :class:`~pathlib.Path`)."""
        self._stores: dict[tuple[str, Path], Store] = {}

    @property
    def memory_dir(self) -> Path:
        """The memory directory the settings select now (see :mod:`jupyter_agent.paths`)."""
        return resolve_memory_dir(self._settings().memory_dir or None, environ=self._environ,
                                  cwd=self._cwd, project_root=self.root)

    @property
    def store(self) -> Store:
        """The store the settings select now, one per URL and memory directory, reused.

        With ``store_url`` (else ``$JUPYTER_AGENT_STORE_URL``) a PostgreSQL store of
        this project (:func:`~jupyter_agent.paths.project_key` of :attr:`root`; the
        notes stay in :attr:`memory_dir`); without, the JSON files of :attr:`memory_dir`.

        Raises
        ------
        JupyterAgentError
            When the store URL is not a PostgreSQL URL.
        """
        from jupyter_agent.store.postgres.url import resolve_store_url

        root = self.memory_dir
        try:
            url = resolve_store_url(self._settings().store_url, environ=self._environ)
        except ValueError as err:
            raise JupyterAgentError(str(err)) from None
        key = (url, root)
        if key not in self._stores:
            label = kernel_label(self._shell, self._environ, self.root)
            if url:
                from jupyter_agent.store.postgres import PostgresStore

                self._stores[key] = PostgresStore(url, root, holder_label=label,
                                                  project=project_key(self.root))
            else:
                from jupyter_agent.store import FileStore

                self._stores[key] = FileStore(root, holder_label=label)
        return self._stores[key]

    def close(self) -> None:
        """Close every store made so far (a database store's connection); they are made
        again when next asked for."""
        for store in self._stores.values():
            close = getattr(store, "close", None)
            if close is not None:
                close()
        self._stores.clear()


_PAGE = 8


def newest_session(store: Store) -> str:
    """The most recently changed non-archived session that loads and that no one else
    holds (listings leave out sessions that do not load); pages of a few entries, so a
    team store reads a few rows however many sessions the project has.

    Raises
    ------
    JupyterAgentError
        There is none; the message says whether sessions in use elsewhere or archived
        sessions exist (their number, up to :data:`_ARCHIVED_COUNTED`).
    """
    page = store.list_sessions(limit=_PAGE)
    busy: list[Any] = []
    while page:
        for listed in page:
            if listed.status != "in use":
                return listed.id
            busy.append(listed)
        page = store.list_sessions(limit=_PAGE, after=page[-1]) if len(page) == _PAGE else []
    if busy:
        where = getattr(store, "location", None) or getattr(store, "root", "the store")
        n = len(busy)
        who = describe_holder(busy[0].holder) if busy[0].holder is not None else ""
        raise JupyterAgentError(
            f"no session to resume in {where}: the {n} saved session{'s are' if n > 1 else ' is'}"
            f" in use elsewhere (newest: {busy[0].id}, in use by {who or 'another process'});"
            " stop that kernel to resume it here, or start one with %agent_new")
    where = getattr(store, "location", None) or getattr(store, "root", "the store")
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
