"""List the package files three everyday operations pass through, as they run.

Each operation runs in a real ``InteractiveShell`` against the scripted model server
(started as a separate process), in a temporary memory directory, and a profile hook
records every ``jupyter_agent`` file whose code is entered, in first-entered order:

* ``agent``: a ``%%agent`` cell on an active session, up to the first write of the
  session's journal;
* ``max_cost``: ``%config AgentMagics.max_cost_usd = 0.000001`` and the ``%%agent`` cell
  it stops (a turn after a priced one);
* ``resume``: ``%agent_resume ID`` in a fresh shell, until the magic returns.

Usage: ``python tools/walks.py [--files]`` (``--files`` prints each list).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell

PACKAGE = Path(__file__).resolve().parents[1] / "jupyter_agent"


class Walk:
    """Package files entered while active, in first-entered order."""

    def __init__(self, stop_at_journal: bool = False) -> None:
        self.files: list[str] = []
        self._on = False
        self._stop_at_journal = stop_at_journal
        sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple) -> None:
        if self._on and self._stop_at_journal and event == "open":
            path, mode = str(args[0]), args[1]
            writing = (isinstance(mode, str) and any(c in mode for c in "wa+")) or (
                isinstance(args[2], int) and args[2] & (os.O_WRONLY | os.O_RDWR))
            if path.endswith(".jsonl") and writing:
                self._on = False

    def _profile(self, frame, event, arg):
        if self._on and event == "call":
            name = frame.f_code.co_filename
            if name.startswith(str(PACKAGE)):
                rel = str(Path(name).relative_to(PACKAGE.parent))
                if rel not in self.files:
                    self.files.append(rel)

    def __enter__(self) -> Walk:
        self._on = True
        sys.setprofile(self._profile)
        threading.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        self._on = False
        sys.setprofile(None)
        threading.setprofile(None)


def _run(shell: InteractiveShell, code: str, *, may_fail: bool = False) -> None:
    result = shell.run_cell(code, store_history=False, silent=may_fail)
    if result.error_in_exec is not None and not may_fail:
        raise result.error_in_exec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", action="store_true", help="print each list")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="walks-"))
    script = work / "script.json"
    steps = [{"text": f"Reply {i}.", "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}
             for i in range(8)]
    script.write_text(json.dumps(steps))
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter_agent.testing", "--script", str(script)],
        stdout=subprocess.PIPE, text=True)
    try:
        base_url = (server.stdout.readline() if server.stdout else "").strip()
        os.environ["OPENAI_API_KEY"] = "sk-walks"
        os.environ["JUPYTER_AGENT_MEMORY_DIR"] = str(work / "memory")
        shell = InteractiveShell.instance()
        _run(shell, "%load_ext jupyter_agent")
        _run(shell, f"%config AgentMagics.base_url = {base_url!r}")
        _run(shell, "%config AgentMagics.model = 'gpt-4o-mini'")
        _run(shell, "%agent_new --approve auto")
        _run(shell, "%%agent\nFirst question.")
        walks: dict[str, list[str]] = {}
        with Walk(stop_at_journal=True) as walk:
            _run(shell, "%%agent\nSecond question.")
        walks["agent"] = walk.files
        with Walk() as walk:
            _run(shell, "%config AgentMagics.max_cost_usd = 0.000001")
            _run(shell, "%%agent\nThird question, past the limit.", may_fail=True)
        walks["max_cost"] = walk.files
        session_id = sorted(p.stem for p in (work / "memory" / "sessions").glob("*.jsonl"))[0]
        _run(shell, "%unload_ext jupyter_agent")
        _run(shell, "%load_ext jupyter_agent")
        _run(shell, f"%config AgentMagics.base_url = {base_url!r}")
        with Walk() as walk:
            _run(shell, f"%agent_resume {session_id}")
        walks["resume"] = walk.files
    finally:
        server.terminate()
        server.wait()
    for name, files in walks.items():
        print(f"{name:10} {len(files):3} files")
        if args.files:
            for file in files:
                print(f"    {file}")


if __name__ == "__main__":
    main()
