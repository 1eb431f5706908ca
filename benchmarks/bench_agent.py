"""Harness overhead of ``Agent.run`` versus a bare ``chat.completions.create``.

For a saved session of N messages (10 and 1,000), each repetition sends the same
context twice to the same loopback ``ScriptedModelServer``: once as a bare streamed
``client.chat.completions.create`` (consumed to the end), once through
``Agent.run`` (a text reply, so no tools run). The difference is the harness's own
time per turn: save points and checkpoints (atomic, fsync-ed writes of the session
file), tool-pair checks, the size estimate, pricing and events.

Usage::

    python benchmarks/bench_agent.py [--repeat 15] [--sizes 10,1000]

Prints a table of medians in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import openai

from jupyter_agent.agent import Agent
from jupyter_agent.store import SessionStore
from jupyter_agent.testing import ScriptedModelServer


def _history(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a benchmark."}]
    for i in range(n - 1):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"message {i}: " + "lorem ipsum " * 16})
    return messages


def _bare(client: openai.OpenAI, messages: list[dict[str, Any]], tools: list[Any]) -> float:
    start = time.perf_counter()
    stream = client.chat.completions.create(
        model="scripted",
        messages=messages,  # type: ignore[arg-type]
        tools=tools,
        stream=True,
        stream_options={"include_usage": True},
    )
    with stream:
        for _chunk in stream:
            pass
    return time.perf_counter() - start


def _measure(size: int, repeat: int, with_store: bool, root: Path) -> tuple[float, float]:
    steps = [{"text": "pong, a short reply of a few words"}] * (2 * repeat + 2)
    with ScriptedModelServer(steps) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="bench", max_retries=0)
        store = SessionStore(root / f"store-{size}-{with_store}") if with_store else None
        agent = Agent(client, "scripted", store=store, approval="auto")
        history = _history(size)
        if store is not None:
            sid = store.create_session(history)
            agent.close()  # different session; let it go before building the resumed one
            agent = Agent(client, "scripted", store=store, session_id=sid, approval="auto")
        else:
            agent.messages = history
        tools = agent.tools.schemas()
        agent.run("warm up")
        _bare(client, [*agent.messages, {"role": "user", "content": "warm up"}], tools)
        bare, full = [], []
        for i in range(repeat):
            prompt = f"ping {i}"
            bare.append(
                _bare(client, [*agent.messages, {"role": "user", "content": prompt}], tools)
            )
            start = time.perf_counter()
            agent.run(prompt)
            full.append(time.perf_counter() - start)
        agent.close()
    return statistics.median(bare) * 1e3, statistics.median(full) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--sizes", default="10,1000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            for with_store in (False, True):
                bare, full = _measure(size, args.repeat, with_store, Path(tmp))
                rows.append((size, "SessionStore" if with_store else "in memory", bare, full))
    columns = ("messages", "session", "bare create", "Agent.run", "harness")
    header = "{:>8} | {:<12} | {:>11} | {:>9} | {:>8}".format(*columns)
    print(header)
    print("-" * len(header))
    for size, mode, bare, full in rows:
        print(
            f"{size:>8} | {mode:<12} | {bare:>8.2f} ms | {full:>6.2f} ms | {full - bare:>5.2f} ms"
        )
    print(f"(medians of {args.repeat} turns; text replies, no tools; loopback server)")


if __name__ == "__main__":
    main()
