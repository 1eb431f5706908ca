"""The store side by side with the seed design and two peers, on the same messages.

Run: ``python benchmarks/bench_store.py`` (a few minutes, ~3 GB of temporary files), or
``--quick`` for a small size that only proves it works (CI runs that). Peers come with
``pip install ".[bench]"``; a peer that is not installed is reported in the tables.

Backends:

* ``store``: :class:`jupyter_agent.store.FileStore` (journal + snapshot), the lease held
  across saves as the agent holds it;
* ``seed``: the seed design (``seed_store.py``): one JSON file rewritten per save;
* ``agents-sqlite``: OpenAI Agents SDK ``SQLiteSession`` (one row per message, WAL);
* ``langgraph-sqlite``: LangGraph ``SqliteSaver`` (one checkpoint per save holding the
  ``messages`` channel).

Measured, as medians: ``save`` (one new message into a session of N), ``load`` (the whole
session from a new store object), ``bytes/save`` (bytes handed to ``write`` calls, from
``/proc/self/io``), and ``list`` (every session, in a fresh process, import excluded).
Then the targets of the store: ratios against the seed design and the peers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from seed_store import SeedStore

from jupyter_agent.store import FileStore, SessionState, Usage, holding

Messages = list[dict[str, Any]]


def make_messages(n: int, seed: int = 0, start: int = 0) -> Messages:
    """``n`` messages: system, then cycles of user / tool call / 1-2 KB tool result / reply."""
    rng = random.Random(seed)
    out: Messages = [] if start else [{"role": "system", "content": "You are a data analyst."}]
    i = start
    while len(out) < n:
        kind = i % 4
        if kind == 0:
            out.append({"role": "user", "content": f"Step {i}: plot column {i % 7} by species."})
        elif kind == 1:
            out.append({"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{i:08d}", "type": "function", "function": {
                    "name": "run_python", "arguments": '{"code": "df.groupby(\\"s\\").mean()"}'}}]})
        elif kind == 2:
            body = "".join(rng.choice("abcdefghij 0123456789\n") for _ in range(rng.randint(1000,
                                                                                         2000)))
            out.append({"role": "tool", "tool_call_id": f"call_{i - 1:08d}", "content": body})
        else:
            out.append({"role": "assistant", "content": f"Done with step {i}; the mean is {i}."})
        i += 1
    return out[:n]


def written() -> int:
    """Bytes this process has handed to ``write`` calls so far."""
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("wchar:"))


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


# --------------------------------------------------------------------------- backends
class Backend:
    """One way to keep sessions: create, save one message, load, list."""

    name = ""

    def __init__(self, root: Path) -> None:
        self.root = root

    def create(self, sid: str, messages: Messages) -> None:
        raise NotImplementedError

    def save(self, sid: str, messages: Messages) -> None:
        """One save point: ``messages`` is the whole context, its last one is new."""
        raise NotImplementedError

    def load(self, sid: str) -> object:
        raise NotImplementedError

    def close(self) -> None:
        pass


class StoreBackend(Backend):
    name = "store"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.store = FileStore(root)
        self.state = SessionState(tool_calls=1, usage=Usage(input_tokens=1, calls=1))

    def create(self, sid: str, messages: Messages) -> None:
        self.store.create_session(messages, session_id=sid)
        self.store.acquire_lease(sid)  # as the agent does for its whole life

    def save(self, sid: str, messages: Messages) -> None:
        self.state.usage.input_tokens += 1
        self.store.save(sid, messages, self.state)

    def load(self, sid: str) -> object:
        return FileStore(self.root).load_session(sid)

    def close(self) -> None:
        self.store.release_all()


class SeedBackend(Backend):
    name = "seed"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.store = SeedStore(root)

    def create(self, sid: str, messages: Messages) -> None:
        self.store.create_session(sid, messages)

    def save(self, sid: str, messages: Messages) -> None:
        self.store.save_messages(sid, messages)

    def load(self, sid: str) -> object:
        return SeedStore(self.root).load_session(sid)


class AgentsBackend(Backend):
    name = "agents-sqlite"

    def __init__(self, root: Path) -> None:
        from agents import SQLiteSession

        super().__init__(root)
        root.mkdir(parents=True, exist_ok=True)
        self.cls = SQLiteSession
        self.db = root / "agents.sqlite"
        self.loop = asyncio.new_event_loop()
        self.sessions: dict[str, Any] = {}

    def _session(self, sid: str) -> Any:
        if sid not in self.sessions:
            self.sessions[sid] = self.cls(sid, self.db)
        return self.sessions[sid]

    def create(self, sid: str, messages: Messages) -> None:
        self.loop.run_until_complete(self._session(sid).add_items(messages))

    def save(self, sid: str, messages: Messages) -> None:
        self.loop.run_until_complete(self._session(sid).add_items(messages[-1:]))

    def load(self, sid: str) -> object:
        fresh = self.cls(sid, self.db)
        try:
            return self.loop.run_until_complete(fresh.get_items())
        finally:
            fresh.close()

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()
        self.loop.close()


class LangGraphBackend(Backend):
    name = "langgraph-sqlite"

    def __init__(self, root: Path) -> None:
        import sqlite3

        from langgraph.checkpoint.base import empty_checkpoint
        from langgraph.checkpoint.sqlite import SqliteSaver

        super().__init__(root)
        root.mkdir(parents=True, exist_ok=True)
        self.db = root / "langgraph.sqlite"
        self.connect = lambda: sqlite3.connect(self.db, check_same_thread=False)
        self.cls, self.empty = SqliteSaver, empty_checkpoint
        self.saver = SqliteSaver(self.connect())
        self.versions: dict[str, int] = {}

    def _put(self, sid: str, messages: Messages) -> None:
        version = self.versions.get(sid, 0) + 1
        self.versions[sid] = version
        checkpoint = self.empty()
        checkpoint["channel_values"] = {"messages": messages}
        checkpoint["channel_versions"] = {"messages": version}
        config = {"configurable": {"thread_id": sid, "checkpoint_ns": ""}}
        self.saver.put(config, checkpoint, {"step": version}, {"messages": version})  # type: ignore[arg-type]

    def create(self, sid: str, messages: Messages) -> None:
        self._put(sid, messages)

    def save(self, sid: str, messages: Messages) -> None:
        self._put(sid, messages)

    def load(self, sid: str) -> object:
        saver = self.cls(self.connect())
        try:
            return saver.get_tuple({"configurable": {"thread_id": sid, "checkpoint_ns": ""}})
        finally:
            saver.conn.close()

    def close(self) -> None:
        self.saver.conn.close()


BACKENDS: list[type[Backend]] = [StoreBackend, SeedBackend, AgentsBackend, LangGraphBackend]

LIST_CODE = {
    "store": "from jupyter_agent.store import FileStore\n"
             "run = lambda: FileStore(ROOT).list_sessions()",
    "seed": "from seed_store import SeedStore\nrun = lambda: SeedStore(ROOT).list_sessions()",
    "agents-sqlite": "import sqlite3\nrun = lambda: sqlite3.connect(ROOT + '/agents.sqlite')"
                     ".execute('SELECT session_id, updated_at FROM agent_sessions "
                     "ORDER BY updated_at DESC').fetchall()",
    "langgraph-sqlite": "import sqlite3\nfrom langgraph.checkpoint.sqlite import SqliteSaver\n"
                        "run = lambda: {c.config['configurable']['thread_id'] for c in SqliteSaver("
                        "sqlite3.connect(ROOT + '/langgraph.sqlite')).list(None)}",
}


def cold_list_ms(name: str, root: Path) -> float:
    """Median time of one listing, each in a fresh process (imports not counted)."""
    code = (f"import sys, time\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            f"ROOT = {str(root)!r}\n{LIST_CODE[name]}\n"
            "t = time.perf_counter(); run(); print((time.perf_counter() - t) * 1000)")
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True).stdout) for _ in range(3)]
    return statistics.median(times)


# --------------------------------------------------------------------------- runs
def available() -> dict[str, type[Backend] | str]:
    """Each backend, or why it cannot run."""
    out: dict[str, type[Backend] | str] = {}
    for cls in BACKENDS:
        try:
            with tempfile.TemporaryDirectory(prefix="bench_probe_") as probe:
                cls(Path(probe)).close()
            out[cls.name] = cls
        except ImportError as err:
            out[cls.name] = f"not installed ({err.name}): pip install '.[bench]'"
    return out


def bench_sizes(tmp: Path, backends: dict[str, Any], sizes: list[int],
                repeat: int) -> dict[tuple[str, int], dict[str, float]]:
    results = {}
    for n in sizes:
        base = make_messages(n)
        extra = make_messages(repeat, seed=n, start=n)
        for name, cls in backends.items():
            if isinstance(cls, str):
                continue
            backend = cls(tmp / f"{name}-{n}")
            backend.create("s", base)
            current = list(base)
            times, sizes_written = [], []
            for message in extra:
                current = [*current, message]
                before, start = written(), time.perf_counter()
                backend.save("s", current)
                times.append(time.perf_counter() - start)
                sizes_written.append(written() - before)
            load = median_ms(lambda b=backend: b.load("s"), max(3, repeat // 3))
            backend.close()
            results[(name, n)] = {"save": statistics.median(times) * 1000, "load": load,
                                  "bytes": statistics.median(sizes_written)}
            shutil.rmtree(tmp / f"{name}-{n}", ignore_errors=True)
    return results


def bench_turns(tmp: Path, n: int, turns: int) -> tuple[float, float]:
    """Mean bytes written and bytes added per agent turn (4 save points) at size ``n``."""
    store = FileStore(tmp / f"turns-{n}")
    messages = make_messages(n)
    sid = store.create_session(messages)
    state = SessionState()
    added = total = 0
    with holding(store, sid):
        for t in range(turns):
            turn = make_messages(4, seed=t, start=n + 4 * t)
            before = written()
            for message in turn:
                messages = [*messages, message]
                state.usage.input_tokens += 100
                state.tool_calls += message["role"] == "tool"
                store.save(sid, messages, state)
            total += written() - before
            added += sum(len(json.dumps(m, ensure_ascii=False).encode()) for m in turn)
    shutil.rmtree(tmp / f"turns-{n}", ignore_errors=True)
    return total / turns, added / turns


def bench_listing(tmp: Path, backends: dict[str, Any], count: int,
                  per_session: Messages) -> dict[str, float]:
    out = {}
    for name, cls in backends.items():
        if isinstance(cls, str):
            continue
        root = tmp / f"list-{name}-{count}"
        backend = cls(root)
        for k in range(count):
            backend.create(f"s{k:05d}", per_session)
        backend.close()
        out[name] = cold_list_ms(name, root)
        shutil.rmtree(root, ignore_errors=True)
    return out


def bench_create(tmp: Path, counts: list[int], per_session: Messages,
                 repeat: int) -> dict[int, float]:
    """Median time to create one session (of one message) in a memory directory that
    holds ``count`` sessions already: the store's part does not depend on ``count`` (its
    four ``fsync`` calls are the floor)."""
    out = {}
    for count in counts:
        root = tmp / f"create-{count}"
        store = FileStore(root)
        for k in range(count):
            store.create_session(per_session, session_id=f"s{k:05d}")
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            store.create_session([{"role": "system", "content": "x"}])
            times.append(time.perf_counter() - start)
        out[count] = statistics.median(times) * 1000
        shutil.rmtree(root, ignore_errors=True)
    return out


def fmt(value: float | None, unit: str = "") -> str:
    return "-" if value is None else (f"{value:,.0f}{unit}" if value >= 100 else
                                      f"{value:.2f}{unit}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CI)")
    parser.add_argument("--repeat", type=int, default=9, help="timed saves per cell")
    parser.add_argument("--sizes", type=int, nargs="*", help="session sizes (messages)")
    parser.add_argument("--no-listing", action="store_true", help="skip the listing tables")
    args = parser.parse_args()
    sizes = args.sizes or ([100, 300] if args.quick else [100, 1_000, 10_000, 50_000])
    counts = [10, 30] if args.quick else [100, 1_000, 5_000]
    big_count, big_size = (5, 200) if args.quick else (1_000, 2_200)  # ~1 MB sessions
    repeat = 3 if args.quick else args.repeat
    backends = available()
    with tempfile.TemporaryDirectory(prefix="bench_store_") as name:
        tmp = Path(name)
        for label, cls in backends.items():
            print(f"{label:>17}: {'ok' if not isinstance(cls, str) else cls}")
        results = bench_sizes(tmp, backends, sizes, repeat)
        names = [b for b, c in backends.items() if not isinstance(c, str)]
        for metric, unit, title in (("save", " ms", "save one message, median"),
                                    ("load", " ms", "load the session, fresh object, median"),
                                    ("bytes", " B", "bytes written per save, median")):
            print(f"\n{title}\n{'messages':>9} " + " ".join(f"{b:>17}" for b in names))
            for n in sizes:
                print(f"{n:>9,} " + " ".join(f"{fmt(results[(b, n)][metric], unit):>17}"
                                              for b in names))
        print("\nbytes written per agent turn (4 save points), store\n"
              f"{'messages':>9} {'written':>10} {'added':>10} {'limit 2x+16KB':>14}")
        turn_rows = {}
        for n in sizes:
            total, added = bench_turns(tmp, n, 8 if args.quick else 60)
            turn_rows[n] = (total, added)
            print(f"{n:>9,} {total:>10,.0f} {added:>10,.0f} {2 * added + 16384:>14,.0f}")
        if args.no_listing:
            return
        print(f"\ncold list in a fresh process, {len(make_messages(20))}-message sessions, ms\n"
              f"{'sessions':>9} " + " ".join(f"{b:>17}" for b in names))
        small = make_messages(20)
        for count in counts:
            row = bench_listing(tmp, backends, count, small)
            print(f"{count:>9,} " + " ".join(f"{fmt(row.get(b)):>17}" for b in names))
        big = bench_listing(tmp, {k: backends[k] for k in ("store", "seed")}, big_count,
                            make_messages(big_size))
        print(f"{big_count:>9,} sessions of {big_size} messages (~1 MB): store "
              f"{fmt(big['store'])} ms, seed (parses every file) {fmt(big['seed'])} ms")
        created = bench_create(tmp, [0, counts[-1]], small, 15 if not args.quick else 3)
        print("\ncreate one session in a directory of N sessions, median ms\n" + "\n".join(
            f"{count:>9,} {fmt(ms):>10}" for count, ms in created.items()))
        print_targets(results, turn_rows, big, sizes, big_count, created)


def print_targets(results: dict[tuple[str, int], dict[str, float]],
                  turns: dict[int, tuple[float, float]], big: dict[str, float],
                  sizes: list[int], big_count: int, created: dict[int, float]) -> None:
    n = 10_000 if 10_000 in sizes else sizes[-1]

    def get(b: str, metric: str) -> float | None:
        return results.get((b, n), {}).get(metric)

    save, seed_save, sdk_save = get("store", "save"), get("seed", "save"), get("agents-sqlite",
                                                                               "save")
    load, seed_load = get("store", "load"), get("seed", "load")
    print(f"\ntargets ({n:,} messages; {big_count:,} sessions for listing)")
    assert save and seed_save and load and seed_load
    print(f"  save: store/seed = 1/{seed_save / save:,.0f} (target <= 1/50); "
          + (f"store/agents-sqlite = {save / sdk_save:.2f} (target <= 1)" if sdk_save
             else "agents-sqlite: not installed"))
    worst = max(total / (2 * added + 16384) for total, added in turns.values())
    print(f"  bytes per turn: worst written/(2 x added + 16 KB) = {worst:.2f} (target <= 1)")
    lg_load = get("langgraph-sqlite", "load")
    print(f"  load: store/seed = 1/{seed_load / load:.1f} (target <= 1/3); "
          + (f"store/langgraph-sqlite = {load / lg_load:.2f} (target <= 1)" if lg_load
             else "langgraph-sqlite: not installed"))
    print(f"  list: {fmt(big['store'])} ms (target <= 50 ms); store/seed = "
          f"1/{big['seed'] / big['store']:,.0f} (target <= 1/20)")
    most = max(created)
    print(f"  create in a directory of {most:,}: {fmt(created[most])} ms (target <= 5 ms; "
          f"{fmt(created[0])} ms in an empty one)")


if __name__ == "__main__":
    main()
