"""``python -m jupyter_agent.cli``: the same as ``jupyter agent``."""

from __future__ import annotations

import sys

from jupyter_agent.cli.main import main

sys.exit(main())
