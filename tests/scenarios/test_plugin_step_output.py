"""A plugin cannot log a step's output out of place (R7.36, R9.10): the session refuses it."""

from __future__ import annotations

import trio
import trio.testing

from retinue import Text
from retinue.session import AssistantMessage, Event, ToolCallEvent
from retinue.testing import Reply, ScriptedModel, check_session_invariants
from tests.helpers import OPTIONS, last_end_reason, runtime


async def test_a_plugins_second_assistant_message_ends_the_turn_and_is_not_logged(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.36: an observer appending a second assistant/message in the step is refused
    (``STEP_OUTPUT``): the turn ends in error, the agent goes on, and the log holds what
    ``sessions import`` takes."""
    async with runtime(ScriptedModel([Reply("one"), Reply("two")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        added: list[int] = []

        def addendum(event: Event) -> None:
            data = event.data
            if isinstance(data, AssistantMessage) and not added:
                added.append(event.seq)
                agent.session.append(
                    AssistantMessage(data.turn, data.step, (Text("note"),)), surface="append"
                )

        agent.session.observe(addendum)
        with trio.fail_after(10):
            first = await agent.ask("go")
            second = await agent.ask("again")
    assert (first.reason.kind, first.reason.code) == ("error", "STEP_OUTPUT")
    assert "a second assistant/message in the step" in (first.reason.message or "")
    assert second.text == "two"
    assert last_end_reason(agent.session.events).kind == "completed"
    messages = [e for e in agent.session.events if isinstance(e.data, AssistantMessage)]
    assert len(messages) == 2
    check_session_invariants(agent.session.events)


async def test_a_plugins_tool_call_the_message_does_not_list_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.10: a tool/call a plugin logs for no tool-call block of the message is refused."""
    async with runtime(ScriptedModel([Reply("plain")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        invented: list[int] = []

        def invent(event: Event) -> None:
            data = event.data
            if isinstance(data, AssistantMessage) and not invented:
                invented.append(event.seq)
                agent.session.append(ToolCallEvent(data.turn, data.step, "made-up", "t", "{}"))

        agent.session.observe(invent)
        with trio.fail_after(10):
            result = await agent.ask("go")
    assert (result.reason.kind, result.reason.code) == ("error", "STEP_OUTPUT")
    assert not any(isinstance(e.data, ToolCallEvent) for e in agent.session.events)
    check_session_invariants(agent.session.events)
