"""Under which name a team store files a user's sessions of a project: who is working
and which repository the project is (read from ``.git`` files, never by running git).
"""

from __future__ import annotations

import getpass
import os
import re
import socket
import stat
from pathlib import Path
from urllib.parse import urlsplit

STORE_URL_ENV = "JUPYTER_AGENT_STORE_URL"
_GIT_CONFIG_MAX_BYTES = 1 << 20
_REMOTE_SECTION = re.compile(r'^\s*\[\s*remote\s+"((?:[^"\\]|\\.)*)"\s*\]\s*(?:[#;].*)?$')
_SECTION = re.compile(r"^\s*\[")
_URL_LINE = re.compile(r"^\s*url\s*=\s*(.*?)\s*$", re.IGNORECASE)
_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?([^:/\s]+):(?!//)(.+)$")


def _read_small_file(path: Path) -> str | None:
    # a regular file of at most 1 MiB, else None; never blocks on a FIFO
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
    if dot_git.is_dir():
        return dot_git
    text = _read_small_file(dot_git)
    if text is None or not text.startswith("gitdir:"):
        return None
    return dot_git.parent / text[len("gitdir:"):].strip()  # (an absolute path replaces it)


def _remote_url(git_dir: Path) -> str | None:
    # the URL of remote origin, else of the first remote
    common = _read_small_file(git_dir / "commondir")  # linked work trees share one config
    if common is not None and common.strip():
        git_dir = git_dir / common.strip()  # (an absolute path replaces it)
    text = _read_small_file(git_dir / "config")
    if text is None:
        return None
    urls: dict[str, str] = {}
    remote: str | None = None
    for line in text.splitlines():
        if _SECTION.match(line):  # a remote's section, or another one
            header = _REMOTE_SECTION.match(line)
            remote = None if header is None else header.group(1)
        elif remote is not None and (found := _URL_LINE.match(line)) and found.group(1):
            urls.setdefault(remote, found.group(1).strip('"'))
    return urls.get("origin", next(iter(urls.values()), None))


def normalize_remote_url(url: str) -> str:
    """``host/path`` without scheme, credentials, port or ``.git``: HTTPS and SSH clones give
    the same, and no token leaves the machine; a local path gives the path."""
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
    path = path.rstrip("/").removesuffix(".git")
    return f"{host}/{path.lstrip('/')}" if host else path


def current_user() -> str:
    """Who is working: ``$JUPYTERHUB_USER`` when set (every user's server may run as the
    same OS user, e.g. ``jovyan``), else the OS user ("" when neither is known)."""
    if os.environ.get("JUPYTERHUB_USER"):
        return os.environ["JUPYTERHUB_USER"]
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def project_key(project_root: str | os.PathLike[str], *, user: str | None = None,
                host: str | None = None) -> str:
    """In a git work tree with a remote: ``alice@github.com/acme/analyses/penguins`` (the
    remote's normalized URL, plus the root's path inside the tree), the same in every
    clone; else ``alice@host:/abs/path``. The user is part of it, so JupyterHub users at
    the same path never share a key. Only ``.git`` files are read (no FIFOs, at most
    1 MiB); git is not run.
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
    return f"{who}@{socket.gethostname() if host is None else host}:{root.as_posix()}"
