"""The SQL of the team store: every statement on one project's sessions and figures.

A read is one statement; a write is one transaction run after checking that the lease is
held on the connection about to be used. A listing page is read from the index
``(project, updated_at DESC, id DESC)``, so it costs the same however many sessions there
are; rows that do not validate or are dated past ``CLOCK_SKEW`` are left out.
"""

from __future__ import annotations

from datetime import datetime

from jupyter_agent.store.postgres.locks import LEASE_COLUMNS, LIVE_LOCKS, LOCK_OF_ROW
from jupyter_agent.store.postgres.rows import HEAD_COLUMNS, MESSAGES, SESSIONS
from jupyter_agent.store.postgres.schema import SCHEMA
from jupyter_agent.store.records import SCHEMA_VERSION

_OWN = "project = %(project)s AND id = %(id)s"
# a head's columns and ``tail``, its transcript rows (those that match ``{}``)
_WITH_TAIL = (f"SELECT {', '.join(HEAD_COLUMNS)}, (SELECT json_agg(m.body ORDER BY m.seq) "
              f"FROM {MESSAGES} m WHERE m.sid = s.sid{{}}) AS tail FROM {SESSIONS} s WHERE ")
HEAD = _WITH_TAIL.format(" AND m.seq >= s.context_from") + _OWN
# which session an ID names for a read: the project's, else one shared with this role
# (row-level security shows another role's session only when it is shared with it)
_READABLE = ("id = %(id)s AND (project = %(project)s OR owner_role <> current_user) "
             "ORDER BY project = %(project)s DESC, updated_at DESC LIMIT 1")
OWNER = (f"SELECT sid, owner_role, owner_role = current_user AS mine FROM {SESSIONS} "
         f"WHERE {_READABLE}")
RECORD = _WITH_TAIL.format("") + _READABLE
SHARES = f"SELECT grantee FROM {SCHEMA}.shares WHERE sid = %s ORDER BY grantee"
SHARE = (f"INSERT INTO {SCHEMA}.shares (sid, grantee) SELECT %s, rolname FROM pg_roles "
         "WHERE rolname = %s ON CONFLICT DO NOTHING")
UNSHARE = f"DELETE FROM {SCHEMA}.shares WHERE sid = %s AND grantee = %s"
ROLE = "SELECT 1 FROM pg_roles WHERE rolname = %s"
APPEND = f"INSERT INTO {MESSAGES} (sid, seq, body) VALUES (%s, %s, %s)"
# one statement (COPY does not take row-level security)
APPEND_ALL = (f"INSERT INTO {MESSAGES} (sid, seq, body) SELECT %s, n - 1, b::json "
              "FROM unnest(%s::text[]) WITH ORDINALITY AS t(b, n)")
DELETE = f"DELETE FROM {SESSIONS} WHERE {_OWN} RETURNING sid"

FIGURES = f"{SCHEMA}.figures"
SAVE_FIGURE = (f"INSERT INTO {FIGURES} (sid, figure_id, media_type, data) "
               f"SELECT sid, %(figure)s, %(type)s, %(data)s FROM {SESSIONS} WHERE {_OWN} "
               "ON CONFLICT (sid, figure_id) DO UPDATE SET media_type = EXCLUDED.media_type, "
               "data = EXCLUDED.data, saved_at = now() RETURNING 1")
# the bytes of a figure over the cap are not even sent by the server
_OF = f"f.sid = (SELECT sid FROM {SESSIONS} WHERE {_READABLE})"
READ_FIGURE = (f"SELECT f.media_type, octet_length(f.data) AS size, CASE WHEN "
               f"octet_length(f.data) <= %(cap)s THEN f.data END AS data FROM {FIGURES} f "
               f"WHERE {_OF} AND f.figure_id = %(figure)s")
FIGURE_IDS = f"SELECT f.figure_id FROM {FIGURES} f WHERE {_OF} ORDER BY f.figure_id"
DELETE_FIGURE = (f"DELETE FROM {FIGURES} f USING {SESSIONS} s WHERE s.sid = f.sid AND "
                 "s.project = %(project)s AND s.id = %(id)s AND f.figure_id = %(figure)s "
                 "RETURNING 1")

# Python's datetimes cover years 1-9999; a row outside them (``infinity``) cannot be listed
_REPRESENTABLE = "BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00'"
# named as the listing's fields (rows.LISTING_FIELDS)
_PAGE_COLUMNS = (
    "sid, project, id, created_at, updated_at, summary, title, archived, "
    "transcript_len AS message_count, cost_usd, tool_calls, "
    "coalesce(first_prompt, '') AS first_prompt, owner_user, owner_host, parent, state, "
    "compactions, owner_role")


def listing_query(*, include_archived: bool, limit: int | None,
                  after: tuple[datetime, str] | None, session_id: bool = False) -> str:
    """One listing page: the project's sessions, then those other roles share with this one.

    Parameters: ``project``, ``horizon`` (the latest ``updated_at`` believed), and
    ``after_at``, ``after_id``, ``limit`` and ``id`` when used; ``session_id=True`` lists
    the one session ``id``, archived or not, whatever its date.
    """
    where = [f"schema_version <= {SCHEMA_VERSION}",
             f"updated_at {_REPRESENTABLE}", f"created_at {_REPRESENTABLE}"]
    if session_id:
        where.append(_READABLE)
        page = f"SELECT {_PAGE_COLUMNS} FROM {SESSIONS} WHERE {' AND '.join(where)}"
    else:
        where.append("updated_at <= %(horizon)s")
        if not include_archived:
            where.append("NOT archived")
        if after is not None:
            where.append("(updated_at, id) < (%(after_at)s, %(after_id)s)")
        order = "ORDER BY updated_at DESC, id DESC" + (
            " LIMIT %(limit)s" if limit is not None else "")
        own = " AND ".join(["project = %(project)s", *where])
        # read from the shares, so the page never scans the sessions
        shared = " AND ".join([
            f"sid = ANY (ARRAY(SELECT h.sid FROM {SCHEMA}.shares h))",
            "owner_role <> current_user", "project <> %(project)s", *where])
        page = (f"(SELECT {_PAGE_COLUMNS} FROM {SESSIONS} WHERE {own} {order}) "
                f"UNION ALL (SELECT {_PAGE_COLUMNS} FROM {SESSIONS} WHERE {shared} "
                f"{order}) {order}")
    return f"""SELECT s.*,
    ARRAY(SELECT h.grantee::text FROM {SCHEMA}.shares h WHERE h.sid = s.sid ORDER BY 1)
        AS shared_with, {LEASE_COLUMNS}
FROM ({page}) s
LEFT JOIN {SCHEMA}.leases l ON l.project = s.project AND l.session_id = s.id
LEFT JOIN ({LIVE_LOCKS}) k ON {LOCK_OF_ROW}
ORDER BY s.updated_at DESC, s.id DESC"""
