"""The benchmark scripts run (at their smallest sizes): they are not timed tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_bench_store_quick_prints_every_table_and_the_targets() -> None:
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_store.py"),
                          "--quick"], capture_output=True, text=True, timeout=600, check=True)
    for title in ("save one message", "load the session", "bytes written per save",
                  "bytes written per agent turn", "cold list in a fresh process",
                  "create one session in a directory", "targets"):
        assert title in out.stdout, out.stdout
    for peer in ("agents-sqlite", "langgraph-sqlite"):  # installed or reported missing
        assert peer in out.stdout.split("\n\n")[0]


@pytest.mark.slow
def test_crash_script_reports_no_loss() -> None:
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "crash_store.py"),
                          "--trials", "3"], capture_output=True, text=True, timeout=600,
                         check=True)
    header, row = out.stdout.splitlines()[:2]
    assert "records lost" in header
    assert row.split()[:2] == ["3", "3"] and row.split()[3] == "0"


def test_prompt_overhead_prints_the_small_window_request() -> None:
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "prompt_overhead.py")],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    from jupyter_agent.agent.tools import BUILTIN_TOOL_NAMES

    every = f"({len(BUILTIN_TOOL_NAMES)})"
    assert rows["128,000"][3] == every and rows["4,096"][3] == "(3)"  # core tools only
    assert int(rows["4,096"][-2].replace(",", "")) < 1_024  # under a quarter of 4k
