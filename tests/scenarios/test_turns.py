"""The turn and step loop end to end (SPEC 7; T-L2..T-L12).

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
    ToolCall,
)
from retinue.loop import summarize_turn
from retinue.providers import ProviderError, Usage
from retinue.session import (
    AssistantChunk,
    AssistantMessage,
    Event,
    Session,
    SessionHeader,
    SteeringMessage,
    ToolResultEvent,
    TurnStart,
    UserMessage,
)
from retinue.testing import (
    CallTools,
    CutAtMaxTokens,
    Hang,
    RaiseMidStream,
    RawChunks,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_history_replay,
    check_session_invariants,
)
from retinue.tools import ToolOutput
from tests.helpers import (
    OPTIONS,
    Next,
    echo,
    idle_events,
    of_type,
    record_statuses,
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


# -- T-L9: pre-step -------------------------------------------------------------------


async def test_pre_step_fires_once_per_step_before_step_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L9 / R7.19: pre-step runs once per step, before that step's ``step/start``, with the prompt."""
    model = ScriptedModel([CallTools([ToolCallSpec("echo", '{"text": "x"}')]), Reply("done")])
    async with runtime(model, tools=[echo], system_prompt="Be brief.") as rt:
        agent = await rt.create_agent("a", OPTIONS)
        calls: list[tuple[int, int, str, int, int]] = []

        def pre_step(
            _agent: object, turn: int, step: int, system: str, prefix: object, _signal: object
        ) -> None:
            starts = len(of_type(agent.session.events, "step/start"))
            calls.append((turn, step, system, len(prefix), starts))  # type: ignore[arg-type]

        rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        await agent.ask("go")
        assert calls == [(1, 1, "Be brief.", 0, 0), (1, 2, "Be brief.", 0, 1)]


async def test_pre_step_raising_listener_fails_the_turn_and_the_driver_continues(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L9 / R7.47: a raising pre-step ends the turn ``error`` with no step; the next turn runs."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        failures = 0

        def pre_step(*_args: object) -> None:
            nonlocal failures
            failures += 1
            if failures == 1:
                raise RuntimeError("pre-step exploded")

        rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        first = await agent.ask("one")
        assert first.reason.kind == "error"
        assert (first.reason.step, first.reason.message) == (1, "pre-step exploded")
        assert types_without_chunks(agent.session.events) == [
            "turn/start",
            "user/message",
            "turn/end",
        ]
        second = await agent.ask("two")
        assert second.reason.kind == "completed"
        check_session_invariants(agent.session.events)


# -- T-L10: max tokens ------------------------------------------------------------------


async def test_max_tokens_last_step_cut_ends_the_turn_max_tokens(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L10 / R7.23, R7.36: a cut last step ends the turn ``max-tokens``; its text is kept."""
    model = ScriptedModel([CutAtMaxTokens("partial answ", usage=Usage(9, 4))])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason.kind == "max-tokens"
        assert result.text == "partial answ"
        assert result.usage == Usage(9, 4)
        assert turn_ends(agent.session.events) == ["max-tokens"]


async def test_max_tokens_earlier_cut_step_wins_after_a_completed_step_and_does_not_leak(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L10 / R7.23, R7.39: a cut step keeps the turn ``max-tokens`` after a later normal step, for that turn only."""
    model = ScriptedModel([CutAtMaxTokens("cut"), Reply("finished"), Reply("next turn")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        steps = 0

        def continue_once(_agent: object, _turn: int, _default: object, _next: Next) -> Any:
            nonlocal steps
            steps += 1
            return Continue() if steps == 1 else Stop()

        rt.hooks.on("agent/turn-continuation", continue_once, agent=agent)
        first = await agent.ask("go")
        assert first.reason.kind == "max-tokens"
        assert first.text == "finished"
        second = await agent.ask("again")
        assert second.reason.kind == "completed"
        assert turn_ends(agent.session.events) == ["max-tokens", "completed"]


async def test_max_tokens_truncated_tool_calls_are_never_dispatched(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L10 / R7.36: a cut step drops its tool calls (even ones step-result adds); safe text is kept."""
    ran: list[str] = []

    @retinue.tool
    async def risky(text: str) -> str:
        """Must not run on truncated input.

        Args:
            text: Anything.
        """
        ran.append(text)
        await trio.lowlevel.checkpoint()
        return "ran"

    model = ScriptedModel(
        [CutAtMaxTokens("safe text", tool_calls=[ToolCallSpec("risky", '{"text": "trun', id="c1")])]
    )
    async with runtime(model, tools=[risky]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        seen: list[Message] = []

        async def add_call(
            _agent: object, _turn: int, _step: int, message: Message, next_: Next
        ) -> Message:
            seen.append(message)
            result = await next_()
            return Message("assistant", (*result.content, ToolCall("c2", "risky", '{"text": "x"}')))

        rt.hooks.on("agent/step-result", add_call, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "max-tokens"
        assert seen[0].content == (Text("safe text"),)
        events = agent.session.events
        message = of_type(events, "assistant/message")[0].data
        assert isinstance(message, AssistantMessage)
        assert message.content == (Text("safe text"),)
        assert of_type(events, "tool/call") == []
        assert of_type(events, "tool/result") == []
        assert ran == []
        assert model.statistics().calls == 1


@pytest.mark.parametrize("step", [CutAtMaxTokens(""), Reply("")], ids=["max-tokens", "stop"])
async def test_max_tokens_empty_message_without_usage_is_not_logged(
    autojump_clock: trio.testing.MockClock, step: Any
) -> None:
    """T-L10 / R7.36: an empty reply without usage logs no ``assistant/message`` (max-tokens and stop)."""
    model = ScriptedModel([step])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert of_type(agent.session.events, "assistant/message") == []
        assert result.text == ""
        assert [m.role for m in agent.session.derive_messages()] == ["user"]
        check_session_invariants(agent.session.events)


@pytest.mark.parametrize(
    "step",
    [CutAtMaxTokens("", usage=Usage(3, 0)), Reply("", usage=Usage(3, 0))],
    ids=["max-tokens", "stop"],
)
async def test_max_tokens_empty_message_with_usage_hosts_the_usage_only(
    autojump_clock: trio.testing.MockClock, step: Any
) -> None:
    """T-L10 / R7.36, R5.2: an empty reply with usage is logged to carry it, but never reaches history."""
    model = ScriptedModel([step])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        messages = of_type(agent.session.events, "assistant/message")
        assert len(messages) == 1
        assert messages[0].data == AssistantMessage(1, 1, (), Usage(3, 0))
        assert result.usage == Usage(3, 0)
        assert [m.role for m in agent.session.derive_messages()] == ["user"]


# -- T-L11: raising step/end observer -----------------------------------------------------


async def test_raising_step_end_observer_fails_the_turn_not_completed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L11 / R7.25: a ``session/event`` observer raising on ``step/end`` ends the turn ``error``."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("echo", '{"text": "x"}')]), Reply("never"), Reply("ok")]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        armed = True

        def observer(_session: Session, event: Event) -> None:
            if armed and event.type == "step/end":
                raise RuntimeError("step/end observer failed")

        rt.hooks.on("session/event", observer, agent=agent)
        first = await agent.ask("go")
        assert first.reason.kind == "error"
        assert (first.reason.step, first.reason.message) == (1, "step/end observer failed")
        assert model.statistics().calls == 1
        kinds = types_without_chunks(agent.session.events)
        assert kinds[-2:] == ["step/end", "turn/end"]
        armed = False
        second = await agent.ask("again")
        assert second.reason.kind == "completed"
        check_session_invariants(agent.session.events)


# -- T-L12: the driver over many turns --------------------------------------------------------


async def test_sends_during_a_turn_are_batched_into_the_next_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L12 / R3.8: prompts queued while a turn runs form the next turn, one user message each, in order."""
    model = ScriptedModel([Reply("one", delay=5), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses = record_statuses(rt, agent)
        agent.send("first")
        await trio.sleep(1)
        agent.send("second")
        agent.send("third")
        events = await idle_events(agent)
        starts = [e.data.turn for e in of_type(events, "turn/start")]  # type: ignore[union-attr]
        assert starts == [1, 2]
        second_turn = events[[e.type for e in events].index("turn/start", 1) :]
        prompts = [e.data.content[0].text for e in of_type(second_turn, "user/message")]  # type: ignore[union-attr]
        assert prompts == ["second", "third"]
        assert statuses == ["running", "idle"]


async def test_flush_is_awaited_before_the_turn_settles(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L12 / R7.2, R7.49: ask and wait_idle return only after the post-``turn/end`` flush finished."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        flushed: list[float] = []

        async def slow_flush(_agent: object, session: Session) -> None:
            assert session.events[-1].type == "turn/end"
            await trio.sleep(7)
            flushed.append(trio.current_time())

        rt.hooks.on("session/flush", slow_flush, agent=agent)
        start = trio.current_time()
        await agent.ask("hi")
        assert len(flushed) == 1
        assert trio.current_time() - start >= 7
        agent.send("again")
        await agent.wait_idle()
        assert len(flushed) == 2
        assert trio.current_time() == flushed[-1]


async def test_model_error_reports_agent_error_and_ends_the_turn_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L12 / R7.22, R7.45: a stream that raises is reported on ``agent/error`` and ends the turn ``error``."""
    boom = retinue.ModelError("provider exploded", code="UPSTREAM_500")
    model = ScriptedModel([RaiseMidStream(boom, after_chunks=2), Reply("recovered")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        reported: list[tuple[int, int, BaseException]] = []
        rt.hooks.on(
            "agent/error",
            lambda _a, turn, step, error: reported.append((turn, step, error)),
            agent=agent,
        )
        result = await agent.ask("go")
        assert result.reason == retinue.session.TurnEndReason.error(
            1, "provider exploded", "UPSTREAM_500"
        )
        assert reported == [(1, 1, boom)]
        assert result.error is boom
        assert len(of_type(agent.session.events, "assistant/chunk")) == 2
        assert of_type(agent.session.events, "assistant/message") == []
        again = await agent.ask("again")
        assert again.reason.kind == "completed"
        assert again.error is None
        check_session_invariants(agent.session.events)


async def test_an_ask_gets_the_provider_error_that_ended_its_turn_with_its_retry_after(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.12, R7.45: the log keeps an error end's message and code; the ask's result also
    carries the exception, so a caller can read a provider's ``retry_after`` (which the
    log does not keep) and know when to send again."""
    refused = ProviderError(
        "rate limited", code="rate_limit_exceeded", status=429, retry_after=600.0
    )
    model = ScriptedModel([RaiseMidStream(refused), Reply("later")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert (result.reason.kind, result.reason.code) == ("error", "rate_limit_exceeded")
        assert isinstance(result.error, ProviderError)
        assert result.error is refused
        assert result.error.retry_after == 600.0
        # Equality is the logged end's: the exception is what the log could not keep.
        assert result == retinue.TurnResult(result.turn, result.reason, result.text, result.usage)
        assert (await agent.ask("again")).error is None


async def test_runtime_exit_mid_turn_stops_the_loop(autojump_clock: trio.testing.MockClock) -> None:
    """T-L12 / R2.36, R12.10: leaving the runtime while a turn runs ends it ``disposed``; the driver exits."""
    model = ScriptedModel([Hang("thinking")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(3)
        agent.send("queued, never run")
    assert agent.status == "disposed"
    assert turn_ends(agent.session.events) == ["disposed"]
    assert len(of_type(agent.session.events, "turn/start")) == 1
    assert model.statistics().calls == 1
    check_session_invariants(agent.session.events)


async def test_replaying_the_log_yields_identical_history(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L12 / R5.6: a fresh session seeded with the log derives exactly the live history."""
    model = ScriptedModel(
        [
            CallTools(
                [ToolCallSpec("echo", '{"text": "a"}'), ToolCallSpec("echo", '{"text": "b"}')],
                text="calling",
            ),
            Reply("done", reasoning="thought"),
            Reply("second turn"),
        ]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.inject("a fact")
        await agent.ask("go")
        agent.steer("steer as send")
        events = await idle_events(agent)
        replayed = Session.from_events(SessionHeader("replay", 0), events)
        assert list(replayed.derive_messages()) == list(agent.session.derive_messages())
        assert replayed.last_turn == agent.session.last_turn
        assert replayed.current_header == agent.session.current_header
        check_history_replay(events)
        check_session_invariants(events)
        assert isinstance(of_type(events, "user/message")[-1].data, UserMessage)


@pytest.mark.parametrize(
    ("last", "text"),
    [(Reply("final", usage=Usage(4, 3)), "final"), (Reply("", usage=Usage(4, 3)), "looking")],
    ids=["last-step-text", "earlier-step-text"],
)
async def test_ask_returns_the_last_text_and_the_summed_usage_the_log_holds(
    autojump_clock: trio.testing.MockClock, last: Any, text: str
) -> None:
    """DESIGN 3 (``ask -> TurnResult``): the turn's last non-empty assistant text, its summed usage."""
    model = ScriptedModel(
        [
            CallTools([ToolCallSpec("echo", '{"text": "x"}')], text="looking", usage=Usage(2, 1)),
            last,
        ]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert (result.text, result.usage) == (text, Usage(6, 4))
        assert (result.text, result.usage) == summarize_turn(agent.session.events, 1)
