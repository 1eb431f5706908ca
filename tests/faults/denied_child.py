"""A save refused with "permission denied": ``python -m tests.faults.denied_child ROOT URL``.

Run without the capability that lets root ignore file modes. One turn, then the session's
journal is made read-only and the same prompt is sent twice: once refused, once after the
mode is restored. Prints one JSON line per outcome: ``{"error": [type, message]}`` or
``{"reply": text}``, then ``{"session": id}``.
"""

from __future__ import annotations

import json
import os
import sys

import openai

from jupyter_agent.agent.adapters import ChatModel
from jupyter_agent.agent.config import AgentConfig
from jupyter_agent.agent.loop import Agent
from jupyter_agent.store import FileStore

PROMPT = "please summarise this:" + " data" * 2_000


def turn(agent: Agent, prompt: str) -> None:
    try:
        print(json.dumps({"reply": agent.run(prompt).reply}), flush=True)
    except Exception as err:  # reported to the parent, which asserts type and message
        print(json.dumps({"error": [type(err).__name__, str(err)]}), flush=True)


def main(root: str, base_url: str) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0, timeout=30)
    store = FileStore(root)
    with Agent(ChatModel(client, "scripted"), store=store,
               config=AgentConfig(approve="auto")) as agent:
        turn(agent, "first question")
        journal = store.journal_path(agent.conversation.session_id or "")
        os.chmod(journal, 0o400)
        turn(agent, PROMPT)
        os.chmod(journal, 0o600)
        turn(agent, PROMPT)
        print(json.dumps({"session": agent.conversation.session_id}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
