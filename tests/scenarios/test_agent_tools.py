"""``create_agent(..., tools=[...])``: tools of one agent's own, beside the runtime's.

The same as registering each with ``rt.tools.add(tool, agent=agent)`` in the
agent's setup: the agent's requests list them, no other agent's do, and they
go with its teardown. ``resume_agent`` and ``start_forked`` take them too.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, ConfigError
from retinue.stores import MemoryStore
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from tests.helpers import OPTIONS, echo, of_type, runtime


@retinue.tool
async def lookup(city: str) -> str:
    """Weather for a city.

    Args:
        city: The city name.
    """
    await trio.lowlevel.checkpoint()
    return f"{city}: sunny"


def tool_names(request: Any) -> list[str]:
    return sorted(schema.name for schema in request.tools)


async def test_an_agents_own_tools_reach_its_requests_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.1, R12.4: an agent created with ``tools=[lookup]`` is offered ``lookup`` beside
    the runtime's ``echo`` and runs it; an agent created without is offered ``echo`` only;
    once the first is disposed, its tool is gone from the registry."""
    model = ScriptedModel(
        {
            "own": [CallTools([ToolCallSpec("lookup", '{"city": "Oslo"}')]), Reply("done")],
            "plain": [Reply("plain")],
        }
    )
    async with runtime(model, tools=[echo]) as rt:
        own = await rt.create_agent("own", AgentOptions(model="own"), tools=[lookup])
        plain = await rt.create_agent("plain", AgentOptions(model="plain"))
        assert (await own.ask("weather?")).text == "done"
        await plain.ask("hi")
        by_model = {request.config.model: request for request in model.requests}
        assert tool_names(by_model["own"]) == ["echo", "lookup"]
        assert tool_names(by_model["plain"]) == ["echo"]
        results = of_type(own.session.events, "tool/result")
        assert [event.data.is_error for event in results] == [False]  # type: ignore[union-attr]
        assert rt.tools.get("lookup", own.id) is lookup
        await own.dispose()
        assert rt.tools.get("lookup", own.id) is None


async def test_a_resumed_agent_takes_its_tools_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R11.15: a session stores no tools: ``resume_agent(id, tools=[lookup])`` offers
    ``lookup`` to the resumed agent's requests."""
    store = MemoryStore()
    model = ScriptedModel([Reply("first"), Reply("second")])
    async with store:
        async with runtime(model, store=store) as rt:
            agent = await rt.create_agent("a", OPTIONS, session_id="a", tools=[lookup])
            await agent.ask("one")
        async with runtime(model, store=store) as rt:
            resumed = await rt.resume_agent("a", tools=[lookup])
            await resumed.ask("two")
    assert [tool_names(request) for request in model.requests] == [["lookup"], ["lookup"]]


@pytest.mark.parametrize(
    ("tools", "error", "words"),
    [
        (lookup, ConfigError, "collection of Tools"),
        ("lookup", ConfigError, "collection of Tools"),
        (["lookup"], ConfigError, r"tools\[0\] must be a Tool"),
        ([lookup, lookup], ConfigError, 'tools\\[1\\]: tool "lookup" is given twice'),
    ],
)
async def test_tools_that_are_no_tools_are_refused_before_anything_is_made(
    autojump_clock: trio.testing.MockClock, tools: Any, error: type[Exception], words: str
) -> None:
    """R12.4: *tools* are checked before a session is made: nothing is created, and the
    id stays free."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        with pytest.raises(error, match=words):
            await rt.create_agent("a", OPTIONS, session_id="a", tools=tools)
        assert rt.agents.get("a") is None
        agent = await rt.create_agent("a", OPTIONS, session_id="a")
        assert (await agent.ask("hi")).text == "ok"


@pytest.mark.parametrize(
    ("tools", "words"),
    [
        (lookup, "collection of Tools"),
        (["lookup"], r"tools\[0\] must be a Tool"),
        ([lookup, lookup], 'tools\\[1\\]: tool "lookup" is given twice'),
    ],
)
async def test_the_runtimes_tools_are_refused_as_an_agents_are(
    autojump_clock: trio.testing.MockClock, tools: Any, words: str
) -> None:
    """R12.4: ``open_runtime(tools=...)`` refuses what ``create_agent(tools=...)`` refuses,
    in the same words, before the runtime opens."""
    with pytest.raises(ConfigError, match=words):
        async with retinue.open_runtime(models=ScriptedModel([]), tools=tools):
            pytest.fail("the runtime opened")


async def test_a_failed_setup_takes_the_tools_with_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.4: the tools are registered before *setup* runs; a setup that fails unwinds
    them, so the same id can be created again with them."""

    def failing(_agent: retinue.Agent) -> None:
        raise RuntimeError("setup failed")

    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        with pytest.raises(RuntimeError, match="setup failed"):
            await rt.create_agent("a", OPTIONS, session_id="a", tools=[lookup], setup=failing)
        assert rt.tools.get("lookup", "a") is None
        agent = await rt.create_agent("a", OPTIONS, session_id="a", tools=[lookup])
        assert rt.tools.get("lookup", agent.id) is lookup
