"""Failures during a turn (design §22), driven through the real loop: the scripted model
server on loopback, the ``openai`` client, a ``SessionStore`` on real files.

Each failure is asserted by type and message, and by what the session holds afterwards.
The OS faults of saving (a full disk, a read-only file system) are in
``test_turn_saves.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jupyter_agent.agent import Limits
from jupyter_agent.errors import ModelError
from jupyter_agent.store import SessionStore
from jupyter_agent.testing import ScriptedModelServer
from jupyter_agent.testing.protocol import split_text
from tests.agent.helpers import make_agent, read_record, roles

pytestmark = pytest.mark.faults

CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b")
PRICES = {"scripted": (1_000_000.0, 0.0)}  # one USD per prompt token: costs are visible


@pytest.fixture(name="store")
def store_fixture(tmp_path: Path) -> SessionStore:
    """A session store on ``tmp_path``."""
    return SessionStore(tmp_path / "store")


# -- a connection that drops mid-reply ----------------------------------------------------
def test_a_connection_that_drops_mid_reply_keeps_the_text_marked_and_counts_the_call(
    model_server: ScriptedModelServer, store: SessionStore
) -> None:
    reply = "The answer is forty-two, and here is why: " + "because " * 20
    # the role chunk and three text pieces arrive, then the connection drops
    model_server.add_steps([{"text": reply, "drop_after": 4}, "never sent"])
    agent = make_agent(model_server, store, prices=PRICES,
                       limits=Limits(max_cost_usd=1.0))
    with pytest.raises(ModelError) as info:
        agent.run("what is the answer?")
    err = info.value
    assert err.mid_reply and err.status_code is None
    assert "the connection to the model endpoint at " in str(err)
    assert "dropped mid-reply" in str(err) and "send the prompt again" in str(err)
    assert "reach" not in str(err) and not CLASS_NAME.search(str(err))
    kept = ("".join(split_text(reply)[:3])
            + "\n\n[jupyter-agent] (reply cut off: the connection dropped mid-reply)")
    saved = read_record(store, agent.session_id or "")
    assert roles(saved["messages"]) == ["system", "user", "assistant"]
    assert saved["messages"][-1] == {"role": "assistant", "content": kept}
    assert saved["transcript"][-1] == saved["messages"][-1]
    assert agent.messages == saved["messages"]  # the working context holds it too
    usage = saved["state"]["usage"]
    assert usage["calls"] == 1 and usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["cost_usd"] >= 1.0  # estimated tokens, priced
    # the call counts against the limits: the next turn is refused before any request
    requests = len(model_server.requests)
    agent.run("go on")
    assert agent.stop_reason == "max_cost_usd"
    assert len(model_server.requests) == requests
