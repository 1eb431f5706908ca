"""The scripted server's documentation names every flag its command line takes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "scripted-model.md"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n### ", start + len(heading))
    return text[start:end]


def test_every_flag_of_the_help_is_in_the_readme() -> None:
    help_text = subprocess.run([sys.executable, "-m", "jupyter_agent.testing", "--help"],
                               capture_output=True, text=True, check=True, timeout=60).stdout
    flags = {word.strip("[],") for word in help_text.split() if word.startswith(("--", "[--"))}
    assert {"--script", "--no-images", "--log"} <= flags
    section = _section(DOC.read_text(encoding="utf-8"), "### From a shell")
    assert [flag for flag in sorted(flags) if f"`{flag}" not in section] == []
