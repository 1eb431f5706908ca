"""A store workload to kill at random moments (the fault suite and benchmarks/crash_store.py).

Run as ``python -m tests.faults.workload ROOT SESSION_ID SEED``: the process takes the
session's lease, prints ``ready``, then loops forever over save points (messages with a
checkpoint), large appends (which make the store rewrite its snapshot), compactions and
summaries, printing one line per call *after* the call returned -- an acknowledgement.
A killed writer may lose only what it never acknowledged.

Message ``k`` of the transcript always has content starting ``"m<k> "``, so a transcript
can be checked for holes and duplicates by position alone.
"""

from __future__ import annotations

import random
import sys
from typing import Any

from jupyter_agent.store import FileStore, SessionState

__all__ = ["check", "message", "run"]


def message(k: int, big: bool = False) -> dict[str, Any]:
    """Transcript message ``k`` (``big``: about 96 KB, so snapshots are rewritten often)."""
    role = "user" if k % 2 else "assistant"
    size = 96_000 if big else (k * 677) % 3000
    return {"role": role, "content": f"m{k} " + "é✓x" * (size // 3)}


def run(root: str, session_id: str, seed: int) -> None:
    """The workload loop (never returns)."""
    store = FileStore(root, holder_label="fault workload")
    store.acquire_lease(session_id)
    record = store.load_session(session_id)
    messages = record.messages
    k = len(record.transcript)
    rng = random.Random(seed)
    print("ready", flush=True)
    while True:
        op = rng.choices(["save", "big", "compact", "summary"], [70, 10, 10, 10])[0]
        if op in ("save", "big"):
            messages = [*messages, message(k, big=op == "big")]
            store.save(session_id, messages, SessionState(scratchpad=f"after {k}", tool_calls=k))
            print(f"save {k}", flush=True)
            k += 1
        elif op == "compact" and len(messages) > 4:
            messages = [messages[0], {"role": "user", "content": f"summary before {k}"},
                        *messages[-2:]]
            store.compact(session_id, messages, summary=f"compacted at {k}")
            print(f"compact {k}", flush=True)
        elif op == "summary":
            store.update(session_id, summary=f"summary {k}")
            print(f"summary {k}", flush=True)


def check(store: FileStore, session_id: str, acks: list[str], before: int) -> int:
    """Check a session after its writer was killed; return how many acknowledged messages
    are missing (the records lost: must be 0). ``before``: transcript length before the
    writer started.

    Raises
    ------
    AssertionError
        If the session does not load, has holes or duplicates, or lost an acknowledged
        summary or compaction.
    """
    record = store.load_session(session_id)
    for i, m in enumerate(record.transcript):
        assert m["content"].startswith(f"m{i} "), (i, m["content"][:20])
    saves = [int(a.split()[1]) for a in acks if a.startswith("save ")]
    expected = saves[-1] + 1 if saves else before
    lost = max(expected - len(record.transcript), 0)
    assert len(record.transcript) <= expected + 1  # at most the unacknowledged call
    summaries = [a for a in acks if a.startswith("summary ")]
    if summaries and not acks[-1].startswith("summary"):
        assert record.summary == summaries[-1] or record.summary.startswith("summary ")
    compactions = sum(a.startswith("compact ") for a in acks)
    assert len(record.compactions) >= compactions
    if saves:
        state = record.state
        assert state.scratchpad == f"after {state.tool_calls}"
        assert state.tool_calls in (len(record.transcript) - 1, saves[-1])
    return lost


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2], int(sys.argv[3]))
