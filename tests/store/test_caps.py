"""Bounded work on any input: every file of the memory directory and every team-store value
is read under a size cap, and values nested too deeply are refused at load.

A file over its cap is refused before a byte of it is read, in one line naming the file,
its size and the cap; nothing is changed. Oversize files are sparse (made with
``truncate``: the size check comes before the check for holes) or a few MiB written here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_agent.errors import CorruptSessionError, InvalidMessageError, TooLargeError
from jupyter_agent.store import FileStore
from jupyter_agent.store.engine import NOTES_LIMIT
from jupyter_agent.store.index import INDEX_LIMIT, INDEX_NAME, SNAPSHOT_LIMIT
from jupyter_agent.store.messages import JOURNAL_CAP, LINE_CAP, MAX_DEPTH, RECORD_CAP
from jupyter_agent.store.records import MAX_FIGURE_BYTES, dump_record
from jupyter_agent.store.sweep import check_sessions
from jupyter_agent.testing import ScriptedModelServer
from tests.test_magics_errors import usage_error

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "hello"}]


@pytest.fixture
def store(memory_dir: Path) -> FileStore:
    return FileStore(memory_dir)


def grow(path: Path, size: int) -> None:
    """Make ``path`` ``size`` bytes long without writing them (a sparse file)."""
    with path.open("r+b") as handle:
        handle.truncate(size)


def test_an_oversize_snapshot_is_refused_unread_and_left_out_of_the_listing(
        store: FileStore) -> None:
    sid = store.create_session(MESSAGES, session_id="big")
    store.create_session(MESSAGES, session_id="fine")
    path = store.session_path(sid)
    grow(path, RECORD_CAP + 1)
    fresh = FileStore(store.root)
    with pytest.raises(TooLargeError) as caught:
        fresh.load_session(sid)
    assert str(caught.value) == (
        f"{path}: session snapshot of {RECORD_CAP + 1:,} bytes is over the 16 MiB cap; "
        "it was not loaded and was left untouched")
    assert isinstance(caught.value, CorruptSessionError)  # what front ends report as one line
    assert [s.id for s in fresh.list_sessions()] == ["fine"]
    assert path.stat().st_size == RECORD_CAP + 1  # untouched


def test_listing_reads_at_most_a_bounded_snapshot(store: FileStore) -> None:
    """A snapshot over the listing's cap (but under the load cap) is not read to list it;
    the index entry written when it was saved still lists it while it is fresh."""
    sid = store.create_session(MESSAGES, session_id="wide")
    grow(store.session_path(sid), SNAPSHOT_LIMIT + 1)
    (store.root / INDEX_NAME).unlink()
    assert FileStore(store.root).list_sessions() == []


def test_an_oversize_journal_is_refused(store: FileStore) -> None:
    sid = store.create_session(MESSAGES, session_id="long")
    path = store.journal_path(sid)
    grow(path, JOURNAL_CAP + 1)
    with pytest.raises(TooLargeError) as caught:
        FileStore(store.root).load_session(sid)
    assert str(caught.value).startswith(
        f"{path}: journal of {JOURNAL_CAP + 1:,} bytes is over the 256 MiB cap;")


def test_an_oversize_journal_line_is_refused_by_line_number(store: FileStore) -> None:
    sid = store.create_session(MESSAGES, session_id="line")
    path = store.journal_path(sid)
    lines = path.read_bytes().splitlines(keepends=True)
    huge = json.dumps({"add": [{"role": "user", "content": "x" * LINE_CAP}]}).encode()
    path.write_bytes(lines[0] + huge + b"\n" + b"".join(lines[1:]))
    with pytest.raises(TooLargeError) as caught:
        FileStore(store.root).load_session(sid)
    assert str(caught.value) == (
        f"{path}: journal line 2 of {len(huge):,} bytes is over the 16 MiB cap; "
        "it was not loaded and was left untouched")


def test_the_writer_never_writes_what_the_reader_refuses(store: FileStore) -> None:
    """A save point over the line cap is refused (nothing written); a whole session
    written at once (import, fork) is split into lines under the cap."""
    sid = store.create_session(MESSAGES, session_id="w")
    before = store.journal_path(sid).read_bytes()
    with pytest.raises(TooLargeError, match=r"new journal line of .* nothing was written"):
        store.save(sid, [*MESSAGES, {"role": "user", "content": "y" * LINE_CAP}])
    assert store.journal_path(sid).read_bytes() == before
    assert store.load_session(sid).transcript == MESSAGES

    half = LINE_CAP // 2 + 1024
    record = store.load_session(sid).model_copy(update={"id": "imported"})
    record.transcript = record.messages = [
        *MESSAGES, {"role": "user", "content": "a" * half}, {"role": "user", "content": "b" * half}]
    store.create_session(record=record)
    lines = store.journal_path("imported").read_bytes().splitlines()
    assert len(lines) == 3 and max(map(len, lines)) <= LINE_CAP  # header + two adds
    assert FileStore(store.root).load_session("imported").transcript == record.transcript


def test_an_oversize_index_is_ignored_and_rewritten(store: FileStore) -> None:
    store.create_session(MESSAGES, session_id="one")
    index = store.root / INDEX_NAME
    grow(index, INDEX_LIMIT + 1)
    assert [s.id for s in FileStore(store.root).list_sessions()] == ["one"]
    assert index.stat().st_size < 4096  # rewritten with the live entries only


def test_oversize_figures_and_notes_are_refused(store: FileStore) -> None:
    sid = store.create_session(MESSAGES, session_id="fig")
    store.save_figure(sid, "f1", b"\x89PNG\r\n\x1a\n" + b"\0" * 100, "image/png")
    figure = store.figures_path(sid) / "f1.png"
    grow(figure, MAX_FIGURE_BYTES + 1)
    with pytest.raises(TooLargeError) as caught:
        store.read_figure(sid, "f1")
    assert str(caught.value).startswith(f"{figure}: figure of {MAX_FIGURE_BYTES + 1:,} bytes")
    store.notes.write("project", "short")
    notes = store.notes.path("project")
    grow(notes, NOTES_LIMIT + 1)
    with pytest.raises(TooLargeError, match=f"^{notes}: notes file of "):
        store.notes.read("project")


def test_magics_report_an_oversize_session_in_one_line(
        shell: InteractiveShell, store: FileStore, model_server: ScriptedModelServer) -> None:
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    sid = store.create_session(MESSAGES, session_id="huge")
    grow(store.session_path(sid), RECORD_CAP + 1)
    message = usage_error(shell, "agent_resume", sid)
    assert message.startswith(f"{store.session_path(sid)}: session snapshot of ")


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1000])
def test_values_nested_too_deeply_are_refused_at_load(store: FileStore, depth: int) -> None:
    """Whatever ``orjson`` decodes (up to 1,024 levels) is checked: a file written by hand
    is refused in one line, never a traceback later."""
    sid = store.create_session([*MESSAGES, {"role": "user", "content": "c", "x": "HERE"}],
                               session_id="deep")
    raw = dump_record(store.load_session(sid)).replace(b'"HERE"', nested(depth).encode())
    store.session_path(sid).write_bytes(raw)  # the one-file form: no journal
    store.journal_path(sid).unlink()
    with pytest.raises(CorruptSessionError) as caught:
        FileStore(store.root).load_session(sid)
    assert str(caught.value).endswith(
        f"messages[2]: values are nested too deeply (more than {MAX_DEPTH} levels)")
    other = store.create_session(MESSAGES, session_id="ok")
    head = json.loads(dump_record(store.load_session(other)))
    head["state"]["extra"] = "HERE"
    raw = json.dumps(head).replace('"HERE"', nested(depth))
    store.session_path(other).write_text(raw)
    store.journal_path(other).unlink()
    with pytest.raises(CorruptSessionError, match=r"nested too deeply \(more than 200 levels\)"):
        FileStore(store.root).load_session(other)


def test_values_nested_too_deeply_are_refused_when_saved(store: FileStore) -> None:
    deep = json.loads(nested(MAX_DEPTH + 1))
    with pytest.raises(InvalidMessageError, match=r"nested too deeply \(more than 200 levels\)"):
        store.create_session([{"role": "user", "content": "c", "x": deep}])


def test_fsck_reports_an_oversize_journal_and_leaves_it(store: FileStore) -> None:
    sid = store.create_session(MESSAGES, session_id="long")
    path = store.journal_path(sid)
    grow(path, JOURNAL_CAP + 1)
    [check] = check_sessions(FileStore(store.root), repair=True)
    assert (check.session_id, check.state, check.repair, check.repaired) == (
        sid, "damaged", "", False)
    assert "over the 256 MiB cap" in check.reason
    assert path.stat().st_size == JOURNAL_CAP + 1
