"""Benchmark of the artefact operations: search, export and fork.

Run: ``python benchmarks/bench_artefacts.py`` (about a minute; uses a temporary directory).

Search: N sessions of 40 messages each (prompts, tool calls with code, 1-2 KB tool
results, replies); the query matches about one session in a hundred. "matching" is the
search itself over the listing entries; the default search (listing + matching) is
measured on a new store (the store lists every file, as a new kernel or a ``jupyter agent
search`` does) and on the same store again; the deep search reads every transcript.
Export and fork: one session of N messages. Times are
medians of a few runs, in milliseconds. Setup files are written directly (not through
the store's durable writes), which does not change what is measured.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_agent.artefacts.export import render
from jupyter_agent.artefacts.fork import fork_record
from jupyter_agent.artefacts.search import search_listings, search_sessions
from jupyter_agent.store import FileStore
from jupyter_agent.store.records import SessionRecord, dump_record, utc_now


def make_messages(n: int, rng: random.Random, topic: str) -> list[dict[str, Any]]:
    """``n`` messages: system, then cycles of request / code call / result / reply."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a data analyst."}]
    i = 0
    while len(messages) < n:
        kind = i % 4
        if kind == 0:
            messages.append({"role": "user", "content": f"Step {i}: plot {topic} by group."})
        elif kind == 1:
            code = f'df.groupby("group")["{topic}"].describe()'
            messages.append({"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{i}", "type": "function",
                "function": {"name": "run_python", "arguments": f'{{"code": "{code}"}}'}}]})
        elif kind == 2:
            size = rng.randint(1000, 2000)
            body = "".join(rng.choice("abcdefghij 0123456789\n") for _ in range(size))
            messages.append({"role": "tool", "tool_call_id": f"call_{i - 1}", "content": body})
        else:
            messages.append({"role": "assistant", "content": f"The {topic} differs by group."})
        i += 1
    return messages[:n]


def write_session(store: FileStore, index: int, messages: list[dict[str, Any]],
                  topic: str) -> str:
    now = utc_now()
    record = SessionRecord(id=f"s{index:06d}", created_at=now, updated_at=now,
                           title=f"Analysis {index}", summary=f"Goal: study {topic}.",
                           messages=messages, transcript=messages)
    store.sessions_dir.mkdir(parents=True, exist_ok=True)
    store.session_path(record.id).write_bytes(dump_record(record))
    return record.id


def median_ms(func: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def search_row(count: int, rng: random.Random, repeat: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        store = FileStore(Path(tmp))
        for index in range(count):
            topic = "flipper length" if index % 100 == 0 else "bill depth"
            write_session(store, index, make_messages(40, rng, topic), topic)
        cold = median_ms(lambda: search_sessions(FileStore(Path(tmp)), "flipper length"),
                         repeat)
        search_sessions(store, "flipper length")
        warm = median_ms(lambda: search_sessions(store, "flipper length"), repeat)
        listing = store.list_sessions()
        match = median_ms(lambda: search_listings(listing, "flipper length"), repeat)
        deep = median_ms(lambda: search_sessions(store, "flipper length", deep=True),
                         max(1, repeat // 2))
    return f"{'':22} {count:>8,} {match:>9.2f} {cold:>18.1f} {warm:>19.1f} {deep:>9.1f}"


def export_row(size: int, rng: random.Random, repeat: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        store = FileStore(Path(tmp))
        sid = write_session(store, 0, make_messages(size, rng, "body mass"), "body mass")
        record = store.load_session(sid)
    half = max(sum(1 for m in record.transcript if m["role"] == "user") // 2, 1)
    ipynb, md, json = (median_ms(lambda f=fmt: render(record, f), repeat)  # type: ignore[misc]
                       for fmt in ("ipynb", "md", "json"))
    whole = median_ms(lambda: fork_record(record), repeat)
    cut = median_ms(lambda: fork_record(record, at=half), repeat)
    return (f"{'':22} {size:>8,} {ipynb:>9.1f} {md:>8.1f} {json:>8.1f}"
            f" {whole:>12.1f} {cut:>14.1f}")


def bench_search(counts: list[int], repeat: int) -> None:
    print("search (ms)            sessions  matching   index, new store   index, same store"
          "      deep")
    rng = random.Random(0)
    for count in counts:
        print(search_row(count, rng, repeat))


def bench_export_fork(sizes: list[int], repeat: int) -> None:
    print("\nexport and fork (ms)   messages     ipynb       md     json   fork whole"
          "   fork at half")
    rng = random.Random(1)
    for size in sizes:
        print(export_row(size, rng, repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Smaller sizes (a smoke run).")
    args = parser.parse_args()
    if args.quick:
        bench_search([100, 500], repeat=3)
        bench_export_fork([100, 1_000], repeat=3)
    else:
        bench_search([100, 1_000, 3_000], repeat=5)
        bench_export_fork([100, 1_000, 10_000], repeat=3)


if __name__ == "__main__":
    main()
