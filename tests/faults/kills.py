"""SIGKILL trials against the store (shared by the fault suite and benchmarks/crash_store.py)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from jupyter_agent.store import FileStore, holding
from tests.faults.workload import check, message

__all__ = ["KillReport", "kill_trials"]

REPO = Path(__file__).resolve().parents[2]


@dataclass
class KillReport:
    """What a series of kill trials found."""

    trials: int = 0
    kills: int = 0
    acknowledged: int = 0
    records_lost: int = 0
    torn_tails: int = 0
    snapshots: int = 0
    temp_files_left: int = 0
    final_messages: int = 0


def kill_trials(root: Path, trials: int, seed: int = 0, max_delay: float = 0.15) -> KillReport:
    """Start the workload ``trials`` times on one session, SIGKILL it after a random delay,
    check the session after every kill; return the figures."""
    store = FileStore(root)
    sid = store.create_session([message(0)], session_id="killed")
    rng = random.Random(seed)
    report = KillReport()
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for trial in range(trials):
        before = len(store.load_session(sid).transcript)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.workload", str(root), sid, str(seed + trial)],
            stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        snapshot_before = store.session_path(sid).stat().st_ino
        time.sleep(rng.uniform(0, max_delay))
        proc.send_signal(signal.SIGKILL)
        acks = proc.stdout.read().splitlines()
        assert proc.wait(60) == -signal.SIGKILL
        report.trials += 1
        report.kills += 1
        report.acknowledged += len(acks)
        sessions = root / "sessions"
        report.temp_files_left += len(list(sessions.glob(".*.tmp")))
        report.torn_tails += not store.journal_path(sid).read_bytes().endswith(b"\n")
        report.snapshots += store.session_path(sid).stat().st_ino != snapshot_before
        report.records_lost += check(store, sid, acks, before)
    report.final_messages = len(store.load_session(sid).transcript)
    with holding(store, sid):  # the next lease clears the killed writers' temporary files...
        assert not list((root / "sessions").glob(".*.tmp"))
        store.update(sid, summary="after the kills")  # ...the next write an unacknowledged line
        assert store.journal_path(sid).read_bytes().endswith(b"\n")
    return report
