"""The settings table: traits, magic options, SessionOptions and the agent config all
come from ``settings.OPTIONS``."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import get_type_hints

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from traitlets import TraitError

from jupyter_agent.agent.config import AgentConfig, Limits
from jupyter_agent.magics import AgentMagics
from jupyter_agent.settings import LIMITS, OPTIONS, SessionOptions, Settings, option
from jupyter_agent.testing import ScriptedModelServer
from tests.shells import magics_of, run_cell


def test_every_row_is_a_config_trait_with_its_default_and_help() -> None:
    traits = AgentMagics.class_traits(config=True)
    assert set(traits) == {o.name for o in OPTIONS}
    for row in OPTIONS:
        trait = traits[row.name]
        assert trait.default_value == row.default, row.name
        assert trait.help == row.help
        assert trait.allow_none == (row.none is not None)


def test_every_row_is_validated_by_its_check(shell: InteractiveShell) -> None:
    magics = magics_of(shell)
    for row in OPTIONS:
        if row.choices:
            with pytest.raises(TraitError, match=f"AgentMagics: {row.name} must be one of"):
                setattr(magics, row.name, "no-such-choice")
        if row.none is None and row.type is not bool:
            with pytest.raises(TraitError):
                setattr(magics, row.name, None)


def test_per_session_rows_are_magic_options(shell: InteractiveShell,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    run_cell(shell, "%agent_new?")
    usage = " ".join(capsys.readouterr().out.split())
    flags = [o.flag for o in OPTIONS if o.flag is not None]
    assert flags and all(f"{flag} " in usage for flag in flags)
    positions = [usage.index(f"{flag} ") for flag in flags]
    assert positions == sorted(positions)  # in the table's order
    assert {f.name for f in fields(SessionOptions)} == {"title", *(o.name for o in OPTIONS
                                                            if o.flag is not None)}
    for row in OPTIONS:
        if row.flag_help:
            assert row.flag_help in usage


def test_settings_are_typed_fields_and_the_limits_come_from_them() -> None:
    hints = get_type_hints(Settings)
    assert hints["max_cost_usd"] == float | None and hints["model"] is str
    assert LIMITS == ("max_cost_usd", "max_tool_calls", "max_iterations")
    assert [o.name for o in OPTIONS] == [f.name for f in fields(Settings)]


def test_snapshots_are_validated_immutable_records() -> None:
    settings = Settings(model="m", max_cost_usd=1.5)
    assert settings.model == "m" and settings.max_tool_calls is None
    assert settings == Settings(model="m", max_cost_usd=1.5)
    assert hash(settings) == hash(Settings(model="m", max_cost_usd=1.5))
    with pytest.raises(AttributeError):
        settings.model = "x"
    with pytest.raises(TypeError, match="temperture"):
        Settings(temperture=0.2)
    with pytest.raises(ValueError, match="^max_cost_usd must be zero or more, or None for "
                                         r"no limit \(got -1\)$"):
        Settings(max_cost_usd=-1)
    with pytest.raises(ValueError, match=r"^--max-cost must be zero or more \(got -1\)$"):
        SessionOptions(max_cost_usd=-1)
    assert replace(settings, model="n").model == "n"


def test_the_agent_config_comes_from_the_agent_and_limit_rows() -> None:
    settings = Settings(approve="deny", stream=False, context_window=4096, max_iterations=3,
                        max_cost_usd=0.5)
    config = settings.agent_config(system_prompt="Be brief.")
    assert config == AgentConfig(approve="deny", stream=False, context_window=4096,
                                 limits=Limits(max_cost_usd=0.5, max_iterations=3),
                                 system_prompt="Be brief.")
    agent_rows = {o.name for o in OPTIONS if o.use == "agent"}
    assert agent_rows <= set(AgentConfig.__dataclass_fields__)
    limit_rows = {o.name for o in OPTIONS if o.use == "limit"}
    assert limit_rows == set(Limits.__dataclass_fields__)


def test_request_rows_are_sent_only_when_set() -> None:
    rows = [o for o in OPTIONS if o.use == "request"]
    assert Settings().request_params() == {o.name: o.default for o in rows
                                           if o.default is not None}
    assert option("model").saved and option("api").saved
    assert not option("base_url").saved  # recorded, never used by a resume


def test_temperature_is_sent_with_every_request_on_both_apis(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
) -> None:
    model_server.add_steps(["a", "b", "c", "d"])
    agent_shell.run_line_magic("agent_new", "")
    agent_shell.run_line_magic("agent", "default")
    assert "temperature" not in model_server.requests[-1]
    agent_shell.run_line_magic("config", "AgentMagics.temperature = 0.2")
    agent_shell.run_line_magic("agent", "focused")
    assert model_server.requests[-1]["temperature"] == 0.2
    agent_shell.run_line_magic("agent_new", "--temperature 1.5 --api responses")
    agent_shell.run_line_magic("agent", "creative")
    assert model_server.exchanges[-1].path == "/v1/responses"
    assert model_server.requests[-1]["temperature"] == 1.5
    with pytest.raises(TraitError, match="temperature must be at most 2, or None for the "
                                         r"model's default \(got 3.0\)"):
        magics_of(agent_shell).temperature = 3.0
    with pytest.raises(UsageError, match=r"^--temperature must be zero or more \(got -1.0\); "
                                         r"no new session: session \w+ stays active$"):
        agent_shell.run_line_magic("agent_new", "--temperature -1")
