"""Benchmark of jupyter_agent.store: save, load and list on realistic sessions.

Run: ``python benchmarks/bench_store.py`` (about a minute; uses a temporary directory).

Sessions mix user prompts, assistant tool calls, 1-2 KB tool results and assistant
replies. ``save_messages`` appends one message to a session of N messages, measured
two ways: with the lease held across saves (as the agent does during a run, so the
store reuses its in-memory record) and with a fresh lease per call (cold: the file is
parsed each time). ``list_sessions`` is measured on a new store (every file parsed)
and on the same store again (unchanged files are recognized by dev/inode/size/mtime
and not parsed again). Times are medians, in milliseconds.
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

from jupyter_agent.store import SessionState, SessionStore, Usage


def make_messages(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Return ``n`` messages: system, then cycles of user / tool call / tool result / reply."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a data analyst."}]
    i = 0
    while len(messages) < n:
        kind = i % 4
        if kind == 0:
            messages.append(
                {"role": "user", "content": f"Step {i}: plot column {i % 7} by species."}
            )
        elif kind == 1:
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call_{i:08d}",
                            "type": "function",
                            "function": {
                                "name": "run_python",
                                "arguments": '{"code": "df.groupby(\\"species\\").mean()"}',
                            },
                        }
                    ],
                }
            )
        elif kind == 2:
            size = rng.randint(1000, 2000)
            body = "".join(rng.choice("abcdefghij 0123456789\n") for _ in range(size))
            messages.append({"role": "tool", "tool_call_id": f"call_{i - 1:08d}", "content": body})
        else:
            messages.append(
                {"role": "assistant", "content": f"Done with step {i}; the mean is {i}."}
            )
        i += 1
    return messages[:n]


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def bench_session(root: Path, n: int, repeat: int) -> dict[str, float]:
    store = SessionStore(root)
    base = make_messages(n)
    sid = store.create_session(base, session_id=f"bench{n}")
    extra = make_messages(n + 2 * repeat + 2, seed=1)[n:]
    current = list(base)

    def append_one() -> None:
        current.append(extra.pop())
        store.save_messages(sid, current)

    cold = median_ms(append_one, repeat)
    with store.lease(sid):
        append_one()  # prime the in-memory copy
        held = median_ms(append_one, repeat)
    load = median_ms(lambda: store.load_session(sid), repeat)
    size_mb = store.session_path(sid).stat().st_size / 1e6
    return {"held": held, "cold": cold, "load": load, "size": size_mb}


def bench_listing(root: Path, count: int, repeat: int) -> tuple[float, float]:
    store = SessionStore(root)
    messages = make_messages(20)
    state = SessionState(tool_calls=5, usage=Usage(input_tokens=1000, cost_usd=0.01, calls=5))
    for k in range(count):
        sid = store.create_session(messages, session_id=f"s{k:05d}", title=f"session {k}")
        store.save_state(sid, state)
    cold = median_ms(lambda: SessionStore(root).list_sessions(), repeat)  # parses every file
    store.list_sessions()
    warm = median_ms(store.list_sessions, repeat)  # unchanged files are not parsed again
    return cold, warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed repetitions per cell")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_store_") as tmp:
        print("save_messages (append 1) and load_session, median ms")
        print(
            f"{'messages':>9} {'file MB':>8} {'save, held':>11} {'save, cold':>11} {'load':>8}"
        )
        for n in (100, 1_000, 10_000):
            r = bench_session(Path(tmp) / f"s{n}", n, args.repeat)
            print(
                f"{n:>9,} {r['size']:>8.1f} {r['held']:>11.2f} {r['cold']:>11.2f} {r['load']:>8.2f}"
            )
        print()
        print("list_sessions (20-message sessions), median ms")
        print(f"{'sessions':>9} {'new store':>10} {'same store':>11}")
        for count in (100, 1_000):
            cold, warm = bench_listing(Path(tmp) / f"l{count}", count, max(3, args.repeat // 2))
            print(f"{count:>9,} {cold:>10.1f} {warm:>11.1f}")


if __name__ == "__main__":
    main()
