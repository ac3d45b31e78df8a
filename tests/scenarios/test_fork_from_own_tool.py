"""An orchestrating agent forking its own session from its tool, mid-turn (R4.25, R12.7)."""

from __future__ import annotations

import trio
import trio.testing

import retinue
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import OPTIONS, of_type, runtime


async def test_a_fork_of_the_running_agent_is_refused_open_turn_unless_given_a_boundary(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.25: ``fork_agent_session`` from the source's own tool, whose turn is open, is
    refused ``OPEN_TURN`` without a boundary, leaving the child id free; with the seq of
    its last ``turn/end`` it forks the turns before, and the child answers."""
    codes: list[str | None] = []
    children: list[retinue.Agent] = []

    @retinue.tool
    async def branch() -> str:
        """Fork this agent's session and ask the fork."""
        rt, source = holder
        try:
            rt.fork_agent_session(source.id, "child")
        except retinue.SessionError as exc:
            codes.append(exc.code)
        boundary = of_type(source.session.events, "turn/end")[-1].seq
        child = await rt.start_forked(rt.fork_agent_session(source.id, "child", boundary))
        children.append(child)
        return (await child.ask("from the fork")).text

    model = ScriptedModel(
        [Reply("one"), CallTools([ToolCallSpec("branch")]), Reply("forked"), Reply("two")]
    )
    with trio.fail_after(60):
        async with runtime(model, tools=[branch]) as rt:
            source = await rt.create_agent("p", OPTIONS, session_id="parent")
            holder = (rt, source)
            await source.ask("first")
            first_turn = len(source.session.events)
            result = await source.ask("branch off")
            assert result.text == "two"
            assert codes == ["OPEN_TURN"]
            (child,) = children
            assert child.session.header.parent_session == "parent"
            assert child.session.header.seed_length == first_turn
            assert list(child.session.events[:first_turn]) == list(
                source.session.events[:first_turn]
            )
            [answered] = of_type(source.session.events, "tool/result")
            assert "forked" in str(answered.data)
            for agent in (source, child):
                check_session_invariants(agent.session.events)
