"""Session-log invariant checkers on results and messages rewritten by a surface replace, as
pruning does (R4.19, R4.20, R7.19), and on logs a runtime writes: context injected between
results, results pruned in ``agent/pre-step``."""

from __future__ import annotations

import pytest
import trio

import retinue
from retinue._content import Text, ToolCall, ToolResultBlock
from retinue.session import (
    AssistantMessage,
    Event,
    EventData,
    Replace,
    Session,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from retinue.testing import (
    CallTools,
    InvariantError,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_history_replay,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from tests.unit.test_checks import DONE, TRIGGER, text


@retinue.tool
async def pause(seconds: float) -> str:
    """Sleep, then answer.

    Args:
        seconds: how long to sleep.
    """
    await trio.sleep(seconds)
    return "paused"


async def test_check_session_invariants_passes_a_runtime_log_with_context_between_results(
    autojump_clock,
) -> None:
    """R2.17, R9.17: a context injected while the second of two calls runs lands between results."""
    calls = CallTools([ToolCallSpec("pause", '{"seconds": 1}')] * 2)
    model = ScriptedModel([calls, Reply("done")])
    async with retinue.open_runtime(models=model, tools=[pause]) as rt:
        agent = await rt.create_agent("a", retinue.AgentOptions(model="m"))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.ask, "go")
            await trio.sleep(1.5)
            agent.inject("while the second call runs")
        events = agent.session.events
    types = [event.type for event in events if event.type in ("tool/result", "context/message")]
    assert types == ["tool/result", "context/message", "tool/result"]
    check_session_invariants(events)
    check_history_replay(events)


def pruned_log(pruned: EventData) -> list[Event]:
    """A tool step in turn 1; in turn 2, before its step (R7.19), a surface replace of the
    result of turn 1 (seq 6) by *pruned*, then a step that answers."""
    session = Session.create("pruned")
    session.append(TurnStart(1, TRIGGER))
    session.append(UserMessage(text("hello")), surface="append")
    session.append(StepStart(1, 1))
    session.append(AssistantMessage(1, 1, (ToolCall("c1", "t", "{}"),)), surface="append")
    session.append(ToolCallEvent(1, 1, "c1", "t", "{}"))
    session.append(ToolResultEvent(1, 1, "c1", text("a long output")), surface="append")
    assert session.events[-1].seq == 5
    session.append(StepEnd(1, 1))
    session.append(TurnEnd(1, DONE))
    session.append(TurnStart(2, TRIGGER))
    session.append(UserMessage(text("again")), surface="append")
    session.append(pruned, surface=Replace(5, 5), source_event_seqs=(5,))
    session.append(StepStart(2, 1))
    session.append(AssistantMessage(2, 1, text("done")), surface="append")
    session.append(StepEnd(2, 1))
    session.append(TurnEnd(2, DONE))
    return list(session.events)


@pytest.mark.parametrize(
    "pruned",
    [
        ToolResultEvent(1, 1, "c1", text("[pruned]")),
        ToolResultEvent(2, 0, "c1", text("[pruned]")),
    ],
    ids=["stamped-as-the-original", "stamped-with-the-open-turn"],
)
def test_checkers_accept_a_tool_result_rewritten_by_a_surface_replace(
    pruned: ToolResultEvent,
) -> None:
    """R4.19, R4.20, R7.19: pruning rewrites a tool result as a shorter ``tool/result`` of the
    same call (keeping the call paired in history) by a surface replace, logged in
    ``agent/pre-step``, outside any step. The rewrite is no second result of the call's step
    (R4.15, R9.17, R9.25): it only has to name a call made earlier."""
    events = pruned_log(pruned)
    check_session_invariants(events)
    check_no_dangling_tool_calls(events)
    check_history_replay(events)
    history = Session.from_events(Session.create("s").header, events).derive_messages()
    assert history[2].content[0] == ToolResultBlock("c1", text("[pruned]"), False)


def test_checkers_accept_an_assistant_message_rewritten_by_a_surface_replace() -> None:
    """R4.19, R4.20, R7.19: a replace that rewrites an assistant message (keeping its call)
    outside any step is no message of a step: its stamps are the original's."""
    session_events = pruned_log(ToolResultEvent(1, 1, "c1", text("[pruned]")))
    rewritten = AssistantMessage(1, 1, (Text("shorter"), ToolCall("c1", "t", "{}")))
    events = [
        *session_events[:10],
        Event(10, 0, rewritten, (3,), Replace(3, 3)),
        *session_events[11:],
    ]
    check_session_invariants(events)
    check_no_dangling_tool_calls(events)
    check_history_replay(events)


def test_check_session_invariants_r4_15_a_rewritten_result_names_an_earlier_call() -> None:
    """R4.15: a ``tool/result`` that rewrites another by a surface replace still needs an
    earlier ``tool/call`` of its call id."""
    events = pruned_log(ToolResultEvent(1, 1, "c9", text("[pruned]")))
    for check in (check_session_invariants, check_history_replay):
        with pytest.raises(InvariantError, match=r"seq 10 .*R4\.15.*'c9'"):
            check(events)


async def test_checkers_pass_a_runtime_log_pruned_in_agent_pre_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.20, R7.19, R8.9: an ``agent/pre-step`` listener prunes the tool results of earlier
    turns as the sanctioned place to rewrite history; the log passes every checker and the
    model gets the pruned results."""
    calls = CallTools([ToolCallSpec("pause", '{"seconds": 1}')])
    model = ScriptedModel([calls, Reply("one"), Reply("two")])

    pruned: set[int] = set()

    def prune(handle: retinue.Agent, turn: int, *_rest: object) -> None:
        session = handle.session
        for event in list(session.events):
            data = event.data
            if isinstance(data, ToolResultEvent) and data.turn < turn and event.seq not in pruned:
                pruned.add(event.seq)
                rewrite = ToolResultEvent(data.turn, data.step, data.call_id, text("[pruned]"))
                session.append(
                    rewrite, surface=Replace(event.seq, event.seq), source_event_seqs=(event.seq,)
                )

    with trio.fail_after(60):
        async with retinue.open_runtime(models=model, tools=[pause]) as rt:
            rt.hooks.on("agent/pre-step", prune)
            agent = await rt.create_agent("a", retinue.AgentOptions(model="m"))
            await agent.ask("go")
            await agent.ask("again")
            events = agent.session.events
    check_session_invariants(events)
    check_no_dangling_tool_calls(events)
    check_history_replay(events)
    results = [
        b for m in model.requests[-1].messages for b in m.content if isinstance(b, ToolResultBlock)
    ]
    assert [r.content for r in results] == [text("[pruned]")]
