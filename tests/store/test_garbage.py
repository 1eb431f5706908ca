"""What killed writers and deleted sessions leave behind is removed safely (design notes
"Leases", "Durable writes")."""

from __future__ import annotations

import json
from pathlib import Path

from jupyter_agent.store import FileStore
from jupyter_agent.store.sweep import collect_garbage
from tests.processes import Holder, store_env


def test_collect_garbage_removes_only_what_nobody_uses(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    store = FileStore(root)
    idle = store.create_session([], session_id="idle")
    busy = store.create_session([], session_id="busy")
    gone = store.create_session([], session_id="gone")
    store.delete_session(gone)
    store.notes.write("project", "kept")
    sessions = store.sessions_dir
    leftovers = [sessions / ".idle.json.1a2b3c4d.tmp", sessions / ".idle.jsonl.00ff00ff.tmp",
                 root / ".project.md.0badcafe.tmp", root / ".index.jsonl.12345678.tmp"]
    kept = [sessions / ".busy.json.deadbeef.tmp"]
    orphan = sessions / "orphan.jsonl"  # a journal whose snapshot was never written
    held_gone = "heldgone"  # a deleted session whose ID someone holds right now
    holder_busy, holder_gone = Holder(store_env(root), busy), Holder(store_env(root), held_gone)
    for path in [*leftovers, *kept]:  # left by writers killed after those leases were taken
        path.write_text("{")
    orphan.write_text("{}\n")
    try:
        removed = set(collect_garbage(store))
    finally:
        holder_busy.exit()
        holder_gone.exit()
    assert removed == {*leftovers, orphan, store.lock_path(gone), store.lock_path("orphan")}
    assert all(not p.exists() for p in leftovers)
    assert all(p.exists() for p in kept)
    assert not store.lock_path(gone).exists() and not orphan.exists()
    assert store.lock_path(busy).exists() and store.lock_path(held_gone).exists()
    assert store.lock_path(idle).exists()  # a live session keeps its lock file
    assert store.notes.read("project") == "kept"
    assert {s.id for s in store.list_sessions()} == {idle, busy}
    # nothing is left for a second pass but what was in use
    removed_later = set(collect_garbage(store))
    assert removed_later == {*kept, store.lock_path(held_gone)}


def test_the_lease_of_this_store_is_never_collected(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "mem")
    store.acquire_lease("new")  # leased before the session exists, as a new Agent does
    (store.sessions_dir / ".new.json.abcdef01.tmp").write_text("{")
    assert collect_garbage(store) == []
    assert store.lock_path("new").exists()
    lock = json.loads(store.lock_path("new").read_text())
    assert lock["pid"] > 0
    store.create_session([], session_id="new")
    store.release_all()
