"""One agent turn versus a bare HTTP POST of the same request body.

For a session of N messages (100, 1,000 and 10,000 by default; no compaction), each
repetition runs one ``Agent.run`` turn against a loopback ``ScriptedModelServer`` (a
streamed text reply, no tools run), then POSTs the exact bytes that turn sent -- taken
from the server's record -- to the same server with ``http.client`` and reads the whole
streamed answer. Both include the server's own work; the difference is the harness:
building the request, the ``openai`` client, parsing the stream, events, usage and, for
a saved session, the save points.

Columns (medians, milliseconds):

- ``bare POST``: the same body, stdlib ``http.client`` on a kept-alive connection;
- ``respond``: ``ChatModel.respond`` alone (the body encoded with ``msgspec``, posted by
  the ``openai`` client);
- ``turn (memory)``: ``Agent.run`` on an in-memory session, and its ratio to the bare POST;
- ``turn (saved)``: ``Agent.run`` on a ``FileStore`` session (two fsynced save points a
  turn), and its ratio (the target: <= 2x at 1,000 messages);
- ``turn (kernel)``: ``AgentController.ask`` on a resumed saved session, as ``%%agent``
  runs it (settings, ``@`` references, the turn's result), and its ratio.

Usage::

    python benchmarks/bench_agent.py [--repeat 15] [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import openai

from jupyter_agent.agent.adapters import ChatModel, PartialReply
from jupyter_agent.agent.config import AgentConfig
from jupyter_agent.agent.conversation import Conversation
from jupyter_agent.agent.loop import Agent
from jupyter_agent.controller import AgentController
from jupyter_agent.settings import Settings
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer

REPLY = {"text": "pong, a short reply of a few words"}
CONFIG = AgentConfig(approve="auto", context_window=1_000_000_000)  # never compacts


def history(n: int) -> list[dict[str, Any]]:
    """``n`` messages: a system message, then user/assistant text, every tenth exchange a
    tool call with its result."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a benchmark."}]
    i = 0
    while len(messages) < n:
        messages.append({"role": "user", "content": f"message {i}: " + "lorem ipsum " * 16})
        if i % 10 == 9 and len(messages) + 2 < n:
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{i}", "type": "function",
                 "function": {"name": "run_python", "arguments": '{"code": "df.describe()"}'}}]})
            messages.append({"role": "tool", "tool_call_id": f"call_{i}",
                             "content": "count 344\nmean 4201.75\n" * 4})
        messages.append({"role": "assistant", "content": f"reply {i}: " + "dolor sit " * 20})
        i += 1
    return messages[:n]


class BarePost:
    """POST raw bytes to the server's chat endpoint and read the whole answer."""

    def __init__(self, base_url: str) -> None:
        url = urlparse(base_url)
        self.path = url.path + "/chat/completions"
        self.conn = http.client.HTTPConnection(url.hostname or "", url.port)

    def __call__(self, body: bytes) -> float:
        start = time.perf_counter()
        self.conn.request("POST", self.path, body=body, headers={
            "Content-Type": "application/json", "Authorization": "Bearer bench"})
        response = self.conn.getresponse()
        response.read()
        assert response.status == 200, response.status
        return time.perf_counter() - start


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(size: int, repeat: int, root: Path) -> dict[str, float]:
    steps = [REPLY] * (5 * repeat + 8)
    with ScriptedModelServer(steps) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="bench", max_retries=0)
        bare = BarePost(server.base_url)
        messages = history(size)
        memory = Agent(ChatModel(client, "scripted"), Conversation(messages), config=CONFIG)
        store = FileStore(root / f"store-{size}")
        sid = store.create_session(messages)
        saved = Agent(ChatModel(client, "scripted"), store=store, session_id=sid, config=CONFIG)
        settings = Settings(base_url=server.base_url, model="scripted", approve="auto",
                            context_window=CONFIG.context_window,
                            memory_dir=str(root / f"kernel-{size}"))
        kernel = AgentController(lambda: settings, environ={}, cwd=root)
        kernel.resume(FileStore(root / f"kernel-{size}").create_session(messages))
        model = ChatModel(client, "scripted")
        tools = memory.request_tools()[0]
        for run in (memory.run, saved.run, kernel.ask):
            run("warm up")
        times: dict[str, list[float]] = {k: [] for k in (
            "bare", "respond", "memory", "saved", "kernel")}
        for i in range(repeat):
            for name, run in (("memory", memory.run), ("saved", saved.run),
                              ("kernel", kernel.ask)):
                times[name].append(timed(partial(run, f"ping {i}")))
            times["bare"].append(bare(server.exchanges[-1].raw))
            messages = memory.conversation.messages
            times["respond"].append(timed(partial(model.respond, messages, tools,
                                                  stream=True, partial=PartialReply())))
        saved.conversation.close()
        kernel.close()
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--sizes", default="100,1000,10000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    header = (f"{'messages':>8} | {'bare POST':>9} | {'respond':>7} | "
              f"{'turn (memory)':>13} | {'ratio':>5} | "
              f"{'turn (saved)':>12} | {'ratio':>5} | {'turn (kernel)':>13} | {'ratio':>5}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            m = measure(size, args.repeat, Path(tmp))
            print(f"{size:>8} | {m['bare']:>9.2f} | {m['respond']:>7.2f} | "
                  f"{m['memory']:>13.2f} | {m['memory'] / m['bare']:>4.1f}x | "
                  f"{m['saved']:>12.2f} | {m['saved'] / m['bare']:>4.1f}x | "
                  f"{m['kernel']:>13.2f} | {m['kernel'] / m['bare']:>4.1f}x", flush=True)
    print(f"(medians of {args.repeat} turns in ms; streamed text replies, no tools run; "
          "loopback server; ratio = turn / bare POST of the same body)")


if __name__ == "__main__":
    main()
