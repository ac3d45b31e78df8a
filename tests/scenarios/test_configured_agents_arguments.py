"""The arguments of start_configured_agents and bind_parallel_cap (SPEC R13.3, R13.6):
a value of the wrong kind is a TypeError naming it, before anything is started or bound."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from retinue import LoopConfig
from retinue.config import AgentEntry, ParallelCapSetting
from retinue.supervisors import CONFIG_START_FAILED, bind_parallel_cap, start_configured_agents
from retinue.testing import Reply, ScriptedModel
from tests.helpers import runtime


def model() -> ScriptedModel:
    return ScriptedModel([Reply("ok")], repeat_last=True)


@pytest.mark.parametrize("config", [{"agents": [{"id": "writer"}]}, None, "writer"])
async def test_start_configured_agents_refuses_a_config_that_is_no_loop_config(
    autojump_clock: trio.testing.MockClock, config: object
) -> None:
    """R13.3: a raw table or None is refused naming ``config``, not as ``'dict' object has no
    attribute 'agents'``."""
    async with runtime(model()) as rt:
        with pytest.raises(
            TypeError, match=r"^start_configured_agents: config must be a LoopConfig"
        ):
            await start_configured_agents(rt, config)  # type: ignore[arg-type]
        assert rt.agents.list() == []


async def test_start_configured_agents_refuses_an_rt_that_is_no_runtime(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R13.3, R13.4: an *rt* that is no runtime is refused naming ``rt``, rather than every entry
    failing against it and the report of the first failure raising ``AttributeError``."""
    config = LoopConfig(agents=(AgentEntry("writer"),))
    async with runtime(model()) as rt:
        heard: list[object] = []
        rt.hooks.on(CONFIG_START_FAILED, heard.append)
        with pytest.raises(TypeError, match=r"^start_configured_agents: rt must be a Runtime"):
            await start_configured_agents(rt.hooks, config)  # type: ignore[arg-type]
        assert heard == []


@pytest.mark.parametrize(("rt_given", "setting"), [(True, 8), (True, None), (False, "cap")])
async def test_bind_parallel_cap_refuses_arguments_of_the_wrong_kind(
    autojump_clock: trio.testing.MockClock, rt_given: bool, setting: object
) -> None:
    """R13.6: a cap given as a bare int, or an *rt* that is no runtime, is refused naming the
    argument, not as ``'int' object has no attribute 'value'``."""
    named = "setting must be a ParallelCapSetting" if rt_given else "rt must be a Runtime"
    async with runtime(model()) as rt:
        target = rt if rt_given else object()
        given = setting if rt_given else ParallelCapSetting(4)
        with pytest.raises(TypeError, match=f"^bind_parallel_cap: {named}"):
            bind_parallel_cap(target, given)  # type: ignore[arg-type]
        assert rt.max_parallel_tool_calls == 10
