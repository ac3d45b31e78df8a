"""The runtime's attributes are read-only, as its services are (R12.1)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import retinue
from retinue.supervisors import AgentRegistry
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime

DEADLINE = 600.0


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("agents", None),
        ("agents", AgentRegistry()),
        ("restart", None),
        ("restart", retinue.RestartPolicy(max_restarts=3)),
        ("admission", None),
    ],
)
async def test_the_runtime_refuses_an_assignment_to_its_registry_or_policies(
    autojump_clock: trio.testing.MockClock, name: str, value: object
) -> None:
    """R12.1: ``rt.agents``, ``rt.restart`` and ``rt.admission`` are read-only, as ``rt.hooks``,
    ``rt.tools`` and ``rt.store`` are: assigning one raises AttributeError and the runtime goes on
    as it was. Writable, another registry would hide the live agents from the runtime's close (None
    would fail it with an AttributeError), and another policy or controller would reach no agent
    already running, or no model at all."""
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=ScriptedModel([Reply("hi")])) as rt:
            before = getattr(rt, name)
            agent = await rt.create_agent("a", OPTIONS)
            with pytest.raises(AttributeError):
                setattr(rt, name, value)
            assert getattr(rt, name) is before
            assert (await agent.ask("hello")).reason.kind == "completed"
        assert agent.status == "disposed"


async def test_the_registry_cannot_be_changed_by_hand(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.1: the registry offers lookups only: a public ``remove`` would take a live agent out,
    which the runtime's close would then never dispose, its exit waiting for the driver for good."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        with pytest.raises(AttributeError):
            rt.agents.remove(agent.id)  # type: ignore[attr-defined]
        with pytest.raises(AttributeError):
            rt.agents.add(agent)  # type: ignore[attr-defined]
        assert rt.agents.list() == [agent]
    assert agent.status == "disposed"
