"""The team store: sessions in a PostgreSQL database shared by a team (design §16).

``from jupyter_agent.store.postgres import PostgresStore`` is the entry point; it has
the same methods and contract as the JSON files' :class:`~jupyter_agent.store.SessionStore`.
Importing this package does no I/O and does not import the ``psycopg`` driver (the
``postgres`` extra: ``pip install 'jupyter-agent[postgres]'``); the first call that
needs the database does.
"""

from __future__ import annotations

from jupyter_agent.store.postgres.schema import MIGRATIONS, Migration
from jupyter_agent.store.postgres.store import PostgresStore
from jupyter_agent.store.postgres.url import (
    STORE_URL_ENV,
    check_store_url,
    redact_url,
    resolve_store_url,
)

__all__ = [
    "MIGRATIONS",
    "STORE_URL_ENV",
    "Migration",
    "PostgresStore",
    "check_store_url",
    "prepare_database",
    "redact_url",
    "resolve_store_url",
]


def prepare_database(url: str) -> int:
    """Create or upgrade the store's tables in the database at ``url``; return the version.

    Kernels do this themselves on their first connection; a database administrator
    whose users may not create schemas runs it once (``python -c "from
    jupyter_agent.store.postgres import prepare_database; prepare_database('postgresql://
    owner@db/agents')"``) and grants the users ``USAGE`` on the ``jupyter_agent`` schema
    and ``SELECT, INSERT, UPDATE, DELETE`` on its tables.

    Parameters
    ----------
    url : str
        A ``postgresql://`` URL of a user who may create schemas in the database.

    Returns
    -------
    int
        The schema version now.

    Raises
    ------
    StoreUnavailableError, StoreSchemaError
    """
    from jupyter_agent.store.postgres.link import Link
    from jupyter_agent.store.postgres.schema import current_version, ensure_schema

    check_store_url(url)
    link = Link(url, lambda conn, first: None)
    try:
        conn = link.connection()
        ensure_schema(conn, link.shown_url)
        return current_version(conn)
    finally:
        link.close()
