"""Damage at every line of a journal: reported by file and line, never silently dropped,
never truncated or rewritten (design: "Session files: a journal beside a snapshot").

A session with every kind of journal line (header, creation, save points with messages
and checkpoints, a compaction, a title, a summary) is saved once; each case copies it and
damages one line of the copy the way something other than a crashing writer can: the
line cut short (and everything after it gone), a byte changed, the line duplicated,
removed, swapped with the next one, or a digit of its checksum flipped. Each damaged
session must then

* fail to load with :class:`CorruptSessionError` naming the file and a line;
* be left out of a listing from a fresh process-like store, with its reason;
* refuse a write through a new lease, the journal byte for byte as damaged;
* never load with fewer saves than were acknowledged (0 silent losses).

``jupyter agent fsck`` then reports each one and ``--repair`` keeps every byte it moves.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from jupyter_agent.cli.main import main as cli_main
from jupyter_agent.errors import CorruptSessionError
from jupyter_agent.store import FileStore, SessionState, Usage, holding

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]

KINDS = ["cut", "corrupt", "duplicated", "removed", "reordered", "checksum flipped"]
SYSTEM = {"role": "system", "content": "s"}


def _build(root: Path, snapshot_inside: bool) -> tuple[str, int]:
    """The saved session and how many messages it acknowledged; with
    ``snapshot_inside``, the first answer is long enough (70 KB) for the snapshot to be
    rewritten after it, so that it covers the first lines and not the last ones."""
    store = FileStore(root)
    sid = store.create_session([SYSTEM], title="damage")
    messages = [SYSTEM]
    with holding(store, sid):
        for k in range(3):
            long = "x" * 70_000 if snapshot_inside and k == 0 else ""
            messages += [{"role": "user", "content": f"question {k}\nwith a line break"},
                         {"role": "assistant", "content": f"answer {k} " + "é" * 40 + long}]
            store.save(sid, messages, SessionState(tool_calls=k,
                                                   usage=Usage(cost_usd=0.01 * (k + 1))))
        store.compact(sid, [SYSTEM, {"role": "user", "content": "summary"}, *messages[-2:]],
                      summary="summary")
        store.update(sid, title="damaged?")
        store.update(sid, summary="a summary")
        messages = [SYSTEM, {"role": "user", "content": "summary"}, *messages[-2:],
                    {"role": "user", "content": "last"}]
        store.save(sid, messages)
    acknowledged = len(store.load_session(sid).transcript)
    store.release_all()
    return sid, acknowledged


@pytest.fixture(scope="module", params=["snapshot at the start", "snapshot inside"])
def template(tmp_path_factory: pytest.TempPathFactory,
             request: pytest.FixtureRequest) -> tuple[Path, str, int, int]:
    root = tmp_path_factory.mktemp("damage") / "mem"
    sid, acknowledged = _build(root, request.param == "snapshot inside")
    lines = (root / "sessions" / f"{sid}.jsonl").read_bytes().count(b"\n")
    covered = json.loads((root / "sessions" / f"{sid}.json").read_bytes())["journal"]["lines"]
    assert (covered == 2) == (request.param == "snapshot at the start") and covered < lines - 3
    return root, sid, acknowledged, lines


def damage(raw: bytes, kind: str, k: int) -> bytes | None:
    """``raw`` with line ``k`` (1-based) damaged by ``kind``; ``None`` if it does not apply."""
    lines = raw.split(b"\n")[:-1]
    i = k - 1
    line = lines[i]
    if kind == "cut":
        return b"".join(x + b"\n" for x in lines[:i]) + line[: len(line) // 2]
    if kind == "corrupt":
        middle = len(line) // 2
        changed = line[:middle] + bytes([line[middle] ^ 0x01]) + line[middle + 1:]
        out = [*lines[:i], changed, *lines[i + 1:]]
    elif kind == "duplicated":
        out = [*lines[:k], line, *lines[k:]]
    elif kind == "removed":
        out = [*lines[:i], *lines[k:]]
    elif kind == "reordered":
        if k == len(lines):
            return None
        out = [*lines[:i], lines[k], line, *lines[k + 1:]]
    else:  # checksum flipped
        digit = line[-3:-2]
        out = [*lines[:i], line[:-3] + (b"0" if digit != b"0" else b"1") + line[-2:],
               *lines[i + 1:]]
    return b"".join(x + b"\n" for x in out)


def _case(template: tuple[Path, str, int, int], tmp_path: Path, kind: str, k: int,
          tally: dict[str, int]) -> None:
    source, sid, acknowledged, _ = template
    root = tmp_path / f"{kind}-{k}".replace(" ", "-")
    shutil.copytree(source, root)
    journal = root / "sessions" / f"{sid}.jsonl"
    damaged = damage(journal.read_bytes(), kind, k)
    if damaged is None:
        return
    journal.write_bytes(damaged)
    tally["injected"] += 1
    store = FileStore(root)
    try:
        loaded = store.load_session(sid)
    except CorruptSessionError as err:
        assert err.path in (journal, store.session_path(sid)), err
        assert "line " in err.reason, err
        tally["detected"] += 1
    else:  # loading anything less than what was acknowledged would be a silent loss
        assert len(loaded.transcript) >= acknowledged, (kind, k)
        tally["silent losses"] += len(loaded.transcript) < acknowledged
    listed = FileStore(root)
    if not [s.id for s in listed.list_sessions(include_archived=True)]:
        assert "line " in listed.damaged_sessions()[sid]
        tally["left out of listings"] += 1
    writer = FileStore(root)
    with pytest.raises(CorruptSessionError):
        writer.update(sid, summary="overwrite?")
    writer.release_all()
    assert journal.read_bytes() == damaged, (kind, k)  # never truncated nor rewritten
    tally["files untouched"] += 1


@pytest.mark.parametrize("kind", KINDS)
def test_damage_at_every_line_is_reported_and_left_untouched(
        template: tuple[Path, str, int, int], tmp_path: Path, kind: str) -> None:
    tally = dict.fromkeys(["injected", "detected", "silent losses", "left out of listings",
                           "files untouched"], 0)
    for k in range(1, template[3] + 1):
        _case(template, tmp_path, kind, k, tally)
    print(f"{kind}: {tally}")
    assert tally["injected"] >= template[3] - 1
    assert tally["detected"] == tally["injected"] == tally["left out of listings"]
    assert tally["silent losses"] == 0
    assert tally["files untouched"] == tally["injected"]


def test_an_unacknowledged_cut_short_line_is_the_one_silent_repair(
        template: tuple[Path, str, int, int], tmp_path: Path) -> None:
    source, sid, acknowledged, lines = template
    root = tmp_path / "mem"
    shutil.copytree(source, root)
    journal = root / "sessions" / f"{sid}.jsonl"
    whole = journal.read_bytes()
    journal.write_bytes(whole + b'{"n":%d,"add":[{"role":"user","content":"never' % (lines + 1))
    store = FileStore(root)
    assert len(store.load_session(sid).transcript) == acknowledged
    with holding(store, sid):
        assert journal.read_bytes() != whole  # taking the lease changes nothing
        store.update(sid, summary="after the crash")
    assert journal.read_bytes().startswith(whole)
    assert store.load_session(sid).summary == "after the crash"


def test_without_the_index_a_cut_short_last_line_cannot_be_told_from_a_crash(
        template: tuple[Path, str, int, int], tmp_path: Path) -> None:
    """The index is what records acknowledgements: with it deleted, a last line cut short
    is taken for a crashed write (the documented limit of what can be proven)."""
    source, sid, acknowledged, lines = template
    root = tmp_path / "mem"
    shutil.copytree(source, root)
    (root / "index.jsonl").unlink()
    journal = root / "sessions" / f"{sid}.jsonl"
    cut = damage(journal.read_bytes(), "cut", lines)
    assert cut is not None
    journal.write_bytes(cut)
    assert len(FileStore(root).load_session(sid).transcript) == acknowledged - 1


def test_fsck_reports_every_state_and_repairs_keep_the_damaged_bytes(
        template: tuple[Path, str, int, int], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    source, sid, acknowledged, lines = template
    root = tmp_path / "mem"
    shutil.copytree(source, root)
    journal = root / "sessions" / f"{sid}.jsonl"
    original = journal.read_bytes()
    damaged = damage(original, "corrupt", lines - 1)
    assert damaged is not None
    journal.write_bytes(damaged)
    good = FileStore(root).create_session([SYSTEM], title="fine")

    assert cli_main(["--memory-dir", str(root), "fsck"]) == 1  # a dry run by default
    out = capsys.readouterr().out
    assert f"{sid}  damaged: " in out and f"line {lines - 1}" in out
    assert f"{good}  ok" in out and "--repair would keep lines 1-" in out
    assert journal.read_bytes() == damaged

    assert cli_main(["--memory-dir", str(root), "fsck", "--repair", "--json"]) == 0
    report = {c["session_id"]: c for c in json.loads(capsys.readouterr().out)}
    assert report[sid]["repaired"] and report[good]["state"] == "ok"
    kept = root / "sessions" / f"{sid}.jsonl.damaged"
    assert report[sid]["kept"] == str(kept) and kept.read_bytes() == damaged
    assert journal.read_bytes() == b"".join(
        line + b"\n" for line in original.split(b"\n")[: lines - 2])
    record = FileStore(root).load_session(sid)  # loads again: the saves before the damage
    assert len(record.transcript) == acknowledged - 1 and record.title == "damaged?"
    assert cli_main(["--memory-dir", str(root), "fsck"]) == 0


def test_a_kill_at_every_byte_of_a_save_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """The files a writer killed at each byte of a save point leave (the journal line cut
    at every position, the index not yet told): the session loads as before the save,
    or with it once the whole line is on disk; the next write goes on from there."""
    root = tmp_path / "mem"
    store = FileStore(root)
    sid = store.create_session([SYSTEM])
    messages = [SYSTEM, {"role": "user", "content": "kept"}]
    store.save(sid, messages)
    journal, index = store.journal_path(sid), root / "index.jsonl"
    before, index_before = journal.read_bytes(), index.read_bytes()
    store.save(sid, [*messages, {"role": "assistant", "content": "é" * 50 + "\n"}],
               SessionState(tool_calls=1))
    line = journal.read_bytes()[len(before):]
    outcomes = {True: 0, False: 0}
    for cut in range(len(line) + 1):
        case = tmp_path / f"cut-{cut}"
        shutil.copytree(root, case)
        (case / "index.jsonl").write_bytes(index_before)  # killed before the index was told
        path = case / "sessions" / f"{sid}.jsonl"
        path.write_bytes(before + line[:cut])
        killed = FileStore(case)
        saved = len(killed.load_session(sid).transcript) == 3
        assert saved == (cut == len(line)), cut  # whole, or as before the save
        outcomes[saved] += 1
        killed.update(sid, summary="next")
        after = FileStore(case).load_session(sid)
        assert after.summary == "next" and len(after.transcript) == 2 + saved
        shutil.rmtree(case)
    print(f"kills at {len(line) + 1} positions of a save: {outcomes}")
    assert outcomes == {True: 1, False: len(line)}
