"""``jupyter agent`` as a user runs it: every subcommand in a real subprocess, on real
session files, with real lease holders in other processes (design notes, "Forks, exports and
search")."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path

import nbformat
import pytest

from jupyter_agent.store import FileStore, ForkOrigin, SessionState, TodoItem
from tests.cli.helpers import CLI, command
from tests.processes import Hold

SYSTEM = {"role": "system", "content": "You help with data."}


def make(store: FileStore, prompt: str, reply: str, *, title: str = "",
         summary: str = "") -> str:
    sid = store.create_session([SYSTEM], title=title)
    store.save(sid, [SYSTEM, {"role": "user", "content": prompt},
                              {"role": "assistant", "content": reply}])
    if summary:
        store.update(sid, summary=summary)
    return sid


def add_turn(store: FileStore, sid: str, prompt: str, reply: str) -> None:
    record = store.load_session(sid)
    store.save(sid, [*record.messages, {"role": "user", "content": prompt},
                              {"role": "assistant", "content": reply}])


@pytest.mark.slow
def test_list_show_and_json(cli: CLI, store: FileStore, memory_dir: Path) -> None:
    missing = cli("list")
    assert missing.returncode == 0
    assert missing.stdout.startswith(f"no sessions in {memory_dir}: the directory does not "
                                     "exist yet")
    memory_dir.mkdir(mode=0o700)
    empty = cli("list")
    assert (empty.returncode, empty.stdout) == (0, f"no sessions in {memory_dir}\n")
    a = make(store, "Plot bill length", "Done.", title="Bills", summary="Goal: bills")
    b = make(store, "Rain in Bergen", "Often.")
    store.save(a, state=SessionState(todos=[TodoItem(id=1, text="plot", status="done")]))
    store.update(b, archived=True)
    out = cli("list")
    assert out.returncode == 0 and a in out.stdout and b not in out.stdout
    assert "Bills" in out.stdout.splitlines()[1]
    listing = json.loads(cli("list", "--all", "--json").stdout)
    assert {e["id"] for e in listing} == {a, b}
    assert json.loads(cli("--json", "list").stdout)[0]["id"] == a  # before or after
    shown = cli("show", a).stdout.splitlines()
    assert shown[0] == "Bills"
    assert f"id          {a}" in shown and "status      idle" in shown
    assert "summary     Goal: bills" in shown and "todos       [x] 1. plot — done" in shown
    assert "last prompt Plot bill length" in shown and "last reply  Done." in shown
    record = json.loads(cli("show", a, "--json").stdout)
    assert record == store.load_session(a).model_dump(mode="json")
    transcript = cli("show", a, "--transcript").stdout
    assert "[user]\nPlot bill length" in transcript


@pytest.mark.slow
def test_errors_are_one_line_with_exit_code_1_and_usage_is_2(cli: CLI, store: FileStore,
                                                            memory_dir: Path) -> None:
    missing = cli("show", "nosuch")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr == (f"jupyter agent: no saved session 'nosuch' (looked for "
                              f"{memory_dir / 'sessions' / 'nosuch.json'}); jupyter agent "
                              "list --all lists the saved sessions\n")
    bad = cli("archive", "../etc")
    assert bad.returncode == 1 and "invalid session ID '../etc'" in bad.stderr
    for args in ([], ["frobnicate"], ["fork"], ["fork", "abc", "--at", "two"],
                 ["export", "abc", "--format", "pdf"], ["migrate"],
                 ["migrate", "--to", "postgresql://a/b", "--from", "postgresql://a/b"]):
        usage = cli(*args)
        assert usage.returncode == 2, args
        assert usage.stderr.startswith("usage: jupyter agent"), args
    assert cli("--version").stdout.startswith("jupyter-agent ")
    assert not (memory_dir / "sessions").exists()  # nothing was created by any of it


def test_search_default_and_deep(cli: CLI, store: FileStore) -> None:
    a = make(store, "How long are the flippers?", "About 200 mm.", title="Flippers")
    b = make(store, "Count the birds", "There are 344; their flipper length varies.")
    out = cli("search", "FLIPPER")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0] == '1 session matches "FLIPPER":' and a in lines[2]
    assert lines[2].endswith("title: Flippers (+1 more)")
    deep = json.loads(cli("search", "flipper", "length", "--deep", "--json").stdout)
    assert [h["session"]["id"] for h in deep] == [b]
    assert deep[0]["matches"][0]["field"] == "message 3 (assistant)"
    assert "their flipper length varies" in deep[0]["matches"][0]["excerpt"]
    assert cli("search", "penguins").stdout == 'no sessions match "penguins"\n'


@pytest.mark.slow
def test_export_files_and_stdout(cli: CLI, store: FileStore, tmp_path: Path) -> None:
    sid = make(store, "Say hi", "Hi! Your key sk-" + "x1Y2z3" * 5 + " is safe.", title="Hi")
    out = cli("export", sid)
    path = Path.cwd() / f"session-{sid}.ipynb"
    assert out.returncode == 0 and out.stdout.startswith(f"Exported session {sid} as a "
                                                         f"notebook to {path} (")
    assert "1 secret (keys, tokens, passwords) became [redacted]" in out.stdout
    nbformat.validate(nbformat.read(path, as_version=4))
    again = cli("export", sid)
    assert again.returncode == 1
    assert again.stderr == f"jupyter agent: cannot export to {path}: the file exists " \
                           "(use --force to replace it)\n"
    assert cli("export", sid, "--force").returncode == 0
    piped = cli("export", sid, "--format", "json", "-o", "-")
    assert json.loads(piped.stdout)["id"] == sid and "[redacted]" in piped.stdout
    md = cli("export", sid, "-o", str(tmp_path / "hi.md"), "--json")
    assert json.loads(md.stdout)["format"] == "md"
    assert (tmp_path / "hi.md").read_text("utf-8").startswith("# Hi\n")


@pytest.mark.slow
def test_fork_archive_rm(cli: CLI, store: FileStore) -> None:
    sid = make(store, "first", "one", title="Work")
    add_turn(store, sid, "second", "two")
    out = cli("fork", sid, "--at", "1", "--json")
    assert out.returncode == 0
    made = json.loads(out.stdout)
    fork = store.load_session(made["id"])
    assert fork.parent == ForkOrigin(session_id=sid, turn=1) and made["turns"] == 1
    assert [m["content"] for m in fork.transcript] == [SYSTEM["content"], "first", "one"]
    text = cli("fork", sid, "--title", "again").stdout
    assert text.startswith(f"Forked session {sid} (2 turns) into session ")
    assert "Resume the fork with %agent_resume " in text
    refused = cli("fork", sid, "--at", "3")
    assert (refused.returncode, refused.stderr) == (
        1, f"jupyter agent: cannot fork session '{sid}' at turn 3: use 1 to 2\n")
    assert cli("archive", sid).stdout == f"Archived session {sid}.\n"
    assert store.load_session(sid).archived
    assert cli("archive", sid, "--undo").returncode == 0 and not store.load_session(sid).archived
    no_tty = cli("rm", sid)
    assert no_tty.returncode == 1 and "add --yes" in no_tty.stderr and store.exists(sid)
    assert cli("rm", sid, "--yes").stdout == f"Deleted session {sid}.\n"
    assert not store.exists(sid)


def test_rm_yes_deletes_a_session_too_damaged_to_load(cli: CLI, store: FileStore) -> None:
    sid = make(store, "first", "one")
    (store.sessions_dir / f"{sid}.json").write_bytes(b"{ not json")
    assert cli("show", sid).returncode == 1  # damaged: it cannot be read
    assert cli("rm", sid, "--yes").stdout == f"Deleted session {sid}.\n"
    assert not store.exists(sid)


@pytest.mark.slow
def test_reads_work_while_held_and_writes_are_refused(cli: CLI, store: FileStore,
                                                      hold: Hold) -> None:
    sid = make(store, "long analysis", "working on it", title="Busy")
    pid = hold(sid).pid
    assert cli("show", sid).returncode == 0
    assert f"status      in use by process {pid}" in cli("show", sid).stdout
    assert cli("search", "analysis", "--deep").returncode == 0
    assert cli("export", sid, "--format", "md", "-o", "-").stdout.startswith("# Busy")
    assert cli("fork", sid).returncode == 0
    lock = store.lock_path(sid)
    for args in (["archive", sid], ["rm", sid, "--yes"]):
        refused = cli(*args)
        assert refused.returncode == 1
        assert refused.stderr.startswith(f"jupyter agent: session '{sid}' is in use by ")
        assert f"(pid {pid}, " in refused.stderr and f"(lock file {lock})" in refused.stderr
        assert refused.stderr.endswith("; close it there or end that process, then try again\n")
    holder = store.describe_session(sid).holder
    assert holder is not None and holder.pid == pid
    assert not store.load_session(sid).archived


def test_memory_dir_found_like_the_magics(cli: CLI, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "notebooks" / "deep").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    sid = make(FileStore(project / ".jupyter_agent"), "in the project", "yes")
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_AGENT_MEMORY_DIR"}
    found = cli("list", "--json", env=env, cwd=project / "notebooks" / "deep")
    assert [e["id"] for e in json.loads(found.stdout)] == [sid]
    elsewhere = cli("list", "--memory-dir", str(tmp_path / "other"), env=env,
                    cwd=project / "notebooks")
    assert elsewhere.returncode == 0
    assert f"no sessions in {tmp_path / 'other'}: the directory does not exist" in elsewhere.stdout


def test_a_refused_memory_directory_gets_command_line_advice(cli: CLI, memory_dir: Path) -> None:
    memory_dir.mkdir()
    memory_dir.chmod(0o777)
    out = cli("list")
    assert out.returncode == 1 and len(out.stderr.splitlines()) == 1
    assert f"refusing to use {memory_dir} (owner " in out.stderr
    assert (f"run `chmod 700 {memory_dir}`, or use --memory-dir DIR (or "
            "$JUPYTER_AGENT_MEMORY_DIR) to choose another one") in out.stderr
    assert "AgentMagics" not in out.stderr


def test_show_counts_in_singular_and_plural(cli: CLI, store: FileStore) -> None:
    sid = make(store, "one call", "done")
    store.save(sid, state=SessionState(tool_calls=1))
    shown = cli("show", sid).stdout
    assert "· 1 tool call\n" in shown and "0 compactions" in shown
    store.save(sid, state=SessionState(tool_calls=2))
    assert "· 2 tool calls\n" in cli("show", sid).stdout


def test_gc_removes_temporary_files_of_idle_sessions_only(cli: CLI, store: FileStore,
                                                          hold: Hold) -> None:
    idle = make(store, "a", "b")
    busy = make(store, "c", "d")
    hold(busy)
    stale = [store.sessions_dir / f".{sid}.json.k1ll3d.tmp" for sid in (idle, busy)]
    for path in stale:  # e.g. the holder is writing the second one right now
        path.write_bytes(b"{half a reco")
    out = json.loads(cli("gc", "--json").stdout)
    assert out == {"removed": [str(stale[0])]}
    assert not stale[0].exists() and stale[1].exists()
    assert cli("gc").stdout == f"Nothing to remove in {store.root}.\n"


def test_progress_bar_on_a_terminal_only(cli: CLI, store: FileStore) -> None:
    for n in range(30):
        make(store, f"question {n}", f"answer {n} about penguins")
    quiet = cli("search", "penguins", "--deep")
    assert quiet.returncode == 0 and quiet.stderr == ""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        proc = subprocess.run([*command(), "search", "penguins", "--deep"], stderr=follower,
                              stdout=subprocess.PIPE, text=True, timeout=120)
        os.close(follower)  # what the bar wrote stays readable on the terminal's side
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    assert proc.returncode == 0 and proc.stdout.startswith('30 sessions match "penguins"')
    assert b"searching:" in shown and b"/30 [" in shown  # the bar, cleared when done


@pytest.mark.skipif(not Path(sys.executable).with_name("jupyter").exists()
                    and shutil.which("jupyter") is None, reason="no jupyter command installed")
def test_jupyter_agent_as_a_jupyter_subcommand(store: FileStore) -> None:
    sid = make(store, "hello", "hi")
    out = subprocess.run(["jupyter", "agent", "list", "--json"], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PATH": os.pathsep.join(
                             [str(Path(sys.executable).parent), os.environ.get("PATH", "")])})
    assert out.returncode == 0 and [e["id"] for e in json.loads(out.stdout)] == [sid]


def test_advice_never_says_to_change_a_shared_or_home_directory(
        cli: CLI, tmp_path: Path) -> None:
    home = tmp_path / "home" / "me"
    home.mkdir(parents=True)
    for directory in (home, home.parent):  # writable by others: refused
        directory.chmod(0o777)
    env = {**os.environ, "HOME": str(home)}
    for shared in ("/tmp", "/var/tmp", str(home), str(home.parent), "/"):
        out = cli("list", "--memory-dir", shared, env=env)
        if shared == "/" and out.returncode == 0:
            continue  # root owns "/" and it is private: nothing to refuse
        assert out.returncode == 1 and len(out.stderr.splitlines()) == 1, (shared, out.stderr)
        assert out.stderr.startswith(f"jupyter agent: refusing to use {shared}")
        assert "chmod" not in out.stderr and "remove or rename" not in out.stderr
        assert "use --memory-dir DIR (or $JUPYTER_AGENT_MEMORY_DIR)" in out.stderr
    hosts = Path("/etc/hostname")
    if hosts.exists():  # a system file as the memory directory: never "remove it"
        out = cli("list", "--memory-dir", str(hosts))
        assert out.returncode == 1 and "remove or rename" not in out.stderr


def test_a_session_dated_in_the_future_is_left_out_and_show_says_why(
        cli: CLI, store: FileStore) -> None:
    from datetime import UTC, datetime

    mine = make(store, "mine", "ok")
    store.create_session(record=store.load_session(mine).model_copy(
        update={"id": "crafted", "updated_at": datetime(9999, 12, 31, tzinfo=UTC)}))
    assert [e["id"] for e in json.loads(cli("list", "--all", "--json").stdout)] == [mine]
    assert "just now" in cli("list").stdout.splitlines()[1]
    shown = cli("show", "crafted")
    assert shown.returncode == 1 and shown.stdout == ""
    assert len(shown.stderr.splitlines()) == 1
    assert "updated_at 9999-12-31T00:00:00+00:00 is in the future" in shown.stderr
    assert "Traceback" not in shown.stderr and "KeyError" not in shown.stderr


def test_the_deepest_values_that_load_can_be_shown_exported_and_forked(
        cli: CLI, store: FileStore, tmp_path: Path) -> None:
    """A message with a value nested as deep as the store keeps (``MAX_DEPTH``) goes
    through every command; one level deeper is refused at load (tests/store/test_caps.py)."""
    from jupyter_agent.store.messages import MAX_DEPTH

    deep: object = "bottom"
    for _ in range(MAX_DEPTH):
        deep = [deep]
    sid = make(store, "Nest it", "Nested.")
    record = store.load_session(sid)
    store.save(sid, [*record.messages, {"role": "user", "content": "x", "data": deep}])
    assert cli("show", sid, "--transcript").returncode == 0
    shown = cli("--json", "show", sid)
    assert shown.returncode == 0 and json.loads(shown.stdout)["transcript"][-1]["data"] == deep
    for fmt in ("ipynb", "md", "json"):
        done = cli("export", sid, "-o", str(tmp_path / f"deep.{fmt}"))
        assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "deep.json").read_bytes())["transcript"][-1]["data"] == deep
    forked = cli("fork", sid)
    assert forked.returncode == 0, forked.stderr
    fork_id = next(s.id for s in store.list_sessions() if s.id != sid)
    assert store.load_session(fork_id).transcript[-1]["data"] == deep


def test_export_refuses_a_format_its_file_name_contradicts(cli: CLI, store: FileStore,
                                                           tmp_path: Path) -> None:
    sid = make(store, "q", "a")
    out = cli("export", sid, "--format", "ipynb", "-o", str(tmp_path / "out.md"))
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert out.stderr == (f"jupyter agent: cannot export to {tmp_path / 'out.md'}: the format "
                          "is ipynb but the file name ends in .md: name it out.ipynb or use "
                          "--format md\n")
    assert not (tmp_path / "out.md").exists()
    assert cli("export", sid, "--format", "md", "-o", str(tmp_path / "out.txt")).returncode == 0
