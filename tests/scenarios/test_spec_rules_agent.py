"""The agent handle and its inbox as SPEC 2 and 3 word them (R2.1, R2.2, R2.11-R2.13, R3.1)."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, MessageSource
from retinue.actors import AgentDisposedError, AgentNotReadyError
from retinue.session import EventLog
from retinue.testing import CallTools, Hang, Reply, ScriptedModel, ToolCallSpec
from retinue.tools import ToolExecution, ToolExecutionResult
from tests.helpers import (
    OPTIONS,
    echo,
    idle_events,
    of_type,
    record_statuses,
    runtime,
    texts,
    types_without_chunks,
    user_texts,
)

# R2.2: every status change an agent may make, as (from, to).
_LEGAL_TRANSITIONS = {
    ("idle", "running"),
    ("running", "idle"),
    ("idle", "disposed"),
    ("running", "disposed"),
}


def _transitions(statuses: list[str]) -> list[tuple[str, str]]:
    """Each announced change, from the initial ``idle`` on."""
    return list(itertools.pairwise(["idle", *statuses]))


def event_turn(events: EventLog, seq: int) -> int:
    """The turn whose ``turn/start`` most recently precedes the event at *seq*."""
    starts = [event for event in of_type(events, "turn/start") if event.seq < seq]
    return starts[-1].data.turn  # type: ignore[union-attr]


RunTool = Callable[[], Awaitable[ToolExecutionResult]]


async def test_the_handle_exposes_the_specified_surface_with_read_only_options(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.1: the handle has id, options, session, status and the driving verbs; the
    options are the ones given and cannot be replaced or changed through it."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        options = AgentOptions(model="scripted", max_tokens=64)
        agent = await rt.create_agent("a", options)
        assert agent.id == agent.session.id
        assert agent.options == options
        assert agent.status == "idle"
        for verb in ("send", "steer", "inject", "cancel", "wait_idle", "dispose"):
            assert callable(getattr(agent, verb)), verb
        with pytest.raises(AttributeError):
            agent.options = AgentOptions(model="other")  # type: ignore[misc]
        with pytest.raises(AttributeError):
            agent.options.model = "other"  # type: ignore[misc]
        assert agent.options.model == "scripted"
        await agent.dispose()


async def test_an_idle_agent_disposed_goes_straight_to_disposed_and_stays_there(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.2: the initial status is ``idle`` (announced by nobody); ``idle -> disposed`` is
    legal, and ``disposed`` is terminal: a later cancel or wait changes nothing."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses = record_statuses(rt, agent)
        assert agent.status == "idle"
        await agent.dispose()
        agent.cancel("after the end")
        await agent.wait_idle()
        assert (agent.status, statuses) == ("disposed", ["disposed"])


async def test_statuses_follow_only_the_legal_transitions_through_turns_and_disposal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.2: a turn goes ``idle -> running -> idle``; a disposal mid-turn goes
    ``running -> disposed`` with no ``idle`` between, and nothing follows it."""
    model = ScriptedModel([Reply("first"), Hang("second")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses = record_statuses(rt, agent)
        await agent.ask("one")
        agent.send("two")
        await trio.sleep(1)
        assert agent.status == "running"
        await agent.dispose()
        assert statuses == ["running", "idle", "running", "disposed"]
        assert set(_transitions(statuses)) <= _LEGAL_TRANSITIONS
        assert str(agent.status) == "disposed"


async def test_send_leaves_the_status_to_the_driver(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.11: ``send`` returns with the status still ``idle`` and nothing announced; the
    driver flips it to ``running`` later, and ``wait_idle`` is what tells the turn ran."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses = record_statuses(rt, agent)
        agent.send("hello")
        assert (agent.status, statuses, list(agent.session.events)) == ("idle", [], [])
        events = await idle_events(agent)
        assert statuses == ["running", "idle"]
        assert user_texts(events) == ["hello"]


async def test_a_send_while_running_waits_for_the_next_turn_boundary(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.12: a send made while a turn runs (from its tool) does not join that turn, even
    though the turn takes another step: it is the next turn's prompt, as an idle send is."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("echo", '{"text": "x"}')]), Reply("done"), Reply("later")]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def send_from_the_tool(
            execution: ToolExecution, call_next: RunTool
        ) -> ToolExecutionResult:
            agent.send("while running")
            return await call_next()

        rt.hooks.on("tools/execute", send_from_the_tool, agent=agent)
        first = await agent.ask("first")
        events = await idle_events(agent)
        assert (first.turn, first.text) == (1, "done")
        turn_of_prompt = {
            texts(event.data.content): event_turn(events, event.seq)  # type: ignore[union-attr]
            for event in of_type(events, "user/message")
        }
        assert turn_of_prompt == {"first": 1, "while running": 2}
        # The second step's request: the prompt, the tool call and its result; no later send.
        second_step = [texts(message.content) for message in model.requests[1].messages]
        assert (len(second_step), second_step[0]) == (3, "first")


async def test_steer_is_refused_as_send_is_before_publication_and_after_disposal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.13: in the agent's setup ``steer`` raises ``AgentNotReadyError`` as ``send`` does,
    and once disposed ``AgentDisposedError``; neither logs or announces anything."""
    refusals: list[tuple[str, type[BaseException]]] = []

    def try_verbs(agent: retinue.Agent) -> None:
        for verb in (agent.send, agent.steer):
            with pytest.raises(AgentNotReadyError) as caught:
                verb("too early")
            refusals.append((verb.__name__, caught.type))

    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        queued: list[object] = []
        rt.hooks.on("agent/queued", lambda *args: queued.append(args))
        agent = await rt.create_agent("a", OPTIONS, setup=try_verbs)
        await agent.dispose()
        for verb in (agent.send, agent.steer):
            with pytest.raises(AgentDisposedError) as caught:
                verb("too late")
            refusals.append((verb.__name__, caught.type))
        assert list(agent.session.events) == []
        assert queued == []
    assert refusals == [
        ("send", AgentNotReadyError),
        ("steer", AgentNotReadyError),
        ("send", AgentDisposedError),
        ("steer", AgentDisposedError),
    ]


async def test_queued_prompts_start_turns_and_steering_joins_the_running_turn_between_steps(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.1: of two messages sent during one step, the steered one is drained between
    that step and the next, as a ``steering/message`` of the same turn with its source,
    and the queued one waits for turn start; the inbox itself is not on the handle."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("echo", '{"text": "x"}')]), Reply("done"), Reply("next")]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def message_from_the_tool(
            execution: ToolExecution, call_next: RunTool
        ) -> ToolExecutionResult:
            agent.send("queued", source="planner")
            agent.steer("steered", source="coach")
            return await call_next()

        rt.hooks.on("tools/execute", message_from_the_tool, agent=agent)
        agent.send("go")
        events = await idle_events(agent)
        assert types_without_chunks(events)[:12] == [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "assistant/message",
            "tool/call",
            "tool/result",
            "steering/message",
            "step/end",
            "step/start",
            "assistant/message",
            "step/end",
        ]
        [steering] = of_type(events, "steering/message")
        assert steering.data.turn == 1  # type: ignore[union-attr]
        assert steering.data.source == MessageSource("plugin", "coach")  # type: ignore[union-attr]
        [_, queued] = of_type(events, "user/message")
        assert event_turn(events, queued.seq) == 2
        assert queued.data.source == MessageSource("plugin", "planner")  # type: ignore[union-attr]
        public = {name for name in dir(agent) if not name.startswith("_")}
        assert not public & {"mailbox", "inbox", "queued", "steering"}
