"""What every ``jupyter agent`` command gets: the memory directory, its store, output.

The memory directory is found as the magics find it (``jupyter_agent.paths``):
``--memory-dir``, else ``$JUPYTER_AGENT_MEMORY_DIR``, else ``<project root>/.jupyter_agent``
where the project root is the nearest folder above the current directory with a
``.jupyter_agent``, ``.git`` or ``pyproject.toml``. (``--memory-dir`` stands for the
``AgentMagics.memory_dir`` setting, which the command line does not read.)

With ``$JUPYTER_AGENT_STORE_URL`` set, the commands work on that team store
instead of the JSON files, as the magics do.

Reads never take a lease; the store's holder label names the command, so a kernel that
finds a session briefly held by it is told ``jupyter agent rm`` (or whichever).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import IO, Any, TypeVar

from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.paths import find_project_root, resolve_memory_dir
from jupyter_agent.store import FileStore, Store

__all__ = ["Context"]

T = TypeVar("T")


@dataclass
class Context:
    """The environment of one command.

    Attributes
    ----------
    command : str
        The subcommand's name (for the lease holder label).
    memory_dir : pathlib.Path
    json : bool
        Print JSON for scripts instead of text.
    out, err : text streams
        Standard output and error.
    environ : mapping
        The environment (keys to redact from exports).
    """

    command: str
    memory_dir: Path
    json: bool = False
    out: IO[str] = field(default_factory=lambda: sys.stdout)
    err: IO[str] = field(default_factory=lambda: sys.stderr)
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    _opened: list[Any] = field(default_factory=list, repr=False)

    @classmethod
    def from_args(cls, command: str, memory_dir: str | None, json_output: bool) -> Context:
        """The context of a parsed command line (the memory directory resolved now)."""
        return cls(command, resolve_memory_dir(memory_dir), json=json_output)

    @property
    def label(self) -> str:
        """How this command names itself as a lease holder (``"jupyter agent rm"``)."""
        return f"jupyter agent {self.command}"

    @cached_property
    def files(self) -> FileStore:
        """The JSON files of :attr:`memory_dir` (nothing is created until a command writes)."""
        return FileStore(self.memory_dir, holder_label=self.label)

    @cached_property
    def store(self) -> Store:
        """The team store of ``$JUPYTER_AGENT_STORE_URL`` if set, else :attr:`files`.

        Raises
        ------
        JupyterAgentError
            When the variable holds something that is not a PostgreSQL URL.
        """
        from jupyter_agent.store.postgres.url import resolve_store_url

        try:
            url = resolve_store_url(None, environ=self.environ)
        except ValueError as err:
            raise JupyterAgentError(str(err)) from None
        return self.team_store(url) if url else self.files

    def team_store(self, url: str) -> Store:
        """The PostgreSQL store at ``url`` for this project (notes stay in the memory
        directory); its connection is closed when the command ends."""
        from jupyter_agent.paths import project_key
        from jupyter_agent.store.postgres import PostgresStore

        store = PostgresStore(url, self.memory_dir, project=project_key(find_project_root()),
                              holder_label=self.label)
        self._opened.append(store)
        return store

    def close(self) -> None:
        """Close the database connections this command opened."""
        for store in self._opened:
            store.close()
        self._opened.clear()

    def print(self, text: str) -> None:
        """Write a line of text to standard output, its escape sequences and control
        characters made inert (titles, summaries and prompts come from session files)."""
        from jupyter_agent.ui.display import terminal_text

        print(terminal_text(text), file=self.out)

    def emit_json(self, value: Any) -> None:
        """Write ``value`` as indented JSON to standard output; C1 controls and
        bidirectional overrides are written as ``\\u`` escapes, as JSON writes C0 ones."""
        text = json.dumps(value, indent=2, ensure_ascii=False)
        print(_JSON_CONTROLS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text), file=self.out)

    def progress(self, what: str, unit: str) -> Any:
        """A :data:`~jupyter_agent.artefacts.steps.Progress` for a long operation: a
        ``tqdm`` bar on standard error when it is a terminal, else nothing at all."""
        if not _is_terminal(self.err):
            return _silent

        def show(items: Iterable[T], total: int) -> Iterable[T]:
            from tqdm import tqdm

            width = shutil.get_terminal_size((80, 24)).columns  # a terminal may report 0
            return tqdm(items, total=total, desc=what, unit=unit, file=self.err, leave=False,
                        ncols=min(width, 100) if width > 0 else 80)

        return show


_JSON_CONTROLS = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _silent(items: Iterable[T], total: int) -> Iterable[T]:
    return items


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
