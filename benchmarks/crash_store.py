"""SIGKILL the store at random moments, many times, and count what was lost.

Run: ``python benchmarks/crash_store.py [--trials 200]`` (about a minute per 100 trials).
A writer process (``tests/faults/workload.py``) saves messages with checkpoints, appends
large messages (so the snapshot is rewritten often), compacts and writes summaries,
acknowledging each call after it returned; it is killed with SIGKILL after a random delay.
After every kill the session must load, hold every acknowledged message exactly once, in
order, and nothing else but possibly the one unacknowledged call. The fault suite runs the
same trials at a smaller count (``tests/faults/test_kills.py``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.faults.kills import kill_trials  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="crash_store_") as tmp:
        start = time.perf_counter()
        report = kill_trials(Path(tmp) / "mem", args.trials, seed=args.seed)
        seconds = time.perf_counter() - start
    print(f"{'trials':>8} {'kills':>6} {'acknowledged calls':>19} {'records lost':>13} "
          f"{'torn tails':>11} {'snapshot rewrites':>18} {'temp files left':>16} "
          f"{'messages at end':>16}")
    print(f"{report.trials:>8} {report.kills:>6} {report.acknowledged:>19,} "
          f"{report.records_lost:>13} {report.torn_tails:>11} {report.snapshots:>18} "
          f"{report.temp_files_left:>16} {report.final_messages:>16,}")
    print(f"({seconds:.0f} s; torn tails and temp files are what the kills left; the next "
          f"lease removed the temp files, the next write a torn tail)")
    if report.records_lost:
        raise SystemExit("acknowledged records were lost")


if __name__ == "__main__":
    main()
