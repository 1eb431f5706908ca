"""Small real disks for the fault tests: a tmpfs of a given size (root only), filled to
the brim on request."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` (e.g. ``"1m"``) at ``where`` (made, mode 0700) for a block;
    skip the test, saying why, when it cannot be mounted."""
    where.mkdir(mode=0o700)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                           str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Fill the disk completely; return the filler file."""
    filler = disk / "filler"
    with contextlib.suppress(OSError), filler.open("wb", buffering=0) as out:
        while True:
            out.write(b"\0" * 4096)
    return filler
