"""Create the saved session that ``02_resume.ipynb`` resumes, in a separate process.

Usage: ``python scripts/make_session.py MEMORY_DIR``

This is "yesterday's kernel": it uses the plain Python API (no magics, no notebook) to run
one turn of a session against the scripted model in ``earlier_session.json`` and save it in
``MEMORY_DIR``, then exits. The tools the scripted model asks for really run (here, in this
process's own namespace), so the saved tool results are computed from the real data.
"""

from __future__ import annotations

import sys
from pathlib import Path

import openai

from jupyter_agent import Agent, AgentConfig, ChatModel, ScriptedModelServer
from jupyter_agent.agent.conversation import Conversation
from jupyter_agent.store import FileStore

HERE = Path(__file__).resolve().parent
PROMPT = (
    "Load the Palmer Penguins data and plan two things: bill length by species, then the "
    "sex balance on each island. Do only the first one for now."
)


def main(memory_dir: str) -> None:
    """Run the earlier turn and print what was saved (no IDs, no paths: the output is stable)."""
    store = FileStore(memory_dir)
    with ScriptedModelServer.from_file(HERE / "earlier_session.json") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0)
        session = Conversation.create(store, title="Penguin bills and islands")
        with Agent(ChatModel(client, "gpt-4o-mini"), session,
                   config=AgentConfig(approve="auto")) as agent:
            agent.run(PROMPT)
    record = store.load_session(agent.conversation.session_id)
    state = record.state
    todos = ", ".join(f"#{t.id} {t.status}" for t in state.todos)
    print("A separate Python process saved a session:")
    print(f"  title:    {record.title}")
    print(f"  messages: {len(record.transcript)}")
    print(f"  todos:    {todos}")
    print(f"  usage:    {state.tool_calls} tool calls, {state.usage.calls} model calls")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/make_session.py MEMORY_DIR")
    main(sys.argv[1])
