"""``jupyter agent``: the saved sessions of a memory directory, from the command line.

``jupyter agent list | show ID | search TEXT | export ID | fork ID | archive ID | rm ID |
gc`` (the console script is ``jupyter-agent``; Jupyter's own ``jupyter`` command runs it
as ``jupyter agent``). See :mod:`jupyter_agent.cli.main` for the parser and the
command table, :mod:`jupyter_agent.cli.commands` for what each command does.

Importing this package reads nothing and starts nothing.
"""

from __future__ import annotations

from jupyter_agent.cli.main import COMMANDS, Command, main

__all__ = ["COMMANDS", "Command", "main"]
