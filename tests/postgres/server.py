"""A throwaway PostgreSQL cluster for the tests (plain helpers; the fixtures are in conftest.py).

:class:`PgCluster` runs ``initdb`` and ``pg_ctl`` from the server binaries found on this
machine (Debian's ``/usr/lib/postgresql/<version>/bin``, else ``pg_config --bindir``,
else ``PATH``) in a temporary directory, on a free loopback port, with its socket in
that directory. PostgreSQL refuses to run as root, so as root the cluster runs as the
``postgres`` user through ``runuser``. TCP logins need a password (SCRAM); the
superuser logs in over the socket without one. Nothing outside the directory is touched.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

__all__ = ["PgCluster", "find_server_bin"]

CLUSTER_USER = "postgres"


def find_server_bin() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or ``None`` when there is none."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
                        reverse=True)
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                 timeout=30, check=True).stdout.strip()
            candidates.append(Path(out))
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).parent)
    for directory in candidates:
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgCluster:
    """A PostgreSQL cluster in a temporary directory (see the module docstring).

    Parameters
    ----------
    bindir : pathlib.Path
        Where ``initdb`` and ``pg_ctl`` are.
    durable : bool
        Keep PostgreSQL's default durability (``fsync`` on); tests turn it off for speed.

    Attributes
    ----------
    port : int
    socket_dir : pathlib.Path
    user, password, dbname : str
        The application's role (password login over TCP) and its database.
    """

    def __init__(self, bindir: Path, *, durable: bool = False) -> None:
        self.bindir = bindir
        self.durable = durable
        self.as_root = os.geteuid() == 0
        self.dir = Path(tempfile.mkdtemp(prefix="jupyter-agent-pg-"))
        self.data = self.dir / "data"
        self.socket_dir = self.dir
        self.log = self.dir / "server.log"
        self.port = _free_port()
        self.user = "agent"
        self.password = "pw-" + secrets.token_hex(12)
        self.dbname = "agents"
        self.superuser = CLUSTER_USER if self.as_root else pwd.getpwuid(os.geteuid()).pw_name
        if self.as_root:
            entry = pwd.getpwnam(CLUSTER_USER)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self.dir.chmod(0o700)

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.as_root:
            command = ["runuser", "-u", CLUSTER_USER, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              check=False, stdin=subprocess.DEVNULL)

    def _checked(self, *args: str) -> None:
        done = self._run(*args)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed ({done.returncode}):\n"
                               f"{done.stdout}\n{done.stderr}\n{log}")

    def init(self) -> None:
        """``initdb``, start, and create the application's role and database."""
        self._checked("initdb", "-D", str(self.data), "-U", self.superuser, "-E", "UTF8",
                      "--no-locale", "--no-sync", "--auth-local=trust",
                      "--auth-host=scram-sha-256")
        self.start()
        self.admin(f"CREATE ROLE {self.user} LOGIN PASSWORD '{self.password}'")
        self.admin(f"CREATE DATABASE {self.dbname} OWNER {self.user}")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = (f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 "
                   "-c max_connections=200")
        if not self.durable:  # tests: nothing here must survive a power cut
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._checked("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                      "-o", options, "start")

    def stop(self) -> None:
        """Stop the server at once (``-m fast``: connections are cut)."""
        self._checked("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def restart(self) -> None:
        """Stop and start again: every connection drops, every advisory lock is gone."""
        self.stop()
        self.start()

    def destroy(self) -> None:
        """Stop the server if it runs and remove the directory."""
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(Exception):
                self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, *, password: str | None = None, host: str = "127.0.0.1",
            port: int | None = None, dbname: str | None = None) -> str:
        """A ``postgresql://`` URL of the application role over TCP."""
        secret = self.password if password is None else password
        return (f"postgresql://{self.user}:{quote(secret, safe='')}@{host}:"
                f"{self.port if port is None else port}/{dbname or self.dbname}")

    def admin(self, sql: str, dbname: str = "postgres") -> list[tuple[object, ...]]:
        """Run SQL as the superuser over the socket; return the rows."""
        import psycopg

        with psycopg.connect(host=str(self.socket_dir), port=self.port, user=self.superuser,
                             dbname=dbname, autocommit=True) as conn:
            cur = conn.execute(sql)  # type: ignore[arg-type]
            return list(cur.fetchall()) if cur.description else []

    def new_database(self) -> str:
        """Create an empty database owned by the application role; return its name."""
        name = "db_" + secrets.token_hex(6)
        self.admin(f"CREATE DATABASE {name} OWNER {self.user}")
        return name
