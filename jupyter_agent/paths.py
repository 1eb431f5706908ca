"""Where sessions live: the project root and the memory directory.

The rule, first match wins:

1. the ``AgentMagics.memory_dir`` setting, if it is not empty;
2. the ``JUPYTER_AGENT_MEMORY_DIR`` environment variable, if it is set and not empty;
3. ``<project root>/.jupyter_agent``.

The project root is the nearest ancestor of the kernel's working directory (a notebook's
kernel starts in the notebook's folder), the directory itself included, that contains
``.jupyter_agent``, ``.git`` or ``pyproject.toml``; if none does, it is the working
directory itself. Notes (``project.md``, ``user.md``) and ``sessions/`` live in that one
memory directory (design §2).

A ``.jupyter_agent`` planted by someone else is never adopted (design §2): a directory
that holds a ``.jupyter_agent`` counts as a project root only if both belong to the
current user and ``.jupyter_agent`` is a real directory (not a symbolic link);
otherwise the search goes on upwards as if that directory were not there.

The front end resolves the working directory and the project root once, when the
extension is loaded (the kernel's starting directory), and passes them in: an
``os.chdir`` in the kernel later -- by the user or by code the agent runs -- does not
switch the sessions listed. The setting and the environment variable are read each time.

Everything here is a pure function of its arguments; the environment and the working
directory are read only when a function is called without them, never at import.
Nothing is created on disk: the store creates the directory when it first writes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "MEMORY_DIR_ENV",
    "MEMORY_DIR_NAME",
    "PROJECT_MARKERS",
    "find_project_root",
    "resolve_memory_dir",
]

#: Environment variable naming the memory directory (rule 2).
MEMORY_DIR_ENV = "JUPYTER_AGENT_MEMORY_DIR"
#: Name of the memory directory inside the project root (rule 3).
MEMORY_DIR_NAME = ".jupyter_agent"
#: Entries whose presence makes a directory a project root, in no particular order.
PROJECT_MARKERS = (MEMORY_DIR_NAME, ".git", "pyproject.toml")


def _absolute(path: str | os.PathLike[str], base: Path) -> Path:
    """``path`` with ``~`` expanded, made absolute against ``base`` (not resolved)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else base / p


def _adoptable(candidate: Path, uid: int) -> bool | None:
    """Whether ``candidate`` may be a project root: ``None`` if it has no marker, False if
    it holds a ``.jupyter_agent`` that is not the user's own (see the module docstring)."""
    try:
        memory = os.lstat(candidate / MEMORY_DIR_NAME)
    except OSError:
        memory = None
    if memory is not None:
        try:
            owner = os.stat(candidate).st_uid
        except OSError:
            return False
        return stat.S_ISDIR(memory.st_mode) and memory.st_uid == uid and owner == uid
    if any((candidate / marker).exists() for marker in PROJECT_MARKERS[1:]):
        return True
    return None


def find_project_root(start: str | os.PathLike[str] | None = None, *,
                      uid: int | None = None) -> Path:
    """Return the project root for a working directory.

    Parameters
    ----------
    start : path-like, optional
        The kernel's working directory; defaults to :func:`os.getcwd` at call time.
    uid : int, optional
        The user whose ``.jupyter_agent`` directories may be adopted; default
        :func:`os.geteuid`.

    Returns
    -------
    pathlib.Path
        The nearest of ``start`` and its ancestors that contains one of
        :data:`PROJECT_MARKERS` (``.jupyter_agent``, ``.git`` or ``pyproject.toml``),
        skipping any directory whose ``.jupyter_agent`` is not the user's own (module
        docstring), else ``start`` itself. Absolute; symbolic links are resolved.
    """
    me = os.geteuid() if uid is None else uid
    here = Path(os.getcwd() if start is None else start).expanduser().resolve()
    for candidate in (here, *here.parents):
        if _adoptable(candidate, me):
            return candidate
    return here


def resolve_memory_dir(
    setting: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    project_root: str | os.PathLike[str] | None = None,
) -> Path:
    """Return the memory directory for a setting, an environment and a working directory.

    Parameters
    ----------
    setting : path-like or None, optional
        The ``AgentMagics.memory_dir`` setting; ``None`` or ``""`` means unset.
    environ : mapping, optional
        The environment to read :data:`MEMORY_DIR_ENV` from; defaults to
        :data:`os.environ` at call time.
    cwd : path-like, optional
        The working directory that relative paths and the project-root search start
        from; defaults to :func:`os.getcwd` at call time.
    project_root : path-like, optional
        The project root for rule 3, if already known; else :func:`find_project_root`
        of ``cwd``.

    Returns
    -------
    pathlib.Path
        An absolute path (``~`` expanded, relative paths taken from ``cwd``). The
        directory may not exist yet.
    """
    env = os.environ if environ is None else environ
    base = Path(os.getcwd() if cwd is None else cwd).expanduser().resolve()
    if setting is not None and os.fspath(setting) != "":
        return _absolute(setting, base)
    from_env = env.get(MEMORY_DIR_ENV, "")
    if from_env:
        return _absolute(from_env, base)
    root = find_project_root(base) if project_root is None else Path(project_root)
    return root / MEMORY_DIR_NAME
