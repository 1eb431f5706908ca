"""The team store's database connection: opened lazily, reopened after it drops.

A :class:`Link` owns one ``psycopg`` connection in autocommit mode. It is *the*
connection of the kernel: the session leases are advisory locks held by it (see
``leases.py``), so it is never pooled or shared.

Invariants
----------
* ``psycopg`` is imported when the first connection is opened, never at import.
* Connection parameters come from the URL; where the URL is silent, a connect timeout
  (10 s) and TCP keepalives are added so that a dead server or network is noticed in
  about a minute instead of hanging a kernel, and ``application_name`` is
  ``jupyter-agent`` so a database administrator can tell the store's connections apart.
* No message, exception or ``repr`` shows the password: errors name the URL through
  :func:`~jupyter_agent.store.postgres.url.redact_url` and pass the driver's text
  through :func:`~jupyter_agent.store.postgres.url.scrub`, and driver exceptions are
  not chained (``from None``).
* A dropped connection is replaced on the next call. :meth:`Link.run` repeats an
  operation once on a new connection when repeating cannot write twice: a read, or a
  write whose transaction had not begun (the server restarted while the kernel was
  idle, say). Otherwise -- the connection dropped inside a transaction, when it is
  unknown whether the commit happened -- it raises
  :class:`~jupyter_agent.errors.StoreUnavailableError` (one line) and the next call
  reconnects. Every write of the store is one transaction, so the database holds
  either all of it or none of it, and the store's writes are built so that repeating
  a save whose outcome was unknown writes nothing twice.
* After a fork the child never touches the parent's connection (that would corrupt
  the parent's session with the server); it opens its own. Its copy of the socket is
  closed at once (``os.register_at_fork``; the descriptor now names ``/dev/null``, so
  the driver's later goodbye goes nowhere): the server then sees the connection end
  -- and releases the leases -- when the process that opened it ends, whatever its
  forked children (``multiprocessing`` workers, say) do.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from jupyter_agent.errors import StoreUnavailableError
from jupyter_agent.store.postgres.url import redact_url, scrub

if TYPE_CHECKING:
    import psycopg

__all__ = ["APPLICATION_NAME", "Link"]

T = TypeVar("T")

#: ``application_name`` of the store's connections (unless the URL sets one).
APPLICATION_NAME = "jupyter-agent"
_DEFAULTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "application_name": APPLICATION_NAME,
}


_ALL: weakref.WeakSet[Link] = weakref.WeakSet()
_FORK_HOOK = threading.Lock()
_fork_hook_installed = False


def _close_sockets_in_child() -> None:
    """After ``fork``, in the child: close every inherited copy of a store's socket."""
    for link in list(_ALL):
        link._orphan()


def _install_fork_hook() -> None:
    global _fork_hook_installed
    with _FORK_HOOK:
        if not _fork_hook_installed:
            os.register_at_fork(after_in_child=_close_sockets_in_child)
            _fork_hook_installed = True


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text.removeprefix("connection failed: ") or "no reason given"


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        return None
    return psycopg


class Link:
    """One database connection, reopened on demand (see the module docstring).

    Parameters
    ----------
    url : str
        A ``postgresql://`` URL (it may hold a password; it is never shown).
    on_connect : callable
        Called with each new connection before it is used, and ``True`` the first
        time: the store checks the schema and takes its leases again there. It may
        raise; the connection is then closed.
    """

    def __init__(self, url: str, on_connect: Callable[[psycopg.Connection, bool], None]) -> None:
        self._url = url
        self.shown_url = redact_url(url)
        self._on_connect = on_connect
        self._conn: psycopg.Connection | None = None
        self._pid = os.getpid()
        self._connected_once = False
        self._begun = False

    def __repr__(self) -> str:
        return f"Link({self.shown_url!r})"

    # ------------------------------------------------------------------ connecting
    def _unavailable(self, err: BaseException, *, lost: bool = False) -> StoreUnavailableError:
        return StoreUnavailableError(self.shown_url, scrub(_one_line(str(err)), self._url),
                                     lost=lost)

    def _params(self, psycopg: Any) -> dict[str, str]:
        try:
            given = psycopg.conninfo.conninfo_to_dict(self._url)
        except psycopg.Error as err:
            raise self._unavailable(err) from None
        return {**_DEFAULTS, **{k: str(v) for k, v in given.items() if v is not None}}

    @property
    def connected(self) -> bool:
        """Whether a usable connection is open in this process (no round trip)."""
        return self._conn is not None and self._pid == os.getpid() and not self._conn.closed

    def connection(self) -> psycopg.Connection:
        """The open connection, opening a new one (and running ``on_connect``) if needed.

        Raises
        ------
        StoreUnavailableError
            ``psycopg`` is missing, or the server cannot be reached or refuses the login.
        StoreSchemaError
            From ``on_connect``, when the database's schema is newer than this code.
        """
        if self._pid != os.getpid():  # forked: the parent's connection is not ours
            self._conn, self._pid = None, os.getpid()
        if self._conn is not None and not self._conn.closed:
            return self._conn
        self._conn = None
        psycopg = _import_psycopg()
        if psycopg is None:
            raise StoreUnavailableError(
                self.shown_url,
                "the PostgreSQL driver is not installed: pip install 'jupyter-agent[postgres]'",
            )
        params = self._params(psycopg)
        try:
            conn = psycopg.connect(autocommit=True, **params)
        except psycopg.Error as err:
            raise self._unavailable(err) from None
        first = not self._connected_once
        try:
            self._on_connect(conn, first)
        except psycopg.OperationalError as err:
            with contextlib.suppress(Exception):
                conn.close()
            raise self._unavailable(err, lost=True) from None
        except BaseException:
            with contextlib.suppress(Exception):
                conn.close()
            raise
        self._connected_once = True
        self._conn = conn
        _install_fork_hook()
        _ALL.add(self)
        return conn

    def _orphan(self) -> None:
        """In a forked child: let go of the parent's connection without a word to the
        server, closing this process's copy of its socket."""
        conn = self._conn
        if conn is None or self._pid == os.getpid():
            return
        with contextlib.suppress(Exception):
            fd = conn.pgconn.socket
            null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            try:
                os.dup2(null, fd, inheritable=False)
            finally:
                os.close(null)

    def drop(self) -> None:
        """Forget the connection (closing it when it is this process's own)."""
        conn, self._conn = self._conn, None
        if conn is not None and self._pid == os.getpid():
            with contextlib.suppress(Exception):
                conn.close()

    close = drop

    # ------------------------------------------------------------------ running
    @contextlib.contextmanager
    def transaction(self, conn: psycopg.Connection) -> Iterator[None]:
        """A transaction on ``conn``; failures after ``BEGIN`` are not repeated by :meth:`run`."""
        with conn.transaction():
            self._begun = True
            yield

    def run(self, op: Callable[[psycopg.Connection], T], *, idempotent: bool = False) -> T:
        """Run ``op(connection)``, reconnecting once when that cannot write twice.

        Parameters
        ----------
        op : callable
            Does the work on the connection it is given; a write uses
            :meth:`transaction` (one transaction).
        idempotent : bool
            True for reads and other operations that may always run again.

        Returns
        -------
        object
            What ``op`` returns.

        Raises
        ------
        StoreUnavailableError
            The server cannot be reached, or the connection dropped where repeating
            the operation could write twice (the next call reconnects).
        """
        psycopg = _import_psycopg()
        for attempt in (1, 2):
            conn = self.connection()
            self._begun = False
            try:
                return op(conn)
            except (psycopg.OperationalError, psycopg.InterfaceError) as err:
                if not conn.closed:
                    raise
                self.drop()
                if attempt == 1 and (idempotent or not self._begun):
                    continue
                raise self._unavailable(err, lost=True) from None
        raise AssertionError("unreachable")  # pragma: no cover
