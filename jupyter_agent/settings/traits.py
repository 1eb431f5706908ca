"""The traitlets traits generated from the table of settings (``%config``)."""

from __future__ import annotations

from typing import Any

from jupyter_agent.settings.table import OPTIONS, option

__all__ = ["trait_namespace"]


# --------------------------------------------------------------------------- traits
def trait_namespace(owner: str) -> dict[str, Any]:
    """The traitlets traits of every setting, and the validator that checks them.

    Put into the class body of the ``Configurable`` that carries the settings
    (``AgentMagics``), so ``%config`` and ``ipython_config.py`` set them; a bad value
    raises ``TraitError("<owner>: <message>")``.

    Parameters
    ----------
    owner : str
        The class name, shown in error messages.

    Returns
    -------
    dict
        ``{name: trait}`` for each option, plus ``_validate_setting``.
    """
    from traitlets import Bool, Float, Int, TraitError, Unicode, validate

    kinds = {str: Unicode, int: Int, float: Float, bool: Bool}
    namespace: dict[str, Any] = {}
    for row in OPTIONS:
        trait = kinds[row.type](row.default, allow_none=row.none is not None, help=row.help)
        namespace[row.name] = trait.tag(config=True)

    def _validate_setting(self: Any, proposal: Any) -> Any:
        try:
            return option(proposal["trait"].name).validate(proposal["value"])
        except ValueError as err:
            raise TraitError(f"{owner}: {err}") from err

    namespace["_validate_setting"] = validate(*(row.name for row in OPTIONS))(_validate_setting)
    return namespace
