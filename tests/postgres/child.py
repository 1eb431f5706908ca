"""A second kernel for the team-store tests: a real process with its own connection.

``python tests/postgres/child.py MODE MEMORY_DIR PROJECT SESSION_ID [ARG]``, with the
database URL in ``$JUPYTER_AGENT_STORE_URL`` (never on the command line):

- ``hold``: take the lease (label ``ARG``), print ``held <pid>``, keep it until stdin closes;
- ``try``: try to save one more message; print a JSON line with the outcome;
- ``create``: create the session, then save ``ARG`` more user/assistant pairs, one save
  point each, under the lease; print a JSON line with the listing this process sees.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from jupyter_agent.errors import SessionLockedError
from jupyter_agent.store.postgres import PostgresStore


def _try_save(store: PostgresStore, session_id: str) -> dict[str, Any]:
    try:
        messages = store.load_session(session_id).messages
        store.save_messages(session_id, [*messages, {"role": "user", "content": "from child"}])
    except SessionLockedError as err:
        holder = None if err.holder is None else err.holder.model_dump(mode="json")
        return {"error": "SessionLockedError", "pid": err.pid, "holder": holder,
                "message": str(err)}
    return {"ok": True}


def main(argv: list[str]) -> int:
    mode, memory, project, session_id, *rest = argv
    label = rest[0] if rest and mode == "hold" else ""
    store = PostgresStore(os.environ["JUPYTER_AGENT_STORE_URL"], memory, project=project,
                          holder_label=label)
    if mode == "hold":
        store.acquire_lease(session_id)
        print(f"held {os.getpid()}", flush=True)
        sys.stdin.read()
        return 0
    if mode == "try":
        print(json.dumps(_try_save(store, session_id)), flush=True)
        return 0
    if mode == "create":
        messages: list[dict[str, Any]] = [{"role": "system", "content": f"from {memory}"}]
        store.create_session(messages, session_id=session_id, title=f"{session_id} title")
        with store.lease(session_id):
            for k in range(int(rest[0])):
                messages = [*messages, {"role": "user", "content": f"q{k}"},
                            {"role": "assistant", "content": f"a{k}"}]
                store.save(session_id, messages, {"tool_calls": k + 1})
        listing = [e.model_dump(mode="json") for e in store.list_sessions()]
        print(json.dumps({"listing": listing}), flush=True)
        store.close()
        return 0
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
