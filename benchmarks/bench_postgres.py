"""Benchmark of the team store (PostgreSQL) beside the JSON files: save, load and list.

Run: ``python benchmarks/bench_postgres.py`` (a few minutes). It starts a throwaway
PostgreSQL cluster with the server binaries of this machine (as the tests do; as root
it runs as the ``postgres`` user), with PostgreSQL's default durability (``fsync`` on,
synchronous commit), on loopback. ``--url postgresql://...`` uses an existing database
instead (tables are created in its ``jupyter_agent`` schema; the rows it adds are
under a project key of their own and deleted at the end).

The sessions are those of ``bench_store.py``. A *save point* appends one message and a
checkpoint in one call (``save``), with the lease held across saves as an agent does
("held": the JSON store reuses its parsed record, the team store its session head) and
with a lease taken per call ("cold"). Listing: every session of a project, and --
the team store only -- the newest page of 50 among 100,000 sessions with summaries
(target: at most 50 ms). Times are medians, in milliseconds.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from bench_store import make_messages, median_ms  # noqa: E402

from jupyter_agent.store import FileStore, SessionState, Store, Usage, holding  # noqa: E402
from jupyter_agent.store.postgres import PostgresStore  # noqa: E402

STATE = SessionState(tool_calls=5, usage=Usage(input_tokens=1000, cost_usd=0.01, calls=5))
PAGE = 50
TARGET_MS = 50.0


def bench_saves(store: Store, n: int, repeat: int) -> dict[str, float]:
    """Median ms of a save point (held and cold) and of a load, on a session of n messages."""
    base = make_messages(n)
    sid = store.create_session(base, session_id=f"bench{n}")
    extra = make_messages(n + 2 * repeat + 4, seed=1)[n:]
    current = list(base)

    def save_one() -> None:
        current.append(extra.pop())
        store.save(sid, current, STATE.model_copy(update={"tool_calls": len(current)}))

    cold = median_ms(save_one, repeat)
    with holding(store, sid):
        save_one()  # the first save under the lease reads the session
        held = median_ms(save_one, repeat)
    load = median_ms(lambda: store.load_session(sid), repeat)
    return {"held": held, "cold": cold, "load": load}


def fill(store: Store, count: int) -> None:
    messages = make_messages(20)
    for k in range(count):
        sid = store.create_session(messages, session_id=f"s{k:06d}", title=f"session {k}")
        store.save(sid, state=STATE)
        store.update(sid, summary=f"Goal: analysis {k}. Done: loading. Left: plots.")


def bulk_sessions(store: PostgresStore, count: int) -> None:
    """Add ``count`` sessions with summaries in one statement (setup, not measured)."""
    sql = (
        "INSERT INTO jupyter_agent.sessions (project, id, schema_version, created_at, "
        "updated_at, summary, title, archived, transcript_len, first_prompt) SELECT "
        "%(project)s, 'bulk' || g, 1, now() - g * interval '1 second', "
        "now() - g * interval '1 second', 'Goal: analysis ' || g || '. Done: loading. "
        "Left: plots.', 'session ' || g, g %% 10 = 0, 20, 'Step 0: plot column 0' "
        "FROM generate_series(1, %(count)s) g"
    )
    store._link.run(lambda c: c.execute(sql, {"project": store.project, "count": count}))
    store._link.run(lambda c: c.execute("ANALYZE jupyter_agent.sessions"))


def row(*cells: Any) -> str:
    return " ".join(f"{c:>11}" if isinstance(c, str) else f"{c:>11.2f}" for c in cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed repetitions per cell")
    parser.add_argument("--url", default="", help="an existing PostgreSQL database to use")
    parser.add_argument("--sessions", type=int, default=100_000,
                        help="sessions for the newest-page listing")
    args = parser.parse_args()
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_pg_")))
        url = args.url
        if not url:
            from tests.postgres.server import PgCluster, find_server_bin

            bindir = find_server_bin()
            if bindir is None:
                raise SystemExit("no PostgreSQL server binaries found; pass --url")
            cluster = PgCluster(bindir, durable=True)
            stack.callback(cluster.destroy)
            cluster.init()
            url = cluster.url()
        project = f"bench/{secrets.token_hex(4)}"
        made: list[PostgresStore] = []

        def pg_store(name: str) -> PostgresStore:
            store = PostgresStore(url, tmp / "notes", project=f"{project}/{name}")
            made.append(store)
            return store

        def cleanup() -> None:
            for store in made:
                store._link.run(lambda c, p=store.project: c.execute(
                    "DELETE FROM jupyter_agent.sessions WHERE project = %s", (p,)))
                store.close()

        stack.callback(cleanup)

        print("save point (append 1 message + checkpoint) and load_session, median ms")
        print(row("messages", "JSON held", "PG held", "JSON cold", "PG cold", "JSON load",
                  "PG load"))
        for n in (100, 1_000, 10_000):
            j = bench_saves(FileStore(tmp / f"json{n}"), n, args.repeat)
            p = bench_saves(pg_store(f"s{n}"), n, args.repeat)
            print(row(f"{n:,}", j["held"], p["held"], j["cold"], p["cold"], j["load"],
                      p["load"]))
        print()
        print("list_sessions, median ms (20-message sessions with summaries)")
        print(row("sessions", "JSON all", "PG all", f"PG newest {PAGE}"))
        repeat = max(3, args.repeat // 2)
        for count in (100, 1_000):
            files = FileStore(tmp / f"list{count}")
            fill(files, count)
            team = pg_store(f"list{count}")
            fill(team, count)
            json_ms = median_ms(lambda s=files: FileStore(s.root).list_sessions(),
                                repeat)
            all_ms = median_ms(team.list_sessions, repeat)
            page_ms = median_ms(lambda t=team: t.list_sessions(limit=PAGE), args.repeat)
            print(row(f"{count:,}", json_ms, all_ms, page_ms))
        big = pg_store("big")
        bulk_sessions(big, args.sessions)
        page: Callable[[], object] = lambda: big.list_sessions(limit=PAGE)  # noqa: E731
        page()
        page_ms = median_ms(page, max(args.repeat, 21))
        verdict = "within" if page_ms <= TARGET_MS else "OVER"
        print(row(f"{args.sessions:,}", "-", "-", page_ms)
              + f"   ({verdict} the {TARGET_MS:.0f} ms target)")


if __name__ == "__main__":
    main()
