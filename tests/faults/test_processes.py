"""Several processes on one memory directory at once (design notes "The memory directory and
notes", "Leases", "Listing")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_agent.store import FileStore

pytestmark = [pytest.mark.faults, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
WORKERS, ROUNDS = 4, 15


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    store = FileStore(root)
    shared = store.create_session([{"role": "system", "content": "shared"}], session_id="shared")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-m", "tests.faults.workers", str(root), shared,
                               str(k), str(ROUNDS)], stdout=subprocess.PIPE, text=True,
                              env=env, cwd=REPO) for k in range(WORKERS)]
    outputs = [p.communicate(timeout=240)[0].splitlines() for p in procs]
    assert [p.returncode for p in procs] == [0] * WORKERS
    tags = {f"w{k}-{i}" for k in range(WORKERS) for i in range(ROUNDS)}
    assert {line for out in outputs for line in out[:-1]} == tags
    # every note, exactly once
    notes = store.notes.read("project").splitlines()
    assert sorted(notes) == sorted(f"- {tag}" for tag in tags)
    # the shared session has every acknowledged message once, each worker's in its order
    transcript = [m["content"] for m in store.load_session(shared).transcript[1:]]
    assert sorted(transcript) == sorted(tags)
    for k in range(WORKERS):
        mine = [t for t in transcript if t.startswith(f"w{k}-")]
        assert mine == [f"w{k}-{i}" for i in range(ROUNDS)]
    # the listing index agrees with the sessions themselves
    listing = {s.id: s for s in FileStore(root).list_sessions()}
    assert len(listing) == WORKERS + 1
    for sid, entry in listing.items():
        record = store.load_session(sid)
        assert (entry.message_count, entry.updated_at, entry.first_prompt) == (
            len(record.transcript), record.updated_at,
            next((m["content"] for m in record.transcript if m["role"] == "user"), ""))
    print(f"{WORKERS} processes x {ROUNDS} rounds: {len(notes)} notes, "
          f"{len(transcript)} shared messages, records lost = 0")
