"""Where sessions live: the project root and the memory directory.

The rule, first match wins:

1. the ``AgentMagics.memory_dir`` setting, if it is not empty;
2. the ``JUPYTER_AGENT_MEMORY_DIR`` environment variable, if it is set and not empty;
3. ``<project root>/.jupyter_agent``.

The project root is the nearest ancestor of the kernel's working directory (a notebook's
kernel starts in the notebook's folder), the directory itself included, that contains
``.jupyter_agent``, ``.git`` or ``pyproject.toml``; if none does, it is the working
directory itself. Notes (``project.md``, ``user.md``) and ``sessions/`` live in that one
memory directory.

A ``.jupyter_agent`` planted by someone else is never adopted: a directory
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
import re
import stat
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "MEMORY_DIR_ENV",
    "MEMORY_DIR_NAME",
    "PROJECT_MARKERS",
    "current_user",
    "find_project_root",
    "normalize_remote_url",
    "project_key",
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


# --------------------------------------------------------------------------- project key
_GIT_CONFIG_MAX_BYTES = 1 << 20
_REMOTE_SECTION = re.compile(r'^\s*\[\s*remote\s+"((?:[^"\\]|\\.)*)"\s*\]\s*(?:[#;].*)?$')
_SECTION = re.compile(r"^\s*\[")
_URL_LINE = re.compile(r"^\s*url\s*=\s*(.*?)\s*$", re.IGNORECASE)
_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?([^:/\s]+):(?!//)(.+)$")


def _read_small_file(path: Path) -> str | None:
    """The text of a regular file of at most 1 MiB, or ``None`` (never blocks, no FIFOs)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _GIT_CONFIG_MAX_BYTES:
            return None
        return handle.read(_GIT_CONFIG_MAX_BYTES).decode("utf-8", errors="replace")


def _git_dir(dot_git: Path) -> Path | None:
    """The git directory behind a work tree's ``.git`` (a directory, or a ``gitdir:`` file)."""
    if dot_git.is_dir():
        return dot_git
    text = _read_small_file(dot_git)
    if text is None or not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:"):].strip())
    return target if target.is_absolute() else dot_git.parent / target


def _remote_url(git_dir: Path) -> str | None:
    """The URL of remote ``origin`` in the repository's config, else of its first remote."""
    common = _read_small_file(git_dir / "commondir")  # linked work trees share one config
    if common is not None and common.strip():
        base = Path(common.strip())
        git_dir = base if base.is_absolute() else git_dir / base
    text = _read_small_file(git_dir / "config")
    if text is None:
        return None
    urls: dict[str, str] = {}
    remote: str | None = None
    for line in text.splitlines():
        header = _REMOTE_SECTION.match(line)
        if header is not None:
            remote = header.group(1)
            continue
        if _SECTION.match(line):
            remote = None
            continue
        found = _URL_LINE.match(line)
        if remote is not None and found is not None and found.group(1):
            urls.setdefault(remote, found.group(1).strip('"'))
    if "origin" in urls:
        return urls["origin"]
    return next(iter(urls.values()), None)


def normalize_remote_url(url: str) -> str:
    """A git remote URL as ``host/path``: no scheme, credentials, port or ``.git`` suffix.

    ``https://user:token@GitHub.com/org/repo.git``, ``git@github.com:org/repo.git`` and
    ``ssh://git@github.com:22/org/repo`` all give ``github.com/org/repo``, so clones made
    over HTTPS and over SSH name the same project, and a token embedded in a remote URL
    never leaves the machine. A local path (``/srv/git/repo.git``, ``file:///srv/...``)
    gives the path (``/srv/git/repo``).

    Parameters
    ----------
    url : str
        The ``remote.<name>.url`` value of a git config.

    Returns
    -------
    str
        The normalized form ("" for an empty URL).
    """
    from urllib.parse import urlsplit

    text = url.strip()
    if "://" in text:
        parts = urlsplit(text)
        host = (parts.hostname or "").lower()
        path = parts.path
    else:
        scp = _SCP_LIKE.match(text)
        if scp is not None and not text.startswith(("/", ".", "~")):
            host, path = scp.group(1).lower(), scp.group(2)
        else:
            host, path = "", text
    path = path.rstrip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")]
    if not host:
        return path
    return f"{host}/{path.lstrip('/')}"


def current_user(environ: Mapping[str, str] | None = None) -> str:
    """Who is working: ``$JUPYTERHUB_USER`` when set (every user's server may run as the
    same OS user, e.g. ``jovyan``), else the OS user ("" when neither is known)."""
    env = os.environ if environ is None else environ
    user = env.get("JUPYTERHUB_USER", "")
    if not user:
        import getpass

        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = ""
    return user


def project_key(project_root: str | os.PathLike[str], *, user: str | None = None,
                host: str | None = None) -> str:
    """The name under which a team store files a user's sessions of a project.

    It names the user too, so two people whose notebooks sit at the same path -- every
    JupyterHub user's ``/home/jovyan/work`` -- never share a key, even when they log in
    to the database as one role:

    * when the project root is inside a git work tree with a remote (``origin``, else
      the first one): ``user@`` and the remote's normalized URL
      (:func:`normalize_remote_url`), plus the project root's path inside the work tree
      when it is not the top, e.g. ``alice@github.com/acme/analyses/penguins`` -- the
      same on every machine and in every clone of that user;
    * otherwise ``user@host:`` and the project root's absolute path, e.g.
      ``alice@jupyter-alice:/home/jovyan/work``.

    Only files are read (``.git`` and the repository's ``config``; git itself is not
    run), without following FIFOs or reading more than 1 MiB; nothing is written.

    Parameters
    ----------
    project_root : path-like
        The project root, as :func:`find_project_root` returns it.
    user : str, optional
        Default :func:`current_user`.
    host : str, optional
        Default ``socket.gethostname()``.

    Returns
    -------
    str
        The project key; never contains credentials from the remote URL.
    """
    who = current_user() if user is None else user
    root = Path(project_root).expanduser().resolve()
    for candidate in (root, *root.parents):
        dot_git = candidate / ".git"
        if not os.path.lexists(dot_git):
            continue
        git_dir = _git_dir(dot_git)
        url = _remote_url(git_dir) if git_dir is not None else None
        remote = normalize_remote_url(url) if url else ""
        if not remote:
            break
        inside = root.relative_to(candidate).as_posix()
        return f"{who}@{remote}" if inside == "." else f"{who}@{remote}/{inside}"
    if host is None:
        import socket

        host = socket.gethostname()
    return f"{who}@{host}:{root.as_posix()}"
