"""Every setting, declared once: one table, and what is generated from it.

:data:`OPTIONS` has one :class:`Option` per setting: its name, type, default, help,
validation, the magic flag that overrides it for one session (if any), who uses it, and
whether the session's checkpoint remembers it. Everything else is generated from the
table:

- the traitlets traits of ``AgentMagics`` (:func:`trait_namespace`), so ``%config`` and
  ``ipython_config.py`` work and bad values are rejected with the same message as here;
- the options of ``%agent_new`` / ``%agent_resume`` (``magic_args.session_options``);
- :class:`Settings` (a snapshot of every setting) and :class:`SessionOptions` (the flags
  given for one session, ``None`` where not given);
- what the agent is built with: :meth:`Settings.agent_config` (approval, streaming,
  context window, limits) and :meth:`Settings.request_params` (fields sent with every
  model request); the endpoint rows feed the one client factory
  (:func:`jupyter_agent.client.build_model`).

Adding a setting is one row here plus the code that uses it. Rows whose ``use`` is
``"request"`` need no other code: their value, when not ``None``, is sent as a field of
every model request (the name must be a parameter of both model APIs).

The API key is never a setting: only the *name* of the environment variable holding it
(``api_key_env``) is. Importing this package does nothing but build the table.

Layout: ``table.py`` holds :data:`OPTIONS` and the checks of values, ``values.py``
:class:`Settings` and :class:`SessionOptions`, ``traits.py`` :func:`trait_namespace`;
every public name is importable from ``jupyter_agent.settings``.
"""

from __future__ import annotations

from jupyter_agent.settings.table import (
    APPROVALS,
    DEFAULT_API_KEY_ENV,
    DEFAULT_MODEL,
    MODEL_APIS,
    OPTIONS,
    VISION_MODES,
    Option,
    check_api_key_env,
    check_base_url,
    check_limit,
    check_model,
    option,
)
from jupyter_agent.settings.traits import trait_namespace
from jupyter_agent.settings.values import SessionOptions, Settings

__all__ = [
    "APPROVALS",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_MODEL",
    "MODEL_APIS",
    "OPTIONS",
    "VISION_MODES",
    "Option",
    "SessionOptions",
    "Settings",
    "check_api_key_env",
    "check_base_url",
    "check_limit",
    "check_model",
    "option",
    "trait_namespace",
]
