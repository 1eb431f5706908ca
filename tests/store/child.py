"""Child-process helpers for the store tests (real processes, real files).

Used two ways:

* imported, by ``multiprocessing`` (forkserver context): :func:`crash_writer`;
* as a script, ``python tests/store/child.py fsize ROOT SESSION_ID LIMIT``: limit this
  process's file size to LIMIT bytes (``RLIMIT_FSIZE``, so the write itself fails with
  ``EFBIG``), try to save a large message and print a JSON line with the outcome.

Another kernel holding or trying a lease is ``tests/store_child.py`` (:mod:`tests.processes`).
"""

from __future__ import annotations

import json
import resource
import signal
import sys
from typing import Any

from jupyter_agent.errors import SessionLockedError
from jupyter_agent.store import FileStore, SessionState, TodoItem


def crash_message(k: int) -> dict[str, Any]:
    """The k-th message of the crash test's known sequence (sizes vary, up to ~6 KB)."""
    role = "user" if k % 2 else "assistant"
    return {"role": role, "content": f"message {k} " + "é✓x" * ((k * 677) % 2000)}


def crash_state(k: int) -> SessionState:
    """The state the crash writer saves right after message ``k``."""
    return SessionState(
        scratchpad=f"after {k}",
        todos=[TodoItem(id=k, text=f"todo {k}", status="in_progress", retries=k % 3)],
        tool_calls=k,
    )


def crash_writer(root: str, session_id: str, ready: Any = None) -> None:
    """Append messages (and a checkpoint after each) forever, until killed.

    ``ready`` (an ``Event``), when given, is set once the lease is held and the session read.
    """
    store = FileStore(root)
    store.acquire_lease(session_id)
    messages = store.load_session(session_id).messages
    if ready is not None:
        ready.set()
    while True:
        k = len(messages)
        messages = [*messages, crash_message(k)]
        store.save(session_id, messages)
        store.save(session_id, state=crash_state(k))


def _try_save(store: FileStore, session_id: str, content: str) -> dict[str, Any]:
    try:
        messages = store.load_session(session_id).messages
        store.save(session_id, [*messages, {"role": "user", "content": content}])
    except SessionLockedError as err:
        return {"error": "SessionLockedError", "pid": err.pid, "message": str(err)}
    except OSError as err:
        return {"error": type(err).__name__, "errno": err.errno, "message": str(err)}
    return {"ok": True}


def main(argv: list[str]) -> int:
    mode, root, session_id = argv[:3]
    store = FileStore(root)
    if mode == "fsize":
        limit = int(argv[3])
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of dying
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        print(json.dumps(_try_save(store, session_id, "y" * (4 * limit))), flush=True)
        return 0
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
