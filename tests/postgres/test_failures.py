"""The team store when the database goes away: restarts, dropped connections, a stopped
server, a wrong password, an unreachable host (design notes "The team store (PostgreSQL)").

What users rely on: one clear line (a ``StoreUnavailableError``) without the password,
nothing acknowledged lost, and the next call reconnecting and taking its leases again.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from jupyter_agent.errors import (
    JupyterAgentError,
    SessionLockedError,
    StoreUnavailableError,
)
from jupyter_agent.store.postgres import PostgresStore
from tests.postgres.server import PgCluster

SYSTEM = {"role": "system", "content": "s"}


def turn(k: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"q{k}"}, {"role": "assistant", "content": f"a{k}"}]


def backend_pids(pg: PgCluster) -> list[int]:
    rows = pg.admin("SELECT pid FROM pg_stat_activity WHERE application_name = 'jupyter-agent'")
    return [int(r[0]) for r in rows]  # type: ignore[call-overload]


def terminate_store_connections(pg: PgCluster) -> None:
    pg.admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
             "WHERE application_name = 'jupyter-agent'")


@pytest.fixture
def running(pg: PgCluster) -> Iterator[PgCluster]:
    """``pg``, started again after the test if the test stopped it."""
    yield pg
    if not (pg.data / "postmaster.pid").exists():
        pg.start()


def test_server_restart_under_a_running_kernel(
    running: PgCluster, store: PostgresStore, make_store: Callable[..., PostgresStore]
) -> None:
    sid = store.create_session([SYSTEM])
    store.acquire_lease(sid)  # the kernel's session, held between turns
    messages = [SYSTEM, *turn(0)]
    store.save(sid, messages, {"tool_calls": 1})
    running.restart()
    # the next save reconnects, takes the lease again and goes through
    messages = [*messages, *turn(1)]
    store.save(sid, messages, {"tool_calls": 2})
    assert store.holds_lease(sid)
    other = make_store(label="other kernel")
    with pytest.raises(SessionLockedError) as info:
        other.update(sid, title="taken over")
    assert info.value.pid is not None and info.value.holder is not None
    record = other.load_session(sid)
    assert record.transcript == messages
    assert record.state.tool_calls == 2


def test_lease_taken_by_another_kernel_while_disconnected_is_not_written(
    running: PgCluster, store: PostgresStore, make_store: Callable[..., PostgresStore]
) -> None:
    sid = store.create_session([SYSTEM])
    store.acquire_lease(sid)
    store.save(sid, [SYSTEM, *turn(0)])
    terminate_store_connections(running)
    other = make_store(label="second kernel")
    other.acquire_lease(sid)  # takes over while the first is disconnected
    other.save(sid, [SYSTEM, *turn(0), *turn(9)])
    with pytest.raises(SessionLockedError) as info:
        store.save(sid, [SYSTEM, *turn(0), *turn(1)])
    assert info.value.holder is not None and info.value.holder.label == "second kernel"
    assert not store.holds_lease(sid)
    assert store.load_session(sid).transcript == [SYSTEM, *turn(0), *turn(9)]
    other.release_lease(sid)
    # free again: the first kernel takes it back, and its stale context is refused
    with pytest.raises(JupyterAgentError) as mismatch:
        store.save(sid, [SYSTEM, *turn(0), *turn(1)])
    assert "do not extend" in str(mismatch.value)
    assert store.holds_lease(sid)  # the lease is the kernel's again


def test_connection_dropped_while_idle_reconnects_transparently(
    running: PgCluster, store: PostgresStore
) -> None:
    sid = store.create_session([SYSTEM])
    store.acquire_lease(sid)
    store.save(sid, [SYSTEM, *turn(0)])
    before = backend_pids(running)
    terminate_store_connections(running)
    store.save(sid, [SYSTEM, *turn(0), *turn(1)])
    assert store.holds_lease(sid)
    assert backend_pids(running) != before
    assert store.list_sessions()[0].status == "active"
    assert len(store.load_session(sid).transcript) == 5


def test_connection_dropped_inside_a_save_gives_one_line_and_loses_nothing(
    running: PgCluster, store: PostgresStore
) -> None:
    sid = store.create_session([SYSTEM])
    store.acquire_lease(sid)
    acknowledged = [SYSTEM, *turn(0)]
    store.save(sid, acknowledged)
    # Another connection locks the session row, so the next save waits inside its
    # transaction; the server then drops the kernel's connection.
    blocker = psycopg.connect(host=str(running.socket_dir), port=running.port,
                              user=running.superuser, dbname=running.dbname)
    blocker.execute("SELECT 1 FROM jupyter_agent.sessions WHERE id = %s FOR UPDATE", (sid,))
    errors: list[BaseException] = []

    def save() -> None:
        try:
            store.save(sid, [*acknowledged, *turn(1)])
        except BaseException as err:
            errors.append(err)

    worker = threading.Thread(target=save)
    worker.start()
    deadline = time.monotonic() + 30
    while not running.admin("SELECT 1 FROM pg_stat_activity WHERE application_name = "
                            "'jupyter-agent' AND wait_event_type = 'Lock'"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    terminate_store_connections(running)
    worker.join(timeout=30)
    blocker.rollback()
    blocker.close()
    (err,) = errors
    assert isinstance(err, StoreUnavailableError)
    assert "\n" not in str(err) and "lost the connection" in str(err)
    assert running.password not in str(err)
    # nothing acknowledged was lost; the next call reconnects, retakes the lease and
    # saves what the failed call could not
    assert store.load_session(sid).transcript == acknowledged
    store.save(sid, [*acknowledged, *turn(1)])
    assert store.holds_lease(sid)
    assert store.load_session(sid).transcript == [*acknowledged, *turn(1)]


def test_stopped_server_gives_one_line_then_the_next_call_reconnects(
    running: PgCluster, store: PostgresStore
) -> None:
    sid = store.create_session([SYSTEM])
    store.acquire_lease(sid)
    store.save(sid, [SYSTEM, *turn(0)])
    running.stop()
    for call in (lambda: store.save(sid, [SYSTEM, *turn(0), *turn(1)]),
                 lambda: store.list_sessions(), lambda: store.load_session(sid)):
        with pytest.raises(StoreUnavailableError) as info:
            call()
        message = str(info.value)
        assert "\n" not in message and running.password not in message
        assert info.value.url == f"postgresql://agent:***@127.0.0.1:{running.port}/agents"
    running.start()
    store.save(sid, [SYSTEM, *turn(0), *turn(1)])
    assert store.holds_lease(sid)
    assert len(store.load_session(sid).transcript) == 5


def test_bad_password_is_one_line_without_the_password(
    pg: PgCluster, tmp_path: Path, project: str
) -> None:
    wrong = "Wr0ng-pa55word-" + "x" * 8
    store = PostgresStore(pg.url(password=wrong), tmp_path / "mem", project=project)
    assert wrong not in repr(store)
    with pytest.raises(StoreUnavailableError) as info:
        store.list_sessions()
    err = info.value
    assert "password authentication failed" in str(err)
    for text in (str(err), repr(err), err.url, err.reason, repr(err.args)):
        assert wrong not in text and pg.password not in text
    assert err.__cause__ is None and err.__suppress_context__
    with pytest.raises(StoreUnavailableError):  # and again: no state was left half-made
        store.create_session([SYSTEM])


def test_unreachable_host_is_one_line_without_the_password(
    pg: PgCluster, tmp_path: Path, project: str
) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = PostgresStore(pg.url(port=port), tmp_path / "mem", project=project)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as info:
        store.exists("abc")
    assert time.monotonic() - started < 15
    assert "\n" not in str(info.value) and pg.password not in str(info.value)
    assert "refused" in str(info.value).lower()


def test_every_credential_of_the_url_is_hidden_wherever_it_is_shown(
    pg: PgCluster, tmp_path: Path, project: str
) -> None:
    from jupyter_agent.store.postgres.url import check_store_url, redact_url

    secrets = ("Wr0ng-pa55", "key-pa55phrase", "query-pa55")
    url = (f"postgresql://agent:{secrets[0]}@127.0.0.1:{pg.port}/agents?sslmode=prefer"
           f"&sslpassword={secrets[1]}&passfile=/nonexistent/pgpass&sslkey=/etc/k.pem")
    shown = (f"postgresql://agent:***@127.0.0.1:{pg.port}/agents?sslmode=prefer"
             "&sslpassword=***&passfile=/nonexistent/pgpass&sslkey=/etc/k.pem")
    assert redact_url(url) == shown
    assert redact_url(f"postgres://db/x?password={secrets[2]}&sslpassword=") == (
        "postgres://db/x?password=***&sslpassword=***")
    store = PostgresStore(url, tmp_path / "mem", project=project)
    with pytest.raises(StoreUnavailableError) as info:
        store.list_sessions()
    # as %config AgentMagics shows the setting, as a store and its error show themselves
    for text in (repr(check_store_url(url)), repr(store), store.location, str(info.value),
                 repr(info.value), info.value.url):
        assert not any(secret in text for secret in secrets), text
    assert info.value.url == shown


def test_without_the_driver_every_call_says_how_to_install_it(tmp_path: Path) -> None:
    """A kernel without the ``postgres`` extra (psycopg blocked in a fresh process)."""
    code = textwrap.dedent(f"""
        import sys
        sys.modules["psycopg"] = None
        from jupyter_agent.store.postgres import PostgresStore
        store = PostgresStore("postgresql://agent:Wr0ng-pa55@db/agents", {str(tmp_path)!r},
                              project="p")
        for call in (lambda: store.exists("abc"), lambda: store.list_sessions(),
                     lambda: store.load_session("abc"), lambda: store.acquire_lease("abc"),
                     lambda: store.create_session()):
            try:
                call()
            except Exception as err:
                print(type(err).__name__, err)
        """)
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True)
    lines = child.stdout.splitlines()
    assert len(lines) == 5
    for line in lines:
        assert line.startswith("StoreUnavailableError ") and "Wr0ng-pa55" not in line, line
        assert "pip install 'jupyter-agent[postgres]'" in line, line
