"""Crash-tail repair through the runtime and the store (R11.9, R11.15, R11.16, DESIGN 5)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import trio

import retinue
from retinue._content import Text, ToolCall
from retinue.session import (
    AssistantMessage,
    Event,
    Replace,
    Session,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
)
from retinue.testing import (
    CallTools,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_history_replay,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from tests.stores._kit import lines
from tests.stores.conftest import StoreKit

OPTIONS = retinue.AgentOptions(model="m")
CRASHED = "crashed"


@retinue.tool
async def lookup() -> str:
    """Answer at once."""
    return "sunny"


def model() -> ScriptedModel:
    """A tool step of two calls, then answers."""
    calls = CallTools([ToolCallSpec("lookup", "{}"), ToolCallSpec("lookup", "{}")], text="ok")
    return ScriptedModel([calls, Reply("done")], repeat_last=True)


def check_log(events: Sequence[Event]) -> None:
    """Every log checker: each call has exactly one result, and history replays."""
    check_session_invariants(events)
    check_no_dangling_tool_calls(events)
    check_history_replay(events)


def pruned(message: Event) -> AssistantMessage:
    """*message* rewritten as pruning does: its calls kept, its text cut."""
    data = message.data
    assert isinstance(data, AssistantMessage)
    calls = tuple(block for block in data.content if isinstance(block, ToolCall))
    return AssistantMessage(data.turn, data.step, (Text("[pruned]"), *calls), data.usage)


async def crash_after_pruning(when: Callable[[Event], bool]) -> list[Event]:
    """Run two turns, the first a tool step, whose session observer, on the first event
    *when* picks, rewrites the first ``assistant/message`` by a surface replace; the log as
    it stood right after that rewrite (a crash there)."""
    image: list[Event] = []

    def observer(event: Event) -> None:
        if image or not when(event):
            return
        message = next(e for e in session.events if isinstance(e.data, AssistantMessage))
        session.append(
            pruned(message),
            surface=Replace(message.seq, message.seq),
            source_event_seqs=(message.seq,),
        )
        image.extend(session.events)

    async with retinue.open_runtime(models=model(), tools=[lookup]) as rt:
        agent = await rt.create_agent("writer", OPTIONS, session_id=CRASHED)
        session = agent.session
        session.observe(observer)
        await agent.ask("go")
        await agent.ask("again")
    assert image, "the rewrite never happened"
    return image


async def store_image(kit: StoreKit, image: Sequence[Event]) -> None:
    """Write *image* as the stored log of the crashed session."""
    session = Session.from_events(Session.create(CRASHED).header, image)
    async with kit.open() as store:
        store.attach_new(session)
        await store.flush(session)


PRUNED_AT = {
    "after-a-result-of-its-own-step": (
        lambda event: isinstance(event.data, ToolResultEvent),
        ["tool/call", "tool/result", "step/end", "turn/end"],
    ),
    "inside-the-next-step": (
        lambda event: isinstance(event.data, StepStart) and event.data.step == 2,
        ["step/end", "turn/end"],
    ),
    "after-its-step-ends": (
        lambda event: isinstance(event.data, StepEnd) and event.data.step == 1,
        ["turn/end"],
    ),
    "in-the-next-turn-before-a-step": (
        lambda event: isinstance(event.data, TurnStart) and event.data.turn == 2,
        ["turn/end"],
    ),
}


@pytest.mark.parametrize("where", PRUNED_AT)
async def test_repair_answers_no_call_of_an_assistant_message_rewritten_by_a_replace(
    kit: StoreKit, where: str
) -> None:
    """R11.9, R4.20, DESIGN 5: a plugin rewrites a step's ``assistant/message`` by a surface replace
    after some of its calls were answered (in that step, a later step, or a later turn before its
    step, as pruning does: R7.19), and the process crashes before the turn ends. The rewrite makes
    no call: repair answers only the call still without a result, once, in its own step, and the
    resumed agent runs on. Every call of the rewritten message pending again would have repair log a
    second result of an answered call, or a result in another step or after the step's end."""
    when, closer_types = PRUNED_AT[where]
    with trio.fail_after(60):
        image = await crash_after_pruning(when)
        await store_image(kit, image)
        async with retinue.open_runtime(models=model(), store=kit.open()) as rt:
            agent = await rt.resume_agent(CRASHED, OPTIONS)
            loaded = agent.session.events[:]
            assert lines(loaded[: len(image)]) == lines(image)
            closers = loaded[len(image) :]
            assert [event.type for event in closers] == closer_types
            check_log(loaded)
            assert (await agent.ask("again")).reason.kind == "completed"
            session = agent.session
    check_log(session.events)
    end = closers[-1].data
    assert isinstance(end, TurnEnd)
    assert end.reason.kind == "interrupted"


async def test_repair_answers_a_call_whose_id_names_a_result_rewritten_by_a_replace(
    kit: StoreKit,
) -> None:
    """R11.9, R4.20, DESIGN 5: a model may reuse a call id in a later step (an id names one call of
    its step). A plugin prunes the earlier step's result of that id by a surface replace while the
    later call runs, and the process crashes. The rewrite answers no call: repair still answers the
    running one, so the repaired step does not end with the call unanswered, the rewrite counted as
    its result."""
    steps = [CallTools([ToolCallSpec("lookup", "{}", id="c1")]) for _ in range(2)]
    image: list[Event] = []

    def observer(event: Event) -> None:
        data = event.data
        if image or not (isinstance(data, ToolCallEvent) and data.step == 2):
            return
        result = next(e for e in session.events if isinstance(e.data, ToolResultEvent))
        rewrite = ToolResultEvent(1, 1, "c1", (Text("[pruned]"),))
        session.append(
            rewrite, surface=Replace(result.seq, result.seq), source_event_seqs=(result.seq,)
        )
        image.extend(session.events)

    with trio.fail_after(60):
        model = ScriptedModel([*steps, Reply("done")], repeat_last=True)
        async with retinue.open_runtime(models=model, tools=[lookup]) as rt:
            agent = await rt.create_agent("writer", OPTIONS, session_id=CRASHED)
            session = agent.session
            session.observe(observer)
            await agent.ask("go")
        assert image, "the rewrite never happened"
        await store_image(kit, image)
        async with retinue.open_runtime(models=model, store=kit.open()) as rt:
            agent = await rt.resume_agent(CRASHED, OPTIONS)
            loaded = agent.session.events[:]
            closers = loaded[len(image) :]
            assert [event.type for event in closers] == ["tool/result", "step/end", "turn/end"]
            check_log(loaded)
            assert (await agent.ask("again")).reason.kind == "completed"
            check_log(agent.session.events)
