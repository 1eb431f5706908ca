"""The team store: sessions in a PostgreSQL database shared by a team.

``from jupyter_agent.store.postgres import PostgresStore`` is the entry point; it has
the same methods and contract as the JSON files' :class:`~jupyter_agent.store.SessionStore`.
``team.sql`` here is what a database administrator runs to give each user a role of its
own (docs/teams.md quotes it).
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


def prepare_database(url: str, role: str | None = None) -> int:
    """Create or upgrade the store's tables in the database at ``url``; return the version.

    Kernels do this themselves on their first connection; where users may not create
    schemas, an administrator runs it once after the SQL of ``team.sql`` (next to this
    module; docs/teams.md explains it), e.g. ``prepare_database('postgresql://postgres@db/
    agents', role='agent_owner')``.

    Parameters
    ----------
    url : str
        A ``postgresql://`` URL of a user who may create the tables.
    role : str, optional
        ``SET ROLE`` to this role first, so that it owns what is created.

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
        if role:
            from psycopg import sql

            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        ensure_schema(conn, link.shown_url)
        return current_version(conn)
    finally:
        link.close()
