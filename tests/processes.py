"""Second processes for the tests: another kernel on the same storage.

Plain helpers over ``store_child.py`` (a script run with ``sys.executable``), for either
backend. The child learns which storage to open from its environment, made by
:func:`store_env`: a description in ``$JUPYTER_AGENT_TEST_STORE`` and, for a database,
its URL in ``$JUPYTER_AGENT_STORE_URL`` (never on a command line). The contract suite's
``Backend.child_env()`` and the ``hold`` fixture of ``tests/conftest.py`` are built on it.

- :func:`run_child` runs one ``try`` or ``create`` and returns its JSON line;
- :class:`Holder` is a child that holds a session's lease until told to exit or killed
  (``hold``), optionally after forking a child of its own that lives on (``forkhold``);
- :func:`eventually` waits for something a server notices a moment later (a killed
  holder's database connection).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["CHILD", "DESCRIPTION_ENV", "Hold", "Holder", "eventually", "run_child", "store_env"]

CHILD = str(Path(__file__).with_name("store_child.py"))
#: The environment variable describing the storage to ``store_child.py`` (JSON).
DESCRIPTION_ENV = "JUPYTER_AGENT_TEST_STORE"


def store_env(memory: str | os.PathLike[str], *, url: str = "",
              project: str = "") -> dict[str, str]:
    """The environment of a child process opening the storage of a test.

    Parameters
    ----------
    memory : str or os.PathLike
        The memory directory (the session files when ``url`` is empty).
    url : str
        A PostgreSQL URL: the child opens the team store of ``project`` on it.
    project : str
        The project key (team store only).

    Returns
    -------
    dict of str to str
        This process's environment plus the description (and the URL, if any).
    """
    description = {"backend": "postgres" if url else "json", "memory": str(memory),
                   "project": project}
    env = {**os.environ, DESCRIPTION_ENV: json.dumps(description)}
    if url:
        env["JUPYTER_AGENT_STORE_URL"] = url
    return env


def run_child(env: Mapping[str, str], mode: str, session_id: str, *extra: str) -> dict[str, Any]:
    """Run ``store_child.py MODE SESSION_ID [EXTRA]`` to its end; return the JSON it prints."""
    out = subprocess.run([sys.executable, CHILD, mode, session_id, *extra],
                         capture_output=True, text=True, timeout=120, check=False,
                         env=dict(env))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert isinstance(result, dict)
    return result


class Holder:
    """A child process holding a session's lease (``hold``) until :meth:`exit` or
    :meth:`kill`; with ``fork=True`` it has forked a child that outlives it
    (``forkhold``; its pid is :attr:`forked`)."""

    def __init__(self, env: Mapping[str, str], session_id: str, label: str = "", *,
                 fork: bool = False) -> None:
        mode = "forkhold" if fork else "hold"
        self.proc = subprocess.Popen([sys.executable, CHILD, mode, session_id, label],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=dict(env))
        assert self.proc.stdout is not None
        words = self.proc.stdout.readline().split()
        assert words[:2] == ["held", str(self.proc.pid)], words
        self.forked = int(words[3]) if fork else None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def exit(self) -> None:
        """Close its stdin: it releases the lease and exits."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0

    def kill(self) -> None:
        """SIGKILL: no cleanup in the child at all."""
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=60) == -signal.SIGKILL

    def stop(self) -> None:
        """Kill it (and its forked child) if still running: for fixtures' cleanup."""
        if self.proc.poll() is None:
            self.kill()
        if self.forked is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.forked, signal.SIGKILL)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


#: The type of the ``hold`` fixture (``tests/conftest.py``): ``hold(session_id, label="")``.
Hold = Callable[..., Holder]


def eventually(check: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait until ``check()`` is true (a database notices a dropped connection within
    moments; the files at once)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
