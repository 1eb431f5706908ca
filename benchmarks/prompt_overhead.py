"""What every request costs before the conversation: system prompt, notes, tool schemas.

Run: ``python benchmarks/prompt_overhead.py`` (instant; no model, no network).

Prints, for a large window and for a small one (under ``SMALL_WINDOW`` tokens, where the
short system prompt, the short tool descriptions and only the core tools go), the tokens
of the system prompt (with notes of a given size), of the default tools' schemas and the
room kept for the reply, estimated the way the agent estimates them (~4 characters per
token, :mod:`jupyter_agent.agent.working_context`), and the share of the window they take.
"""

from __future__ import annotations

import argparse

from jupyter_agent.agent.config import AgentConfig
from jupyter_agent.agent.loop import Agent
from jupyter_agent.agent.working_context import (
    DEFAULT_SYSTEM_PROMPT,
    build_system_prompt,
    estimate_schema_tokens,
    estimate_tokens,
    short_system_prompt,
)
from jupyter_agent.testing import ScriptedModel

NOTE = "The penguins data is in data/penguins.csv; plots use seaborn, no titles. "


def overhead(window: int, notes_chars: int) -> dict[str, int]:
    """Estimated tokens of what a request to ``window`` carries besides the conversation."""
    notes = (NOTE * (notes_chars // len(NOTE) + 1))[:notes_chars]
    agent = Agent(ScriptedModel(), config=AgentConfig(context_window=window))
    system = build_system_prompt(DEFAULT_SYSTEM_PROMPT, project_notes=notes)
    sent = short_system_prompt(system) if agent.window.small else system
    tools = agent.request_tools()[0]
    return {"window": window, "system": estimate_tokens([{"role": "system", "content": sent}]),
            "tools": estimate_schema_tokens(tools), "n_tools": len(tools),
            "reply": agent.window.reserve}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=1_500,
                        help="characters of project notes (default: 1500)")
    args = parser.parse_args()
    print(f"{'window':>8} {'system+notes':>13} {'tools':>11} {'reply room':>11} "
          f"{'total':>7} {'of window':>10}")
    for window in (128_000, 8_192, 4_096, 2_048):
        row = overhead(window, args.notes)
        total = row["system"] + row["tools"] + row["reply"]
        tools = f"{row['tools']:,} ({row['n_tools']})"
        print(f"{window:>8,} {row['system']:>13,} {tools:>11} {row['reply']:>11,} "
              f"{total:>7,} {total / window:>9.0%}")


if __name__ == "__main__":
    main()
