"""A worker for the multi-process fault test: ``python -m tests.faults.workers ROOT SID K N``.

Worker ``K`` does ``N`` rounds; in each it appends a note, saves a message to its own
session, lists the sessions, and then, under the shared session's lease (retrying while
another worker holds it), appends its message to the shared session. Each completed step is
acknowledged on stdout.
"""

from __future__ import annotations

import sys
import time

from jupyter_agent.errors import SessionLockedError
from jupyter_agent.store import FileStore, holding


def main(root: str, shared: str, worker: int, rounds: int) -> None:
    store = FileStore(root, holder_label=f"worker {worker}")
    own = store.create_session([{"role": "system", "content": f"worker {worker}"}])
    messages = store.load_session(own).messages
    for i in range(rounds):
        tag = f"w{worker}-{i}"
        store.notes.append("project", tag)
        messages = [*messages, {"role": "user", "content": tag}]
        store.save(own, messages)
        store.list_sessions()
        while True:
            try:
                with holding(store, shared):
                    context = store.load_session(shared).messages
                    store.save(shared, [*context, {"role": "user", "content": tag}])
                break
            except SessionLockedError:
                time.sleep(0.001)
        print(tag, flush=True)
    print(f"own {own}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
