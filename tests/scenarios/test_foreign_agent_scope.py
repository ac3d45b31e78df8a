"""Scoping a listener, tool or guard to another runtime's agent (SPEC R6.5, R9.3, R12.9)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import trio.testing

import retinue
from retinue.hooks import HookBus
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from retinue.tools import ToolExecution, ToolRegistry
from tests.helpers import OPTIONS, echo, runtime

Register = Callable[[retinue.Runtime, "retinue.Agent | str", list[str]], Callable[[], None]]
"""Scope something to an agent in a runtime; what it is appends its name to a list when used."""


def _listen(
    rt: retinue.Runtime, agent: retinue.Agent | str, heard: list[str]
) -> Callable[[], None]:
    return rt.hooks.on("tools/result", lambda *_: heard.append("listener"), agent=agent)


def _add(rt: retinue.Runtime, agent: retinue.Agent | str, heard: list[str]) -> Callable[[], None]:
    @retinue.tool(name="echo")
    async def shadow(text: str) -> str:
        """Echo the text back, for one agent (it shadows the global ``echo``).

        Args:
            text: What to echo.
        """
        heard.append("tool")
        return text

    return rt.tools.add(shadow, agent=agent)


def _guard(rt: retinue.Runtime, agent: retinue.Agent | str, heard: list[str]) -> Callable[[], None]:
    def check(_execution: ToolExecution) -> None:
        heard.append("guard")

    return rt.tools.guard(check, agent=agent)


REGISTER: dict[str, Register] = {"listener": _listen, "tool": _add, "guard": _guard}
FOREIGN = r"^agent 'a' belongs to another runtime$"
ECHO: list[CallTools | Reply] = [CallTools([ToolCallSpec("echo", '{"text": "hi"}')]), Reply("done")]


@pytest.mark.parametrize("what", sorted(REGISTER))
async def test_scoping_to_another_runtimes_agent_of_the_same_id_is_refused(
    autojump_clock: trio.testing.MockClock, what: str
) -> None:
    """R6.5, R9.3: a listener, tool or guard scoped to a handle of another runtime's agent is a
    ValueError naming it, and nothing is registered, as for a cleanup (R12.9). Scoped to that
    agent's id, it would never be used for that agent, but for this runtime's agent of the same id,
    and be kept after that agent's teardown. The id itself still names this runtime's agent."""
    heard: list[str] = []
    register = REGISTER[what]
    async with (
        runtime(ScriptedModel(ECHO * 2), tools=[echo]) as rt,
        runtime(ScriptedModel([Reply("hi")])) as other,
    ):
        theirs = await other.create_agent("a", OPTIONS, session_id="a")
        ours = await rt.create_agent("a", OPTIONS, session_id="a")
        with pytest.raises(ValueError, match=FOREIGN):
            register(rt, theirs, heard)
        assert not rt.hooks.has_listeners("tools/result")
        assert rt.tools.get("echo", "a") is echo
        assert (await ours.ask("go")).reason.kind == "completed"
        assert (await theirs.ask("go")).reason.kind == "completed"
        await theirs.dispose()
        assert heard == []
        register(rt, "a", heard)
        assert (await ours.ask("go")).reason.kind == "completed"
        assert heard == [what]


@pytest.mark.parametrize("what", sorted(REGISTER))
async def test_a_disposed_agent_of_another_runtime_is_refused_as_that_runtimes(
    autojump_clock: trio.testing.MockClock, what: str
) -> None:
    """R6.5, R12.9: a disposed handle of another runtime's agent is refused as that runtime's,
    as ``rt.scoped`` refuses it, not as disposed: this runtime has no agent of that id."""
    async with runtime(ScriptedModel([])) as rt, runtime(ScriptedModel([])) as other:
        theirs = await other.create_agent("a", OPTIONS, session_id="a")
        await theirs.dispose()
        with pytest.raises(ValueError, match=FOREIGN):
            REGISTER[what](rt, theirs, [])
        with pytest.raises(ValueError, match=FOREIGN):
            rt.scoped(theirs, lambda: None)
        assert not rt.hooks.has_listeners("tools/result")
        assert rt.tools.get("echo", "a") is None


async def test_a_bus_and_registry_of_no_runtime_take_an_agent_handle_by_its_id(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.5: a bus or registry built outside a runtime knows no runtime's agents: a
    handle from any runtime scopes a listener, tool or guard to its id."""
    bus = HookBus()
    registry = ToolRegistry(bus)
    async with runtime(ScriptedModel([])) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="a")
        bus.on("agent/status", lambda *_: None, agent=agent)
        registry.add(echo, agent=agent)
        registry.guard(lambda _execution: None, agent=agent)
    assert bus.hears("agent/status", "a")
    assert not bus.hears("agent/status", "b")
    assert (registry.get("echo", "a"), registry.get("echo", "b")) == (echo, None)


@pytest.mark.parametrize("what", sorted(REGISTER))
async def test_scoping_to_the_name_labelling_a_live_agents_id_is_refused(
    autojump_clock: trio.testing.MockClock, what: str
) -> None:
    """R6.5, R9.3, R13.3: the name given to ``create_agent`` only labels a fresh id
    (``<name>-session-<uuid4>``); passed where an id belongs while that agent lives and no
    live agent has it as its id, a listener, tool or guard scoped to it would never be used:
    a ValueError naming the agent's id, and nothing registered. An agent whose id is that
    name is scoped by it; once no live agent is labelled by it, it registers for a later
    agent of that id."""
    heard: list[str] = []
    register = REGISTER[what]
    async with runtime(ScriptedModel(ECHO * 2), tools=[echo]) as rt:
        writer = await rt.create_agent("writer", OPTIONS)
        match = rf"^agent='writer' is the name labelling live agent '{writer.id}', not an agent id"
        with pytest.raises(ValueError, match=match):
            register(rt, "writer", heard)
        assert not rt.hooks.has_listeners("tools/result")
        assert rt.tools.get("echo", "writer") is echo
        named = await rt.create_agent("other", OPTIONS, session_id="writer")
        register(rt, "writer", heard)
        assert (await named.ask("go")).reason.kind == "completed"
        assert (await writer.ask("go")).reason.kind == "completed"
        assert heard == [what]
        await named.dispose()
        await writer.dispose()
        register(rt, "writer", heard)


@pytest.mark.parametrize("what", sorted(REGISTER))
async def test_a_name_no_id_can_be_that_labels_a_live_agent_is_refused_as_a_label(
    autojump_clock: trio.testing.MockClock, what: str
) -> None:
    """R6.5, R11.12: ``".."`` is no id, but it labels ``..-session-<uuid4>``: passed for an
    id while that agent lives, the refusal names the agent it labels."""
    async with runtime(ScriptedModel(ECHO * 2), tools=[echo]) as rt:
        dots = await rt.create_agent("..", OPTIONS)
        match = rf"^agent='..' is the name labelling live agent '{re.escape(dots.id)}'"
        with pytest.raises(ValueError, match=match):
            REGISTER[what](rt, "..", [])
        await dots.dispose()
        with pytest.raises(ValueError, match=r"names no agent: it is a relative path"):
            REGISTER[what](rt, "..", [])
