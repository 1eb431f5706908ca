"""Bounded work on team-store rows: a value over its cap or nested too deeply is refused in
one line naming the session and the column (rows edited by hand, as another user could)."""

from __future__ import annotations

import psycopg
import pytest

from jupyter_agent.errors import CorruptSessionError, TooLargeError
from jupyter_agent.store.messages import MAX_DEPTH, RECORD_CAP
from jupyter_agent.store.postgres import PostgresStore
from jupyter_agent.store.records import MAX_FIGURE_BYTES
from tests.postgres.server import PgCluster

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "hello"}]
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


def edit(pg: PgCluster, project: str, sql: str, *params: object) -> None:
    """Run ``sql`` on the rows of ``project``'s session ``s`` (``%(sid)s`` is its key)."""
    with psycopg.connect(pg.url(), autocommit=True) as conn:
        (sid,) = conn.execute("SELECT sid FROM jupyter_agent.sessions WHERE project = %s "
                              "AND id = 's'", (project,)).fetchone() or (None,)
        conn.execute(sql.replace("%(sid)s", str(sid)), params)


def test_an_oversize_figure_row_is_refused_without_fetching_it(
        pg: PgCluster, store: PostgresStore, project: str) -> None:
    store.create_session(MESSAGES, session_id="s")
    store.save_figure("s", "f1", PNG, "image/png")
    edit(pg, project, "UPDATE jupyter_agent.figures SET data = data || "
                      "decode(repeat('00', %s), 'hex') WHERE sid = %(sid)s",
         MAX_FIGURE_BYTES)
    with pytest.raises(TooLargeError) as caught:
        store.read_figure("s", "f1")
    assert str(caught.value).startswith(
        f"jupyter_agent.figures (project {project!r}, session 's', figure 'f1'): figure of "
        f"{len(PNG) + MAX_FIGURE_BYTES:,} bytes is over the 16 MiB cap")


def test_a_value_nested_too_deeply_is_refused(pg: PgCluster, store: PostgresStore,
                                              project: str) -> None:
    store.create_session(MESSAGES, session_id="s")
    deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    edit(pg, project, "UPDATE jupyter_agent.sessions SET extra = %s::json "
                      "WHERE sid = %(sid)s", f'{{"x": {deep}}}')
    with pytest.raises(CorruptSessionError, match=r"extra: values are nested too deeply"):
        store.load_session("s")
    assert [s.id for s in store.list_sessions()] == ["s"]  # the listing reads no extra


def test_a_value_over_its_cap_is_refused_before_decoding(pg: PgCluster, store: PostgresStore,
                                                        project: str) -> None:
    store.create_session(MESSAGES, session_id="s")
    edit(pg, project, "UPDATE jupyter_agent.sessions SET context_head = "
                      "to_json(repeat('x', %s)) WHERE sid = %(sid)s", RECORD_CAP)
    with pytest.raises(TooLargeError) as caught:
        store.load_session("s")
    assert str(caught.value).endswith(
        f"project {project!r} session 's': jupyter_agent.sessions.context_head of "
        f"{RECORD_CAP + 2:,} bytes is over the 16 MiB cap; it was not loaded and was left "
        "untouched")


@pytest.mark.parametrize(("column", "value", "reason"), [
    ("state", '{"usage": {"cost_usd": -1}}',
     "jupyter_agent.sessions: state.usage.cost_usd: Input should be greater than or equal to 0"),
    ("state", '{"todos": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}",
     "jupyter_agent.sessions.state: values are nested too deeply"),
    ("compactions", '{"a": 1}',
     "jupyter_agent.sessions: compactions: Input should be a valid list"),
    ("parent", '{"session_id": "../x"}',
     "jupyter_agent.sessions: parent.session_id: Value error, invalid session ID '../x'"),
])
def test_a_damaged_row_is_left_out_of_the_listing_and_described_by_its_column(
        pg: PgCluster, store: PostgresStore, project: str, column: str, value: str,
        reason: str) -> None:
    store.create_session(MESSAGES, session_id="s")
    store.create_session(MESSAGES, session_id="fine")
    edit(pg, project, f"UPDATE jupyter_agent.sessions SET {column} = %s::json "
                      "WHERE sid = %(sid)s", value)
    assert [e.id for e in store.list_sessions()] == ["fine"]
    with pytest.raises(CorruptSessionError) as caught:
        store.describe_session("s")
    assert f"project {project!r} session 's'" in str(caught.value)
    assert reason in str(caught.value)
    with pytest.raises(CorruptSessionError) as loading:
        store.load_session("s")
    assert reason in str(loading.value)  # a load says the same
