"""``AgentOptions(max_steps=N)``: a turn takes at most N steps.

A turn whose model still asks for tools after its N-th step, or that steering
would carry into another step, ends ``error`` with code ``MAX_STEPS``; every
tool call it made has its result, and the agent goes on with its next prompt.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, ConfigError
from retinue.actors import StepLimitError
from retinue.hooks import Continue, HookContext, Stop
from retinue.session import ToolResultEvent
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import Next, echo, last_end_reason, of_type, runtime, texts, turn_ends


def calls(count: int) -> list[CallTools | Reply]:
    return [CallTools([ToolCallSpec("echo", '{"text": "again"}')]) for _ in range(count)]


async def test_a_turn_whose_model_keeps_calling_tools_ends_at_max_steps(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.12, R7.45: with ``max_steps=3`` and a model that asks for a tool at every step,
    the turn ends ``error`` ``MAX_STEPS`` after its third step, the model asked three
    times and each call answered; the agent's next prompt runs as usual."""
    model = ScriptedModel([*calls(3), Reply("done")])
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", AgentOptions(model="scripted", max_steps=3))
        first = await agent.ask("loop")
        assert first.reason.kind == "error"
        assert first.reason.code == "MAX_STEPS"
        assert first.reason.step == 3
        assert "max_steps (3)" in (first.reason.message or "")
        assert isinstance(first.error, StepLimitError)
        assert len(model.requests) == 3
        events = agent.session.events
        assert len(of_type(events, "step/start")) == 3
        assert len(of_type(events, "tool/result")) == 3
        assert all(
            isinstance(event.data, ToolResultEvent) and not event.data.is_error
            for event in of_type(events, "tool/result")
        )
        second = await agent.ask("and now?")
        assert (second.reason.kind, second.text) == ("completed", "done")
        check_session_invariants(agent.session.events)
        assert last_end_reason(agent.session.events).kind == "completed"


async def test_a_turn_within_max_steps_is_untouched(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.45: a turn that answers at its last allowed step completes with its answer."""
    model = ScriptedModel([*calls(1), Reply("answer")])
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", AgentOptions(model="scripted", max_steps=2))
        result = await agent.ask("go")
    assert (result.reason.kind, result.text) == ("completed", "answer")
    assert len(model.requests) == 2


def stop_the_turn(_agent: retinue.Agent, _turn: int) -> Stop:
    return Stop()


async def steer_during_first_step(
    model: ScriptedModel, *, turn_stop: bool = False
) -> tuple[retinue.TurnResult, retinue.Agent]:
    """Ask an agent with ``max_steps=1``; steer it while its one step runs."""
    async with runtime(model, tools=[echo]) as rt:
        if turn_stop:
            rt.hooks.on("agent/turn-stop", stop_the_turn)
        agent = await rt.create_agent("a", AgentOptions(model="scripted", max_steps=1))
        async with trio.open_nursery() as nursery:
            asked: list[retinue.TurnResult] = []

            async def ask() -> None:
                asked.append(await agent.ask("start"))

            nursery.start_soon(ask)
            await trio.sleep(1)
            agent.steer("also this")
        await agent.wait_idle()
        check_session_invariants(agent.session.events)
    return asked[0], agent


async def test_steering_at_the_last_step_is_the_next_turns_prompt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.10, R7.45: steering sent during a turn's last allowed step does not carry the
    turn on: the turn keeps its answer (``completed``), and the steering, left queued,
    is the next turn's prompt, which the model answers."""
    model = ScriptedModel([Reply("first", delay=5), Reply("second")])
    first, agent = await steer_during_first_step(model)
    assert (first.reason.kind, first.text) == ("completed", "first")
    assert prompts(agent) == ["start", "also this"]
    assert turn_ends(agent.session.events) == ["completed", "completed"]
    assert texts(model.requests[1].messages[-1].content) == "also this"


async def test_steering_at_a_capped_step_with_calls_is_the_next_turns_prompt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.10, R7.45: a last step whose tool calls end the turn ``MAX_STEPS`` leaves the
    steering sent meanwhile queued: the next turn takes it as its prompt."""
    model = ScriptedModel([*calls(1), Reply("second")])
    first, agent = await steer_during_first_step(model)
    assert (first.reason.kind, first.reason.code) == ("error", "MAX_STEPS")
    assert prompts(agent) == ["start", "also this"]
    assert turn_ends(agent.session.events) == ["error", "completed"]
    assert of_type(agent.session.events, "steering/message") == []


@pytest.mark.parametrize("model", ["reply", "calls"])
async def test_a_turn_stop_at_the_last_step_keeps_the_steering_for_the_next_turn(
    autojump_clock: trio.testing.MockClock, model: str
) -> None:
    """R3.10, R7.37: a turn-stop listener's ``Stop()`` discards the steering a turn took
    no step for, but a last step under ``max_steps`` takes none: what it left queued is
    still the next turn's prompt, as the cap promises, where the stop dropped it."""
    slow_calls = CallTools([ToolCallSpec("echo", '{"text": "x"}')], delay=5)
    first_step = Reply("first", delay=5) if model == "reply" else slow_calls
    script = ScriptedModel([first_step, Reply("second")])
    first, agent = await steer_during_first_step(script, turn_stop=True)
    assert first.reason.kind == "completed"
    assert prompts(agent) == ["start", "also this"]
    assert texts(script.requests[1].messages[-1].content) == "also this"


async def test_a_turn_stop_still_drops_steering_a_listener_sent_after_the_last_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.11, R7.37: steering a continuation listener sends after a capped turn's last step
    is dropped by a turn-stop's ``Stop()``, as without a cap: it starts no turn, where
    an agent steered so every turn ran turns for ever."""

    def steer_on(agent: retinue.Agent, _turn: int, _decision: object, next_: Next) -> Any:
        agent.steer("and one more thing")
        return next_()

    model = ScriptedModel([Reply("first", delay=1)] * 5)
    async with runtime(model) as rt:
        rt.hooks.on("agent/turn-continuation", steer_on)
        rt.hooks.on("agent/turn-stop", stop_the_turn)
        agent = await rt.create_agent("a", AgentOptions(model="scripted", max_steps=1))
        result = await agent.ask("go")
        await agent.wait_idle()
        assert (result.reason.kind, agent.status) == ("completed", "idle")
        assert turn_ends(agent.session.events) == ["completed"]
        assert len(model.requests) == 1


async def test_a_listeners_nudge_at_the_last_step_does_not_start_another_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.27, R7.45: a turn-continuation listener returning ``Continue(reason=...)`` at
    the last allowed step ends the turn ``MAX_STEPS`` and its reason is dropped: it
    becomes no prompt, so the agent goes idle after the one turn, where it looped."""

    def nudge(_agent: Any, _turn: int, _decision: object, _next: Next) -> Any:
        return Continue(reason=HookContext("keep going", "nudger"))

    model = ScriptedModel([*calls(5)])
    async with runtime(model, tools=[echo]) as rt:
        rt.hooks.on("agent/turn-continuation", nudge)
        agent = await rt.create_agent("a", AgentOptions(model="scripted", max_steps=2))
        result = await agent.ask("go")
        await agent.wait_idle()
        assert (result.reason.code, agent.status) == ("MAX_STEPS", "idle")
        assert "max_steps (2)" in (result.reason.message or "")
        assert turn_ends(agent.session.events) == ["error"]
        assert len(model.requests) == 2
        check_session_invariants(agent.session.events)


def prompts(agent: retinue.Agent) -> list[str]:
    return [
        texts(event.data.content)  # type: ignore[union-attr]
        for event in of_type(agent.session.events, "user/message")
    ]


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "3", 2**53])
def test_max_steps_out_of_range_is_refused_naming_it(value: object) -> None:
    """R2.5: ``max_steps`` is a positive int (at most 2**53-1) or ``None``."""
    with pytest.raises(ConfigError, match="max_steps"):
        AgentOptions(max_steps=value)  # type: ignore[arg-type]
