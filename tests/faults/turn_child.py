"""A turn killed mid-batch: ``python -m tests.faults.turn_child ROOT BASE_URL``.

Starts a session in the memory directory ``ROOT`` and runs one turn against the scripted
model server at ``BASE_URL``; its tool ``step(n)`` prints ``ran N`` and, for ``n == 2``,
waits to be killed. Prints ``session ID`` first.
"""

from __future__ import annotations

import sys
import time

import openai

from jupyter_agent.agent.adapters import ChatModel
from jupyter_agent.agent.config import AgentConfig
from jupyter_agent.agent.loop import Agent
from jupyter_agent.store import FileStore


def step(n: int) -> str:
    """Do step ``n``.

    Parameters
    ----------
    n : int
        Which step.
    """
    print(f"ran {n}", flush=True)
    while n == 2:
        time.sleep(1)  # the parent kills the process here
    return f"step {n} done"


def main(root: str, base_url: str) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0, timeout=30)
    agent = Agent(ChatModel(client, "scripted"), store=FileStore(root),
                  config=AgentConfig(approve="auto"), tools=[step])
    print(f"session {agent.conversation.session_id}", flush=True)
    agent.run("do the steps")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
