"""An abort landing in a step's windows (R7.36, R7.40 W5-W8): what it keeps out of the log
(chunks after it, the header of a request never sent, a message, contexts) and how the turn
ends."""

from __future__ import annotations

import trio
import trio.testing

import retinue
from retinue import Accept, HookContext
from retinue.providers import Finish
from retinue.session import AssistantChunk, Event
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from retinue.tools import ToolExecution
from tests.helpers import (
    OPTIONS,
    Next,
    cancel_in_first_turn_on,
    idle_events,
    last_end_reason,
    of_type,
    runtime,
    types,
)
from tests.scenarios._interception_kit import GUARD


async def test_no_chunk_is_logged_after_a_chunk_observer_cancelled_the_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.36: each chunk is checked against the step signal before it is logged. A cancel from
    an observer of the first chunk, with the rest of the stream at hand without a checkpoint,
    leaves that one chunk logged and no more."""
    model = ScriptedModel([Reply("abcdef", chunks=6), Reply("later")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        cancel_in_first_turn_on(rt, agent, "assistant/chunk", "enough")
        result = await agent.ask("go")
        events = agent.session.events
        assert (result.reason.kind, result.reason.reason) == ("aborted", "enough")
        assert len(of_type(events, "assistant/chunk")) == 1
        assert of_type(events, "assistant/message") == []
        check_session_invariants(events)


async def test_a_pre_step_listener_failing_as_the_cancel_unwinds_it_leaves_the_turn_aborted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.40 W5, R7.22: a cancel that lands in a pre-step listener ends the turn aborted even
    when the listener's cleanup raises as the cancel unwinds it; its failure is the abort's
    doing, not an error of the turn."""
    entered = trio.Event()

    async def pre_step(*_args: object) -> None:
        entered.set()
        try:
            await trio.sleep_forever()
        finally:
            raise ValueError("cleanup failed")

    model = ScriptedModel([Reply("after")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        remove = rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        agent.send("go")
        await entered.wait()
        agent.cancel("stop")
        events = await idle_events(agent)
        assert last_end_reason(events) == retinue.session.TurnEndReason.aborted("stop")
        assert "step/start" not in types(events)
        remove()
        assert (await agent.ask("again")).text == "after"
        check_session_invariants(agent.session.events)


@retinue.tool
async def exclusive_note(text: str) -> str:
    """Note a text, alone.

    Args:
        text: What to note.
    """
    await trio.sleep(1)
    return f"noted {text}"


async def test_a_step_cancelled_as_its_last_result_is_logged_injects_no_context(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.36, R7.40 W7: contexts are injected once the step's tool calls ran to their end. A
    cancel from an observer of the last call's result aborts the step there: the context
    that call's post-execute gave is never injected, in the aborted turn or the next."""
    calls = [ToolCallSpec("exclusive_note", '{"text": "a"}')]
    model = ScriptedModel([CallTools(calls), Reply("after")])
    async with runtime(model, tools=[exclusive_note]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def post(execution: ToolExecution, _result: object, _proceed: Next) -> Accept:
            return Accept(additional_context=HookContext(f"about {execution.call_id}", GUARD))

        def on_event(_session: object, event: Event) -> None:
            if event.type == "tool/result":
                agent.cancel("stop")

        rt.hooks.on("tools/post-execute", post, agent=agent)
        rt.hooks.on("session/event", on_event, agent=agent)
        aborted = await agent.ask("go")
        assert aborted.reason == retinue.session.TurnEndReason.aborted("stop")
        assert len(of_type(agent.session.events, "tool/result")) == 1
        assert (await agent.ask("again")).text == "after"
        assert of_type(agent.session.events, "context/message") == []
        check_session_invariants(agent.session.events)


async def test_a_cancel_from_an_observer_of_the_finish_chunk_logs_no_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.36, R7.40 W7: a stream whose last chunk an observer cancelled on is an aborted step:
    its chunks stay logged, but no assistant message is assembled from them, and the model's
    answer never reaches the history."""
    model = ScriptedModel([Reply("cut short"), Reply("after")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def on_event(_session: object, event: Event) -> None:
            data = event.data
            finish = isinstance(data, AssistantChunk) and isinstance(data.chunk, Finish)
            if finish and data.turn == 1:  # type: ignore[union-attr]
                agent.cancel("stop")

        rt.hooks.on("session/event", on_event, agent=agent)
        aborted = await agent.ask("go")
        assert aborted.reason == retinue.session.TurnEndReason.aborted("stop")
        assert of_type(agent.session.events, "assistant/chunk") != []
        assert of_type(agent.session.events, "assistant/message") == []
        assert (await agent.ask("again")).text == "after"
        assert [message.role for message in agent.session.derive_messages()] == [
            "user",
            "user",
            "assistant",
        ]
        check_session_invariants(agent.session.events)


async def test_a_cancel_after_a_last_step_ends_the_turn_aborted_not_completed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.30 Check E, R7.40 W8: a cancel from an observer of the ``step/end`` of a step that
    would end the turn anyway (a reply without tool calls) ends it aborted with the cancel's
    reason, not completed."""
    model = ScriptedModel([Reply("answered"), Reply("after")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        cancel_in_first_turn_on(rt, agent, "step/end", "too late")
        result = await agent.ask("go")
        assert result.reason == retinue.session.TurnEndReason.aborted("too late")
        assert len(of_type(agent.session.events, "assistant/message")) == 1
        assert (await agent.ask("again")).text == "after"
        check_session_invariants(agent.session.events)
