"""A full disk: a 1 MiB tmpfs filled to the brim (design notes "Durable writes"; needs root to
mount)."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_agent.errors import StorageError
from jupyter_agent.store import FileStore, SessionState, holding
from tests.faults.disks import fill, small_tmpfs

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root"),
]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "disk", "1m") as mount:
        yield mount


def test_a_full_disk_refuses_the_save_keeps_the_session_and_recovers(small_disk: Path) -> None:
    store = FileStore(small_disk / "mem")
    base = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    sid = store.create_session(base)
    store.save(sid, base, SessionState(tool_calls=1))
    store.notes.write("project", "kept")
    before = store.load_session(sid)
    journal = store.journal_path(sid)
    journal_bytes = journal.read_bytes()
    filler = fill(small_disk)
    prompt = {"role": "user", "content": "x" * 200_000}
    with holding(store, sid):  # as the agent holds it
        with pytest.raises(StorageError) as info:
            store.save(sid, [*base, prompt], SessionState(tool_calls=2))
        err = info.value
        assert err.errno == errno.ENOSPC and err.path == journal
        assert str(err) == (f"could not write {journal}: No space left on device; free some "
                            "disk space, then try again (what was saved before is intact)")
        assert journal.read_bytes() == journal_bytes  # the cut-short line was taken back
        assert store.load_session(sid) == before
        with pytest.raises(StorageError, match="No space left on device"):
            store.notes.append("project", "lost?")
        assert store.notes.read("project") == "kept"
        with pytest.raises(StorageError, match="No space left on device"):
            store.create_session([{"role": "user", "content": "y" * 100_000}])
        filler.unlink()  # the cause is gone: the same save now works, once
        store.save(sid, [*base, prompt], SessionState(tool_calls=2))
    record = FileStore(small_disk / "mem").load_session(sid)
    assert record.transcript == [*base, prompt]  # the prompt is there once, not twice
    assert record.state.tool_calls == 2
    assert not [p for p in (small_disk / "mem" / "sessions").iterdir() if p.suffix == ".tmp"]
    assert [s.id for s in store.list_sessions()] == [sid]
