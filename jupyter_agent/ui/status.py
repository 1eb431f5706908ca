"""The status line of a long wait while a turn runs.

The ``openai`` client waits out rate limits and retries by itself, and a model may take
long before its first token: the cell would show nothing. :class:`WaitingStatus` ticks on
a timer thread and, when no event has arrived for ``wait_after`` seconds, asks its owner
to show ``waiting for the model — 12 s …`` (or ``run_python running — 12 s …`` while a
tool runs); the next event clears it.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable

__all__ = ["WAIT_AFTER", "WaitingStatus"]

#: Seconds without an event before the status line appears.
WAIT_AFTER = 3.0


class WaitingStatus:
    """The status line of a long wait, ticking on a timer thread (see the module docstring).

    Parameters
    ----------
    show : callable
        Called without arguments, from the timer thread and under ``lock``, when
        :attr:`text` changed; the owner shows it (or nothing when it is ``None``).
    lock : threading.RLock
        The owner's lock: events and ticks never interleave.
    wait_after : float
        Seconds without an event before the status line appears.

    Attributes
    ----------
    text : str or None
        The status line to show now, or ``None``.
    running : str or None
        The tool that runs now (set by the owner), if any.
    paused : bool
        No status line until the next event (set by the owner while the turn waits for
        the user, e.g. at an approval question: nothing runs, and the line would cover
        the question).
    """

    def __init__(self, show: Callable[[], object], lock: threading.RLock,
                 wait_after: float) -> None:
        self._show, self._lock, self._wait_after = show, lock, wait_after
        self.last_event = time.monotonic()
        self.running: str | None = None  # the tool that runs now, if any
        self.paused = False
        self.text: str | None = None
        self._done = threading.Event()
        context = contextvars.copy_context()  # the kernel's output routing of this cell
        self._thread = threading.Thread(target=context.run, args=(self._loop,), daemon=True,
                                        name="jupyter-agent-status")
        self._thread.start()

    def _loop(self) -> None:
        while not self._done.wait(0.5):
            with self._lock:
                waited = time.monotonic() - self.last_event
                if self._done.is_set() or self.paused or waited < self._wait_after:
                    continue
                what = f"{self.running} running" if self.running else "waiting for the model"
                self.text = f"{what} — {int(waited)} s …"
                self._show()

    def event(self) -> bool:
        """Note an event (which ends a pause); True if a status line was shown (and is now
        gone)."""
        self.last_event = time.monotonic()
        self.paused = False
        shown, self.text = self.text is not None, None
        return shown

    def stop(self) -> None:
        """Stop ticking and clear the status line (the turn ended)."""
        self._done.set()
        self.text = None
