"""The team store's database URL, shown without credentials, and the one connection.

:class:`Link` owns the kernel's autocommit connection (leases are advisory locks held by
it: never pooled), opened on first use and replaced when it drops. After a fork the
child's copy of the socket is pointed at ``/dev/null``, so the server releases the
leases when the process that opened the connection ends.
"""

from __future__ import annotations

import contextlib
import functools
import os
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import SplitResult, parse_qsl, quote, quote_plus, unquote, urlencode, urlsplit

from jupyter_agent.errors import StoreUnavailableError
from jupyter_agent.paths import STORE_URL_ENV

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")

_HIDDEN = "***"
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})
# where the URL is silent: a dead server or network is noticed in about a minute
_DEFAULTS = {
    "connect_timeout": "10", "keepalives": "1", "keepalives_idle": "30",
    "keepalives_interval": "10", "keepalives_count": "3", "application_name": "jupyter-agent",
}


def _split(url: str) -> SplitResult | None:
    try:
        return urlsplit(url) if "://" in url else None
    except ValueError:
        return None


def redact_url(url: str) -> str:
    """``url`` with its password and ``password=``/``sslpassword=`` values as ``***``;
    ``<unparsable URL>`` for a value that does not parse as a URL at all."""
    parts = _split(url)
    if parts is None:
        return "<unparsable URL>"
    netloc, query = parts.netloc, parts.query
    if parts.password is not None:
        netloc = f"{parts.username}:{_HIDDEN}@{netloc.rpartition('@')[2]}"
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(key in _SECRET_PARAMETERS for key, _ in pairs):
        query = urlencode([(k, _HIDDEN if k in _SECRET_PARAMETERS else v) for k, v in pairs],
                          safe="*/:")
    return (f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
            + (f"#{parts.fragment}" if parts.fragment else ""))


def scrub(text: str, url: str) -> str:
    """``text`` with every credential of ``url`` (raw or percent-encoded) replaced by ``***``."""
    parts = _split(url)
    if parts is None:
        return text
    secrets = [value for key, value in parse_qsl(parts.query, keep_blank_values=True)
               if key in _SECRET_PARAMETERS]
    if parts.password:
        secrets.append(unquote(parts.password))
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        for form in {secret, quote(secret, safe=""), quote_plus(secret)}:
            text = text.replace(form, _HIDDEN)
    return text


class StoreURL(str):
    """The URL as given (the driver needs the password), whose ``repr`` hides it."""

    def __repr__(self) -> str:
        return repr(redact_url(self)) if self else "''"


def check_store_url(value: str) -> str:
    """``value`` as a :class:`StoreURL` if it is ``""`` or a PostgreSQL URL, else
    ``ValueError`` naming the problem (the URL redacted)."""
    if value == "":
        return StoreURL(value)
    parts = _split(value)
    if parts is None or parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(
            "store_url must be empty (the JSON files) or a PostgreSQL URL such as "
            f"postgresql://user@db.example.org/agents (got {redact_url(value)!r})"
        )
    if not parts.netloc and not parts.path.strip("/") and "host=" not in parts.query:
        raise ValueError(
            f"store_url names no server and no database (got {redact_url(value)!r}); "
            "e.g. postgresql://user@db.example.org/agents"
        )
    return StoreURL(value)


def resolve_store_url(setting: str | None = None, *,
                      environ: Mapping[str, str] | None = None) -> str:
    """The setting if not empty, else ``$JUPYTER_AGENT_STORE_URL`` (``ValueError`` when
    that is not a PostgreSQL URL); ``""`` means the files."""
    if setting:
        return StoreURL(setting)
    env = os.environ if environ is None else environ
    try:
        return check_store_url(env.get(STORE_URL_ENV, "").strip())
    except ValueError as err:
        raise ValueError(f"${STORE_URL_ENV}: {err}") from None


def driver(shown_url: str) -> Any:
    """``psycopg``, else ``StoreUnavailableError`` naming ``shown_url`` (no ``postgres`` extra)."""
    try:
        import psycopg  # an optional dependency: imported on first use
    except ImportError:
        raise StoreUnavailableError(
            shown_url,
            "the PostgreSQL driver is not installed: pip install 'jupyter-agent[postgres]'",
        ) from None
    return psycopg


_ALL: weakref.WeakSet[Link] = weakref.WeakSet()  # the links that have connected


def _close_sockets_in_child() -> None:
    # the parent's sockets are pointed at /dev/null: closing them would end its sessions
    for link in list(_ALL):
        if link._conn is not None:
            with contextlib.suppress(Exception):
                null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
                try:
                    os.dup2(null, link._conn.pgconn.socket, inheritable=False)
                finally:
                    os.close(null)


@functools.cache  # once per process, on the first connection (importing does nothing)
def _install_fork_hook() -> None:
    os.register_at_fork(after_in_child=_close_sockets_in_child)


class Link:
    """One database connection, reopened on demand; ``on_connect(conn, first)`` runs on each
    new one before use (``first`` the first time), and the connection is closed if it raises."""

    def __init__(self, url: str, on_connect: Callable[[psycopg.Connection, bool], None]) -> None:
        self._url = url
        self.shown_url = redact_url(url)
        self._on_connect = on_connect
        self._conn: psycopg.Connection | None = None
        self._pid = os.getpid()
        self._begun = False

    def _unavailable(self, err: BaseException, *, lost: bool = False) -> StoreUnavailableError:
        text = " ".join(str(err).split()).removeprefix("connection failed: ") or "no reason given"
        return StoreUnavailableError(self.shown_url, scrub(text, self._url), lost=lost)

    @property
    def connected(self) -> bool:
        """Whether a usable connection is open in this process (no round trip)."""
        return self._conn is not None and self._pid == os.getpid() and not self._conn.closed

    def connection(self) -> psycopg.Connection:
        """The connection, opened (``on_connect`` run) if needed; ``StoreUnavailableError``
        when ``psycopg`` is missing or the server is unreachable or refuses the login."""
        if self._conn is not None and self.connected:
            return self._conn
        self._conn, self._pid = None, os.getpid()  # forked: the parent's is not ours
        psycopg = driver(self.shown_url)
        try:
            params = {**_DEFAULTS, **psycopg.conninfo.conninfo_to_dict(self._url)}
            conn = psycopg.connect(autocommit=True, **params)
        except psycopg.Error as err:
            raise self._unavailable(err) from None
        try:
            self._on_connect(conn, self not in _ALL)
        except BaseException as err:
            with contextlib.suppress(Exception):
                conn.close()
            if isinstance(err, psycopg.OperationalError):
                raise self._unavailable(err, lost=True) from None
            raise
        self._conn = conn
        _install_fork_hook()
        _ALL.add(self)
        return conn

    def close(self) -> None:
        """Forget the connection (closing it when it is this process's own)."""
        conn, self._conn = self._conn, None
        if conn is not None and self._pid == os.getpid():
            with contextlib.suppress(Exception):
                conn.close()

    def run(self, op: Callable[[psycopg.Connection], T], *, idempotent: bool = False) -> T:
        """``op(connection)``, run again once on a new connection if it dropped and
        ``op`` is ``idempotent`` or had not begun its transaction; else
        ``StoreUnavailableError`` (the next call reconnects)."""
        psycopg = driver(self.shown_url)
        for attempt in (1, 2):
            conn = self.connection()
            self._begun = False
            try:
                return op(conn)
            except (psycopg.OperationalError, psycopg.InterfaceError) as err:
                if not conn.closed:
                    raise
                self.close()
                if attempt == 1 and (idempotent or not self._begun):
                    continue
                raise self._unavailable(err, lost=True) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def fetch(self, query: str, params: Any = None) -> list[dict[str, Any]]:
        """The rows of one read statement, as dicts by column name (repeated after a reconnect)."""
        dict_row = driver(self.shown_url).rows.dict_row
        return self.run(lambda c: c.cursor(row_factory=dict_row).execute(query, params)
                        .fetchall(), idempotent=True)

    def write(self, op: Callable[[psycopg.Connection], T], check: Callable[[], None]) -> T:
        """``op`` in one transaction, after ``check()`` on the connection about to be used;
        a failure after ``BEGIN`` is not repeated."""
        def run(conn: psycopg.Connection) -> T:
            check()
            with conn.transaction():
                self._begun = True
                return op(conn)

        return self.run(run)
