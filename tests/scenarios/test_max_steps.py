"""``AgentOptions(max_steps=N)``: a turn takes at most N steps.

A turn whose model still asks for tools after its N-th step, or that steering
would carry into another step, ends ``error`` with code ``MAX_STEPS``; every
tool call it made has its result, and the agent goes on with its next prompt.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, ConfigError
from retinue.actors import StepLimitError
from retinue.session import ToolResultEvent
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import echo, last_end_reason, of_type, runtime, texts


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


async def test_steering_past_max_steps_ends_the_turn_and_stays_in_the_history(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.21, R7.45: with ``max_steps=1``, steering sent during the only step would carry
    the turn into a second: the turn ends ``MAX_STEPS`` instead, with the step's answer.
    The steering is logged in that turn, so the next turn's request carries it."""
    model = ScriptedModel([Reply("first", delay=5), Reply("second")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", AgentOptions(model="scripted", max_steps=1))
        async with trio.open_nursery() as nursery:
            asked: list[retinue.TurnResult] = []

            async def ask() -> None:
                asked.append(await agent.ask("start"))

            nursery.start_soon(ask)
            await trio.sleep(1)
            agent.steer("also this")
        assert (asked[0].reason.kind, asked[0].reason.code) == ("error", "MAX_STEPS")
        assert asked[0].text == "first"
        assert len(model.requests) == 1
        steered = of_type(agent.session.events, "steering/message")
        assert [event.data.turn for event in steered] == [1]  # type: ignore[union-attr]
        second = await agent.ask("next")
        assert second.text == "second"
        sent = [texts(message.content) for message in model.requests[1].messages]
        assert sent == ["start", "first", '<steering source="user">also this</steering>', "next"]
        check_session_invariants(agent.session.events)


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "3", 2**53])
def test_max_steps_out_of_range_is_refused_naming_it(value: object) -> None:
    """R2.5: ``max_steps`` is a positive int (at most 2**53-1) or ``None``."""
    with pytest.raises(ConfigError, match="max_steps"):
        AgentOptions(max_steps=value)  # type: ignore[arg-type]
