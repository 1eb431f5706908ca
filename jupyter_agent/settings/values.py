"""Records of setting values generated from the table: :class:`Settings` (a snapshot of
every setting) and :class:`SessionOptions` (the flags given for one session).

Both are immutable and validated on construction by the rows of
:data:`~jupyter_agent.settings.table.OPTIONS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from jupyter_agent.settings.table import OPTIONS, Use, option

if TYPE_CHECKING:
    from jupyter_agent.agent.config import AgentConfig, Limits

__all__ = ["SessionOptions", "Settings"]


# --------------------------------------------------------------------------- records
class _Values(ABC):
    """An immutable record of option values, validated on construction."""

    __slots__ = ("_values",)
    _fields: ClassVar[tuple[str, ...]] = ()
    _values: dict[str, Any]

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no option {', '.join(sorted(unknown))}")
        object.__setattr__(self, "_values", self._complete(values))

    @abstractmethod
    def _complete(self, values: dict[str, Any]) -> dict[str, Any]:
        """The record's whole mapping of values from those given (validated)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no option {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; use replace()")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._values == self._values

    def __hash__(self) -> int:
        return hash(tuple(self._values.items()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self._values))

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return iter(self._values.items())

    def as_dict(self) -> dict[str, Any]:
        """The values by name (a copy)."""
        return dict(self._values)


def _rebuild(cls: type[_Values], values: dict[str, Any]) -> _Values:
    return cls(**values)


class SessionOptions(_Values):
    """Options of ``%agent_new`` / ``%agent_resume`` for one session; ``None`` = not given.

    Fields: ``title`` and every per-session setting of :data:`OPTIONS` (those with a magic
    flag). They override :class:`Settings` for the session they start.

    Raises
    ------
    TypeError
        For a name that is not an option.
    ValueError
        For a bad value; the message names the magic flag (``--max-cost must be ...``).
    """

    __slots__ = ()
    _fields = ("title", *(o.name for o in OPTIONS if o.per_session))

    def _complete(self, values: dict[str, Any]) -> dict[str, Any]:
        out = {name: values.get(name) for name in self._fields}
        for name, value in out.items():
            if name != "title" and value is not None:
                option(name).validate(value, as_flag=True)
        return out

    def over(self, base: SessionOptions) -> SessionOptions:
        """``base`` with every option given here (not ``None``) replacing its value."""
        merged = base.as_dict()
        merged.update({k: v for k, v in self if v is not None})
        return SessionOptions(**merged)

    def given(self) -> frozenset[str]:
        """The names of the options that are given (not ``None``)."""
        return frozenset(k for k, v in self if v is not None)

    def replace(self, **changes: Any) -> SessionOptions:
        """A copy with ``changes`` applied."""
        return SessionOptions(**{**self._values, **changes})


class Settings(_Values):
    """A snapshot of every setting of :data:`OPTIONS` (``AgentMagics``' traits).

    ``Settings(model="llama3.1", base_url="http://localhost:11434/v1")``: options not given
    take their default. Units: ``max_cost_usd`` in USD, ``context_window`` in tokens.

    Raises
    ------
    TypeError
        For a name that is not a setting.
    ValueError
        For a bad value (the same message as ``%config`` gives).
    """

    __slots__ = ()
    _fields = tuple(o.name for o in OPTIONS)

    def _complete(self, values: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for row in OPTIONS:
            value = values.get(row.name, row.default)
            if row.name in values:
                row.validate(value)
            out[row.name] = value
        return out

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied (validated)."""
        return Settings(**{**self._values, **changes})

    def with_options(self, options: SessionOptions) -> Settings:
        """These settings with every given (non-``None``) option applied."""
        return self.replace(**{k: v for k, v in options if k != "title" and v is not None})

    def of(self, use: Use) -> dict[str, Any]:
        """The values of the settings used by ``use``, by name."""
        return {o.name: self._values[o.name] for o in OPTIONS if o.use == use}

    def model_key(self) -> tuple[Any, ...]:
        """What the model client is built from (a change means a new client)."""
        return (*self.of("endpoint").items(), *self.of("request").items())

    def limits(self) -> Limits:
        """The :class:`~jupyter_agent.agent.Limits` these settings ask for."""
        from jupyter_agent.agent.config import Limits

        return Limits(**self.of("limit"))

    def agent_config(self, **extra: Any) -> AgentConfig:
        """The :class:`~jupyter_agent.agent.AgentConfig` these settings ask for.

        Parameters
        ----------
        **extra
            Further :class:`AgentConfig` fields (e.g. ``system_prompt``).
        """
        from jupyter_agent.agent.config import AgentConfig

        return AgentConfig(limits=self.limits(), **self.of("agent"), **extra)

    def request_params(self) -> dict[str, Any]:
        """Fields sent with every model request (the ``"request"`` rows that are not None)."""
        return {k: v for k, v in self.of("request").items() if v is not None}
