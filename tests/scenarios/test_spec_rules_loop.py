"""The log, the turn and the step as SPEC 4, 7, 9 and 12 word them (R4.4, R4.9, R7.9,
R7.10, R7.16, R7.34, R9.10, R12.3)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue import MessageSource, StoreError
from retinue.hooks import PreToolDecision
from retinue.prompt import Assembly, Section
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from retinue.tools import ToolExecution
from tests.helpers import (
    OPTIONS,
    HeldFlush,
    Next,
    echo,
    idle_events,
    of_type,
    runtime,
    texts,
    user_texts,
)


def _tool_step_then_answer() -> ScriptedModel:
    """A turn of two steps: one echo call, then an answer."""
    return ScriptedModel([CallTools([ToolCallSpec("echo", '{"text": "x"}')]), Reply("done")])


async def test_header_metadata_is_neither_logged_nor_in_history(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.4: the session header (id, creation time, cwd) lives beside the log: no event
    carries it, and neither the derived history nor the request shows it."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS, cwd="/srv/project-cwd")
        await agent.ask("hi")
        header = agent.session.header
        assert header.cwd == "/srv/project-cwd"
        # Each event's time may equal the header's creation time: only the cwd tells.
        logged = json.dumps(agent.session.dump())
        shown = repr(agent.session.derive_messages()) + repr(model.requests[0].messages)
        assert "/srv/project-cwd" not in logged + shown
        assert {event.type.split("/")[0] for event in agent.session.events} == {
            "turn",
            "user",
            "step",
            "request",
            "assistant",
        }


async def test_appends_return_at_once_and_reach_the_store_only_when_it_flushes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.9: while the store's write hangs, an inject is logged and returns without
    waiting: its events are buffered, not committed, until the flush goes through."""
    inner = MemoryStore()
    store = HeldFlush(inner)
    async with runtime(ScriptedModel([Reply("ok")]), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("hi")
        await store.entered.wait()
        turn_events = len(agent.session.events)
        agent.inject("a note")
        assert len(agent.session.events) == turn_events + 3
        stats = inner.statistics()
        assert (stats.committed_events, stats.buffered_events) == (0, turn_events + 3)
        store.release.set()
        await agent.wait_idle()
        stats = inner.statistics()
        assert (stats.committed_events, stats.buffered_events) == (turn_events + 3, 0)


async def test_a_batch_s_trigger_names_its_first_prompt_s_source(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.9: every prompt queued when the turn starts joins it, in order with its own
    source, and the turn's trigger is a message from the first one's source."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("first", source="planner")
        agent.send("second")
        agent.send("third", source="critic")
        events = await idle_events(agent)
        [start] = of_type(events, "turn/start")
        trigger = start.data.trigger  # type: ignore[union-attr]
        assert (trigger.kind, trigger.source) == ("message", MessageSource("plugin", "planner"))
        prompts = of_type(events, "user/message")
        assert [(texts(e.data.content), e.data.source.kind) for e in prompts] == [  # type: ignore[union-attr]
            ("first", "plugin"),
            ("second", "user"),
            ("third", "plugin"),
        ]


@attrs.define(eq=False)
class _InjectAtEveryStep(trio.abc.Instrument):
    """Before any task's step, inject into *agent* if it runs with no turn open.

    Once per gap between turns: that is every scheduling point at which an
    idle inject could take the number the driver is about to use.
    """

    agent: retinue.Agent
    gaps: set[int] = attrs.field(factory=set)

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        agent = self.agent
        if agent.status != "running" or agent.session.is_turn_open:
            return
        last = agent.session.last_turn
        if last not in self.gaps:
            # Its own injection turn ends a gap too: the next one is the driver's.
            self.gaps.update((last, last + 1))
            agent.inject("racing note")


async def test_an_inject_racing_the_turn_start_never_takes_its_number(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.10: an inject made at whatever scheduling point it finds while the agent runs
    with no turn open lands in a turn of its own; each prompt's turn keeps a number of
    its own and opens with that prompt."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def slow_flush(_agent: retinue.Agent, _session: Session) -> None:
            await trio.sleep(1)  # a window where no turn is open: injections land here

        rt.hooks.on("session/flush", slow_flush, agent=agent)
        racer = _InjectAtEveryStep(agent)
        trio.lowlevel.add_instrument(racer)
        try:
            results = [await agent.ask(f"prompt {n}") for n in range(3)]
        finally:
            trio.lowlevel.remove_instrument(racer)
        events = agent.session.events
        starts = [event.data for event in of_type(events, "turn/start")]
        assert [start.turn for start in starts] == list(range(1, len(starts) + 1))  # type: ignore[union-attr]
        kinds = {start.turn: start.trigger.kind for start in starts}  # type: ignore[union-attr]
        assert "injection" in kinds.values()
        assert [(result.reason.kind, kinds[result.turn]) for result in results] == [
            ("completed", "message")
        ] * 3
        assert user_texts(events) == ["prompt 0", "prompt 1", "prompt 2"]
        check_session_invariants(events)


async def test_the_system_prompt_is_assembled_for_every_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.16: each step of a turn assembles and renders the prompt anew: a section that
    changes between the steps of one turn reaches the second step's request."""
    model = _tool_step_then_answer()
    assembled: list[int] = []

    async def numbered(_agent: object, assembly: Assembly, call_next: Next) -> Assembly:
        assembly = await call_next()
        assembled.append(len(assembled) + 1)
        section = Section("count", f"Assembly {len(assembled)}.", 10)
        return attrs.evolve(assembly, sections=(*assembly.sections, section))

    async with runtime(model, tools=[echo], system_prompt="Base.") as rt:
        rt.hooks.on("system-prompt/assemble", numbered)
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
    assert (result.turn, result.text) == (1, "done")
    assert [request.system for request in model.requests] == [
        "Base.\n\nAssembly 1.",
        "Base.\n\nAssembly 2.",
    ]


async def test_each_request_header_sits_inside_its_step_before_any_chunk(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.34: the header event a request owes (the first, then a model switch's delta) is
    logged after its step's ``step/start`` and before the first ``assistant/chunk``."""
    model = _tool_step_then_answer()

    async def switch_second_step(
        _agent: object, _turn: int, step: int, _config: Any, next_: Next
    ) -> Any:
        chosen = await next_()
        return attrs.evolve(chosen, model="bigger") if step == 2 else chosen

    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("agent/request", switch_second_step, agent=agent)
        await agent.ask("go")
        events = agent.session.events
    per_step: list[list[str]] = []
    for event in events:
        if event.type == "step/start":
            per_step.append([])
        elif per_step and event.type in (
            "request/header",
            "request/header-delta",
            "assistant/chunk",
        ):
            per_step[-1].append(event.type.removeprefix("request/"))
    assert [step[:2] for step in per_step] == [
        ["header", "assistant/chunk"],
        ["header-delta", "assistant/chunk"],
    ]


Decide = Callable[[], Awaitable[PreToolDecision]]


async def test_identical_calls_each_get_an_execution_of_their_own_in_model_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.10: two calls of one tool with the same arguments reach the tool seams as two
    distinct executions, one per call in the model's order, and each gets its result."""
    same = '{"text": "twin"}'
    model = ScriptedModel(
        [
            CallTools([ToolCallSpec("echo", same, "c1"), ToolCallSpec("echo", same, "c2")]),
            Reply("ok"),
        ]
    )
    executions: list[ToolExecution] = []

    async def record(execution: ToolExecution, call_next: Decide) -> PreToolDecision:
        # Pre-execute runs one call at a time in model order (R9.15, R9.16).
        executions.append(execution)
        return await call_next()

    async with runtime(model, tools=[echo]) as rt:
        rt.hooks.on("tools/pre-execute", record)
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("go")
        events = agent.session.events
    first, second = executions
    assert first is not second
    assert (first.call_id, second.call_id) == ("c1", "c2")
    assert first.token != second.token
    for kind in ("tool/call", "tool/result"):
        assert [e.data.call_id for e in of_type(events, kind)] == ["c1", "c2"]  # type: ignore[union-attr]


async def test_resume_without_a_durable_store_uses_the_runtime_s_memory_and_names_what_is_missing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.3: with no store given, agents run and resume from the runtime's in-memory store;
    resuming an id it never held is a typed ``SESSION_NOT_FOUND`` naming that id."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="kept")
        await agent.ask("one")
        await agent.dispose()
        resumed = await rt.resume_agent("kept")
        assert (await resumed.ask("two")).turn == 2
        with pytest.raises(StoreError, match="'never-stored'") as caught:
            await rt.resume_agent("never-stored")
        assert caught.value.code == "SESSION_NOT_FOUND"
