"""SIGKILL during saves, appends, compactions and snapshot rewrites (design notes "Durable
writes", "Session files: a journal beside a snapshot").

The CI size; ``benchmarks/crash_store.py`` runs the same trials 200+ times.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.kills import kill_trials

pytestmark = [pytest.mark.faults, pytest.mark.slow]


def test_no_acknowledged_write_is_lost_and_every_kill_leaves_a_readable_session(
    tmp_path: Path,
) -> None:
    report = kill_trials(tmp_path / "mem", trials=25, seed=7)
    print(report)
    assert report.kills == 25
    assert report.records_lost == 0
    assert report.final_messages > 25, "the writer hardly got to save: the test is vacuous"
    assert report.snapshots > 0, "no kill fell after a snapshot rewrite"
