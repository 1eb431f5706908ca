"""Another kernel for the tests: a real process opening the same storage.

``python tests/store_child.py MODE SESSION_ID [ARG]``, with the storage described in
``$JUPYTER_AGENT_TEST_STORE`` (JSON: ``backend`` ``"json"`` or ``"postgres"``,
``memory``, ``project``) and a database URL in ``$JUPYTER_AGENT_STORE_URL``
(:func:`tests.processes.store_env` makes both; :mod:`tests.processes` drives the modes):

- ``hold [LABEL]``: take the lease, print ``held <pid>``, keep it until stdin closes;
- ``forkhold``: take the lease, ``os.fork`` a child that sleeps (user code forking in the
  kernel), print ``held <pid> child <child pid>``, then wait to be killed;
- ``try``: try to save one more message; print a JSON line with the outcome;
- ``create N``: create the session, then save N user/assistant pairs, one save point
  each, under the lease; print a JSON line with the listing this process sees.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from jupyter_agent.errors import SessionLockedError
from jupyter_agent.store import FileStore, Store, holding


def described() -> dict[str, str]:
    """The storage this child opens (see the module docstring)."""
    data: dict[str, str] = json.loads(os.environ["JUPYTER_AGENT_TEST_STORE"])
    return data


def open_store(label: str) -> Store:
    """A store object on the described storage."""
    storage = described()
    if storage["backend"] == "json":
        return FileStore(storage["memory"], holder_label=label)
    from jupyter_agent.store.postgres import PostgresStore

    return PostgresStore(os.environ["JUPYTER_AGENT_STORE_URL"], storage["memory"],
                         project=storage["project"], holder_label=label)


def _try_save(store: Store, session_id: str) -> dict[str, Any]:
    try:
        messages = store.load_session(session_id).messages
        store.save(session_id, [*messages, {"role": "user", "content": "from child"}])
    except SessionLockedError as err:
        holder = None if err.holder is None else err.holder.model_dump(mode="json")
        return {"error": "SessionLockedError", "pid": err.pid, "holder": holder,
                "message": str(err)}
    return {"ok": True}


def main(argv: list[str]) -> int:
    mode, session_id, *rest = argv
    store = open_store(rest[0] if rest and mode in ("hold", "forkhold") else "")
    if mode == "hold":
        store.acquire_lease(session_id)
        print(f"held {os.getpid()}", flush=True)
        sys.stdin.read()  # until the parent closes stdin
        store.release_all()
        return 0
    if mode == "forkhold":
        store.acquire_lease(session_id)
        child = os.fork()
        if child == 0:  # user code forking in the kernel: the child lives on
            signal.pause()
            os._exit(0)
        print(f"held {os.getpid()} child {child}", flush=True)
        signal.pause()
        return 0
    if mode == "try":
        print(json.dumps(_try_save(store, session_id)), flush=True)
        return 0
    if mode == "create":
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": f"from {described()['memory']}"}]
        store.create_session(messages, session_id=session_id, title=f"{session_id} title")
        with holding(store, session_id):
            for k in range(int(rest[0])):
                messages = [*messages, {"role": "user", "content": f"q{k}"},
                            {"role": "assistant", "content": f"a{k}"}]
                store.save(session_id, messages, {"tool_calls": k + 1})
        listing = [e.model_dump(mode="json") for e in store.list_sessions()]
        print(json.dumps({"listing": listing}), flush=True)
        return 0
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
