"""A save that the operating system refuses in the middle of a turn (design notes "Failures
during a turn"): a full
disk and a read-only file system, made real with a small tmpfs (root only), through the
magics, the loop and the scripted model server.

Permission denied is made real in a child process that runs without the capability that
lets root ignore file modes (``setpriv``). An I/O error needs a failing device; it takes the
same path (``StorageError``, its message tested in ``tests/store``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer
from tests.faults.disks import fill, small_tmpfs
from tests.shells import magics_of
from tests.test_magics_errors import usage_error

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root"),
]

REPO = Path(__file__).resolve().parents[2]
PROMPT = "please summarise this:" + " data" * 2_000  # more than a page: it needs space


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A 2 MiB tmpfs holding the memory directory."""
    with small_tmpfs(tmp_path / "disk", "2m") as mount:
        monkeypatch.setenv("JUPYTER_AGENT_MEMORY_DIR", str(mount / "memory"))
        yield mount


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` read-only for a block: a read-only bind mount over itself (the session's
    lock file stays open for writing on the mount below, which a remount would refuse)."""
    subprocess.run(["mount", "--bind", str(path), str(path)], check=True, capture_output=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True,
                       capture_output=True)
        yield
    finally:
        subprocess.run(["umount", str(path)], check=True, capture_output=True)


def first_turn(shell: InteractiveShell, server: ScriptedModelServer, disk: Path) -> str:
    server.add_steps(["first answer", "second answer"])
    shell.run_line_magic("agent_new", "")
    shell.run_cell_magic("agent", "", "first question")
    sid: str = magics_of(shell).controller.active_session_id
    return sid


def assert_rerun_records_the_prompt_once(shell: InteractiveShell, server: ScriptedModelServer,
                                         disk: Path, sid: str) -> None:
    shell.run_cell_magic("agent", "", PROMPT)  # the user runs the cell again
    record = FileStore(disk / "memory").load_session(sid)
    assert [m["role"] for m in record.transcript] == ["system", "user", "assistant", "user",
                                                      "assistant"]
    assert record.transcript[3] == {"role": "user", "content": PROMPT}
    assert record.transcript[4] == {"role": "assistant", "content": "second answer"}
    assert [m["role"] for m in server.requests[-1]["messages"]] == [
        "system", "user", "assistant", "user"]


def test_a_full_disk_mid_session_is_one_line_and_the_rerun_records_the_prompt_once(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, disk: Path
) -> None:
    sid = first_turn(agent_shell, model_server, disk)
    store = FileStore(disk / "memory")
    before = store.load_session(sid)
    filler = fill(disk)
    message = usage_error(agent_shell, "agent", "", PROMPT)
    assert message.startswith(f"could not write {disk / 'memory'}")
    assert message.endswith(": No space left on device; free some disk space, then try again "
                            "(what was saved before is intact)")
    assert len(model_server.requests) == 1  # nothing was sent for the refused prompt
    assert store.load_session(sid) == before
    filler.unlink()  # the cause is gone
    assert_rerun_records_the_prompt_once(agent_shell, model_server, disk, sid)


def test_a_read_only_file_system_mid_session_is_one_line_and_the_rerun_records_it_once(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, disk: Path
) -> None:
    sid = first_turn(agent_shell, model_server, disk)
    store = FileStore(disk / "memory")
    before = store.load_session(sid)
    with read_only(disk / "memory" / "sessions"):
        message = usage_error(agent_shell, "agent", "", PROMPT)
    assert message.startswith(f"could not write {disk / 'memory'}")
    assert message.endswith(": Read-only file system; the file system is read-only: point "
                            "AgentMagics.memory_dir at a writable directory")
    assert len(model_server.requests) == 1
    assert store.load_session(sid) == before
    assert_rerun_records_the_prompt_once(agent_shell, model_server, disk, sid)


NO_DAC = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
          "--bounding-set=-dac_override,-dac_read_search"]


def test_permission_denied_mid_session_names_the_file_and_the_rerun_records_it_once(
    model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to run without the override of file modes")
    model_server.add_steps(["first answer", "second answer"])
    root = tmp_path / "memory"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([*NO_DAC, sys.executable, "-m", "tests.faults.denied_child", str(root),
                           model_server.base_url], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    first, refused, again, session = (json.loads(line) for line in done.stdout.splitlines())
    sid = session["session"]
    journal = root / "sessions" / f"{sid}.jsonl"
    assert first == {"reply": "first answer"}
    assert refused == {"error": ["StorageError", f"could not write {journal}: Permission "
                                 f"denied; check that you may write to {journal.parent}"]}
    assert again == {"reply": "second answer"}
    assert len(model_server.requests) == 2  # the refused prompt was never sent
    record = FileStore(root).load_session(sid)
    assert [m["role"] for m in record.transcript] == ["system", "user", "assistant", "user",
                                                      "assistant"]
    assert record.transcript[3]["content"].startswith("please summarise this: data")


def test_permission_denied_on_a_read_says_read(tmp_path: Path) -> None:
    """A refused read is reported as a read ("could not read"), not as a write."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to run without the override of file modes")
    root = tmp_path / "memory"
    store = FileStore(root)
    sid = store.create_session([{"role": "system", "content": "s"}])
    store.notes.write("project", "notes")
    (root / "project.md").chmod(0o000)
    code = ("import os, sys; from jupyter_agent.store import FileStore; "
            "s = FileStore(sys.argv[1])\n"
            "for call in (lambda: s.notes.read('project'), s.list_sessions):\n"
            "    try: call(); print('no error')\n"
            "    except Exception as err: print(type(err).__name__, err)\n"
            "    os.chmod(sys.argv[1], 0o300)  # then: not even the directory can be read\n")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([*NO_DAC, sys.executable, "-c", code, str(root)], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=60)
    root.chmod(0o700)
    assert done.returncode == 0, done.stderr
    notes, listing = done.stdout.splitlines()
    assert notes.startswith(f"StorageError could not read {root / 'project.md'}: Permission "
                            "denied; check that you may read"), notes
    assert listing.startswith(f"StorageError could not read {root}: Permission denied"), listing
    assert FileStore(root).load_session(sid).id == sid
