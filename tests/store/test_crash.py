"""Crash safety: a writer SIGKILLed at random moments never leaves a broken session.

A child process (forked from a forkserver started with ``sys.executable``) appends
messages and checkpoints in a loop; the test kills it with SIGKILL after a random
delay, many times, and after each kill checks that the record loads and equals one
of the states that were written (design notes "Durable writes", "Session files: a journal
beside a snapshot").
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pytest

from jupyter_agent.store import FileStore, holding
from tests.store.child import crash_message, crash_state, crash_writer

KILLS = 40


@pytest.fixture(scope="module")
def forkserver() -> multiprocessing.context.BaseContext:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["jupyter_agent.store", "tests.store.child"])
    return ctx


@pytest.mark.slow
def test_sigkill_during_saves_leaves_a_written_state(
    tmp_path: Path, forkserver: multiprocessing.context.BaseContext
) -> None:
    root = tmp_path / "mem"
    store = FileStore(root)
    sid = store.create_session([crash_message(0)], session_id="crashy")
    store.save(sid, state=crash_state(0))
    rng = random.Random(1234)
    lengths = []
    leftover_temps = torn_seen = 0
    last_state = 0
    for _ in range(KILLS):
        ready = forkserver.Event()  # type: ignore[attr-defined]
        proc = forkserver.Process(target=crash_writer, args=(str(root), sid, ready))  # type: ignore[attr-defined]
        proc.start()
        assert ready.wait(60)
        time.sleep(rng.uniform(0.005, 0.05))
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        assert proc.exitcode == -signal.SIGKILL

        leftover_temps += len(list((root / "sessions").glob(".*.tmp")))
        journal = (root / "sessions" / f"{sid}.jsonl").read_bytes()
        torn_seen += not journal.endswith(b"\n")
        record = FileStore(root).load_session(sid)
        n = len(record.messages)
        assert record.messages == [crash_message(k) for k in range(n)]
        assert record.transcript == record.messages
        # the writer saves messages and state in two calls: the state is one that was
        # saved after some earlier or the last message, never a mix, never going backwards.
        assert record.state == crash_state(record.state.tool_calls)
        assert last_state <= record.state.tool_calls <= n - 1
        last_state = record.state.tool_calls
        # leftover temporary files never break listing
        assert [s.id for s in FileStore(root).list_sessions()] == [sid]
        lengths.append(n)

    assert lengths == sorted(lengths)
    assert lengths[-1] > 5, "the writer hardly ever got to save; test is vacuous"
    # the lease is free after every SIGKILL, and taking it removes stale temp files
    with holding(store, sid):
        assert not list((root / "sessions").glob(".*.tmp"))
    print(f"final length {lengths[-1]}, temp files seen after kills: {leftover_temps}, "
          f"torn journal tails seen: {torn_seen}")
