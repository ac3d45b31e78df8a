"""The turn and step loop end to end (SPEC 7; T-L2..T-L7).

T-L1 and the plain tool round trip live in ``test_loop_basics.py``; this file
extends them. Every tool is async: under autojump a worker thread would let
virtual time race ahead.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue import (
    AgentOptions,
    Continue,
    HookContext,
    Message,
    MessageSource,
    Stop,
    Text,
)
from retinue.providers import Usage
from retinue.session import (
    AssistantChunk,
    SteeringMessage,
    ToolResultEvent,
    TurnStart,
)
from retinue.testing import (
    CallTools,
    RawChunks,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from retinue.tools import ToolOutput
from tests.helpers import (
    OPTIONS,
    Next,
    echo,
    idle_events,
    of_type,
    runtime,
    turn_ends,
    types_without_chunks,
)


@retinue.tool
async def measured(text: str) -> ToolOutput:
    """Answer with content and a meta record.

    Args:
        text: What to measure.
    """
    await trio.lowlevel.checkpoint()
    return ToolOutput(f"{len(text)} chars", meta={"length": len(text), "tags": ["a", "b"]})


def _texts(message: Message) -> list[str]:
    return [block.text for block in message.content if isinstance(block, Text)]


# -- T-L2: tool meta ------------------------------------------------------------


async def test_tool_meta_is_threaded_to_the_tool_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L2 / R9.3: a tool's ``meta`` is recorded on ``tool/result`` but never shown to the model."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("measured", '{"text": "abcd"}', id="c1")]), Reply("ok")]
    )
    async with runtime(model, tools=[measured]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        data = of_type(agent.session.events, "tool/result")[0].data
        assert isinstance(data, ToolResultEvent)
        assert data.call_id == "c1"
        assert data.meta == {"length": 4, "tags": ("a", "b")}
        assert data.content == (Text("4 chars"),)
        dumped: list[Any] = json.loads(json.dumps(agent.session.dump()))
        result_line = next(line for line in dumped if line["type"] == "tool/result")
        assert result_line["data"]["meta"] == {
            "length": 4,
            "tags": ["a", "b"],
        }
        seen = model.requests[1].messages[-1]
        assert "length" not in repr(seen)


# -- T-L3: system prompt assembly --------------------------------------------------


async def test_system_prompt_renders_the_runtime_persona_with_variables(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L3 / R2.7, R7.51, R7.52: the runtime's persona, its variables, model and cwd interpolated."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(
        model,
        system_prompt="You are {{product}}, running {{model}}.\nWork in {{ cwd }}.",
        variables={"product": "retinue"},
    ) as rt:
        agent = await rt.create_agent("a", OPTIONS, cwd="/abs/work")
        result = await agent.ask("hi")
        assert result.reason.kind == "completed"
        expected = "You are retinue, running scripted.\nWork in /abs/work."
        assert model.requests[0].system == expected
        header = agent.session.current_header
        assert header is not None
        assert header.system == expected


async def test_an_agent_system_prompt_replaces_the_runtime_persona(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.7: an agent's ``system_prompt`` shadows the runtime's persona; one without keeps it."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model, system_prompt="You are a generic assistant.") as rt:
        persona = AgentOptions(model="scripted", system_prompt="You are a poet in {{cwd}}.")
        poet = await rt.create_agent("poet", persona, cwd="/srv")
        plain = await rt.create_agent("plain", OPTIONS)
        await poet.ask("hi")
        await plain.ask("hi")
    sent = {request.session_id: request.system for request in model.requests}
    assert sent == {poet.id: "You are a poet in /srv.", plain.id: "You are a generic assistant."}


async def test_system_prompt_strict_variable_failure_fails_the_turn_and_the_driver_continues(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L3 / R7.52: an unknown or valueless variable ends the turn ``error``; later turns still run."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model, system_prompt="Work in {{cwd}}.") as rt:
        broken = await rt.create_agent("broken", OPTIONS)
        fine = await rt.create_agent("fine", OPTIONS, cwd="/srv")
        first = await broken.ask("one")
        second = await broken.ask("two")
        for result in (first, second):
            assert result.reason.kind == "error"
            assert result.reason.code == "PROMPT_RENDER"
            assert "cwd" in (result.reason.message or "")
        assert [r.turn for r in (first, second)] == [1, 2]
        assert of_type(broken.session.events, "step/start") == []
        assert broken.status == "idle"
        ok = await fine.ask("three")
        assert ok.reason.kind == "completed"
        assert model.requests[-1].system == "Work in /srv."
        assert len(model.requests) == 1
        check_session_invariants(broken.session.events)


async def test_system_prompt_unknown_variable_in_persona_fails_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L3 / R7.52: an unknown ``{{name}}`` in the persona is an error, never sent raw to the model."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent(
            "a", AgentOptions(model="scripted", system_prompt="Hi {{nobody}}")
        )
        result = await agent.ask("hi")
        assert result.reason.kind == "error"
        assert "nobody" in (result.reason.message or "")
        assert model.requests == []


async def test_system_prompt_model_can_come_from_an_agent_request_listener(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L3, T-X6 / R2.8, R7.33: with no model option an ``agent/request`` listener supplies one."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", AgentOptions())

        async def supply(_agent: object, _turn: int, _step: int, config: Any, next_: Next) -> Any:
            return attrs.evolve(await next_(), model="scripted")

        rt.hooks.on("agent/request", supply, agent=agent)
        result = await agent.ask("hi")
        assert result.reason.kind == "completed"
        assert model.requests[0].model == "scripted"


async def test_system_prompt_missing_model_fails_the_first_step_clearly(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X6 / R2.8, R7.33: no model and no listener → turn ``error`` naming both ways to supply one."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", AgentOptions())
        result = await agent.ask("hi")
        assert result.reason.kind == "error"
        assert result.reason.code == "NO_MODEL"
        assert "AgentOptions(model=" in (result.reason.message or "")
        assert "agent/request" in (result.reason.message or "")
        assert model.requests == []


@pytest.mark.parametrize("prompt", [None, "", "   \n  "])
async def test_system_prompt_empty_assembly_sends_no_system_field(
    autojump_clock: trio.testing.MockClock, prompt: str | None
) -> None:
    """T-L3 / R7.53: an empty rendered prompt means no ``system``; no tools means no ``tools``."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model, system_prompt=prompt) as rt:
        agent = await rt.create_agent("a", AgentOptions(model="scripted", system_prompt=prompt))
        await agent.ask("hi")
        request = model.requests[0]
        assert request.system is None
        assert request.tools == ()
        header = agent.session.current_header
        assert header is not None
        assert header.system is None
        assert header.tools == ()
        dumped: Any = next(
            line for line in agent.session.dump() if line["type"] == "request/header"
        )
        assert "system" not in dumped["data"]["header"]


# -- T-L4: chunks -------------------------------------------------------------------


async def test_chunks_are_recorded_verbatim_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L4 / R7.36: every streamed chunk is one ``assistant/chunk``; the message points at them."""
    from retinue._stream import STOP, BlockEnd, BlockStart, Finish, TextDelta, UsageChunk

    chunks = (
        BlockStart(0, "text"),
        TextDelta(0, "Hel"),
        TextDelta(0, "lo"),
        BlockEnd(0, Text("Hello")),
        UsageChunk(Usage(5, 2)),
        Finish(STOP),
    )
    model = ScriptedModel([RawChunks(chunks)])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hi")
        assert result.text == "Hello"
        events = of_type(agent.session.events, "assistant/chunk")
        recorded = [event.data.chunk for event in events if isinstance(event.data, AssistantChunk)]
        assert recorded == list(chunks)
        assert all(event.data.turn == 1 and event.data.step == 1 for event in events)  # type: ignore[union-attr]
        message = of_type(agent.session.events, "assistant/message")[0]
        assert message.source_event_seqs == tuple(event.seq for event in events)
        assert message.data.usage == Usage(5, 2)  # type: ignore[union-attr]


# -- T-L5: steering -----------------------------------------------------------------


async def test_steering_between_steps_continues_the_same_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L5 / R3.9, R7.24: a steer during a step is logged before ``step/end`` and runs a next step."""
    model = ScriptedModel([Reply("first", delay=5), Reply("second")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(1)
        assert agent.status == "running"
        agent.steer("also this", source="planner")
        events = await idle_events(agent)
        assert types_without_chunks(events) == [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "assistant/message",
            "steering/message",
            "step/end",
            "step/start",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        steering = of_type(events, "steering/message")[0].data
        assert steering == SteeringMessage(
            1, (Text("also this"),), MessageSource("plugin", "planner")
        )
        last = model.requests[1].messages[-1]
        assert last.role == "user"
        assert _texts(last) == ['<steering source="plugin">', "also this", "</steering>"]
        assert turn_ends(events) == ["completed"]


# -- T-L6: inject -------------------------------------------------------------------


async def test_inject_while_idle_is_a_one_shot_turn_seen_by_the_next_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L6 / R2.18, R2.22: an idle inject is its own turn; the next turn numbers after it."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.inject("background facts", source="memory")
        assert types_without_chunks(agent.session.events) == [
            "turn/start",
            "context/message",
            "turn/end",
        ]
        start = agent.session.events[0].data
        assert isinstance(start, TurnStart)
        assert (start.turn, start.trigger.kind) == (1, "injection")
        result = await agent.ask("question")
        assert result.turn == 2
        assert model.statistics().calls == 1
        first = model.requests[0].messages[0]
        assert _texts(first) == ['<context source="plugin">', "background facts", "</context>"]
        assert [m.role for m in model.requests[0].messages] == ["user", "user"]


async def test_inject_while_running_adds_no_turn(autojump_clock: trio.testing.MockClock) -> None:
    """T-L6 / R2.17: an inject during a step joins the open turn and the next request only."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("echo", '{"text": "x"}', id="c1")], delay=5), Reply("done")]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(1)
        agent.inject("late fact")
        events = await idle_events(agent)
        assert len(of_type(events, "turn/start")) == 1
        assert len(of_type(events, "context/message")) == 1
        first, second = model.requests
        assert all("late fact" not in _texts(m) for m in first.messages)
        assert any("late fact" in _texts(m) for m in second.messages)


# -- T-L7: continuation ----------------------------------------------------------------


async def test_continuation_listener_forces_another_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L7 / R7.26: ``Continue`` after a plain reply runs one more step in the same turn."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        defaults: list[object] = []

        async def once(_agent: object, _turn: int, default: object, next_: Next) -> Any:
            defaults.append(default)
            decision = await next_()
            return Continue() if len(defaults) == 1 else decision

        rt.hooks.on("agent/turn-continuation", once, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        assert result.text == "two"
        assert defaults == [Stop(), Stop()]
        assert len(of_type(agent.session.events, "step/start")) == 2
        assert len(of_type(agent.session.events, "turn/start")) == 1


async def test_continuation_listener_stops_despite_tool_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L7 / R7.26: ``Stop`` wins over a step with tool calls; results are logged, no next request."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("echo", '{"text": "x"}', id="c1")]), Reply("never")]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        seen: list[object] = []

        def veto(_agent: object, _turn: int, default: object, _next: Next) -> Stop:
            seen.append(default)
            return Stop()

        rt.hooks.on("agent/turn-continuation", veto, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        assert seen == [Continue()]
        assert model.statistics().calls == 1
        assert len(of_type(agent.session.events, "tool/result")) == 1
        check_session_invariants(agent.session.events)


async def test_continuation_reason_becomes_steering_of_the_next_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L7, T-I4 / R7.27: ``Continue(reason)`` is logged as ``steering/message`` at the top of the next step."""
    model = ScriptedModel([Reply("draft"), Reply("final")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        calls = 0

        def nudge(_agent: object, _turn: int, _default: object, _next: Next) -> Any:
            nonlocal calls
            calls += 1
            if calls == 1:
                return Continue(HookContext("check your work", MessageSource("plugin", "critic")))
            return Stop()

        rt.hooks.on("agent/turn-continuation", nudge, agent=agent)
        await agent.ask("go")
        kinds = types_without_chunks(agent.session.events)
        assert kinds[kinds.index("step/end") + 1] == "steering/message"
        assert kinds[kinds.index("step/end") + 2] == "step/start"
        assert _texts(model.requests[1].messages[-1]) == [
            '<steering source="plugin">',
            "check your work",
            "</steering>",
        ]


async def test_continuation_reason_with_a_str_source_names_a_plugin(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R1.3, R7.27: a ``HookContext`` source given as a str names a plugin, as on the agent verbs."""
    model = ScriptedModel([Reply("draft"), Reply("final")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def nudge(_agent: object, turn: int, _default: object, _next: Next) -> Any:
            steps = len(of_type(agent.session.events, "step/start"))
            return Continue(HookContext("check your work", "critic")) if steps == 1 else Stop()

        rt.hooks.on("agent/turn-continuation", nudge, agent=agent)
        with trio.fail_after(60):
            result = await agent.ask("go")
        assert result.reason.kind == "completed", result.reason
        assert result.text == "final"
        (steering,) = of_type(agent.session.events, "steering/message")
        assert isinstance(steering.data, SteeringMessage)
        assert steering.data.source == MessageSource("plugin", "critic")


def test_hook_context_refuses_a_source_of_another_type() -> None:
    """R1.3: a source that is no MessageSource, str or None is refused when the context is built."""
    with pytest.raises(TypeError, match="source must be a MessageSource, a str naming a plugin"):
        HookContext("text", 42)  # type: ignore[arg-type]
    assert HookContext("text").source == MessageSource()
    assert HookContext("text", None).source == MessageSource()
