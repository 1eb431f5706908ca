"""Where sessions live: the project root and the memory directory.

The rule (issue 4, "Where sessions live"), first match wins:

1. the ``AgentMagics.memory_dir`` setting, if it is not empty;
2. the ``JUPYTER_AGENT_MEMORY_DIR`` environment variable, if it is set and not empty;
3. ``<project root>/.jupyter_agent``.

The project root is the nearest ancestor of the kernel's working directory (a notebook's
kernel starts in the notebook's folder), the directory itself included, that contains
``.jupyter_agent``, ``.git`` or ``pyproject.toml``; if none does, it is the working
directory itself. The spec keeps notes (``project.md``, ``user.md``) and ``sessions/``
in that one memory directory.

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


def find_project_root(start: str | os.PathLike[str] | None = None) -> Path:
    """Return the project root for a working directory.

    Parameters
    ----------
    start : path-like, optional
        The kernel's working directory; defaults to :func:`os.getcwd` at call time.

    Returns
    -------
    pathlib.Path
        The nearest of ``start`` and its ancestors that contains one of
        :data:`PROJECT_MARKERS` (``.jupyter_agent``, ``.git`` or ``pyproject.toml``),
        else ``start`` itself. Absolute; symbolic links are resolved.
    """
    here = Path(os.getcwd() if start is None else start).expanduser().resolve()
    for candidate in (here, *here.parents):
        if any((candidate / marker).exists() for marker in PROJECT_MARKERS):
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
