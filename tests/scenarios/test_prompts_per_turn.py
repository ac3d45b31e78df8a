"""``AgentOptions(max_prompts_per_turn=N)``: a turn takes at most N queued prompts.

By default a turn takes every prompt queued when it starts (R3.8), so two
callers asking a busy agent share one turn and one answer. With 1, each
prompt gets a turn, and each caller its own answer, in the order they asked.
"""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel
import trio.testing

import retinue
from retinue import AgentOptions, ConfigError, TurnResult
from retinue.testing import Reply, ScriptedModel, check_session_invariants
from tests.helpers import of_type, runtime, texts, turn_ends


async def ask_while_busy(
    options: AgentOptions, prompts: list[str], replies: list[str]
) -> tuple[dict[str, TurnResult], retinue.Agent, ScriptedModel]:
    """Ask an agent *prompts*, each from a task of its own, while a first turn runs."""
    model = ScriptedModel([Reply("busy", delay=10), *(Reply(text) for text in replies)])
    answers: dict[str, TurnResult] = {}
    async with runtime(model) as rt:
        agent = await rt.create_agent("worker", options)
        async with trio.open_nursery() as nursery:

            async def ask(prompt: str) -> None:
                answers[prompt] = await agent.ask(prompt)

            nursery.start_soon(ask, "first")
            await trio.sleep(1)
            for prompt in prompts:
                nursery.start_soon(ask, prompt)
                await trio.lowlevel.checkpoint()
        check_session_invariants(agent.session.events)
    return answers, agent, model


def prompts_of_each_turn(agent: retinue.Agent) -> list[list[str]]:
    turns: list[list[str]] = []
    for event in agent.session.events:
        if event.type == "turn/start":
            turns.append([])
        elif event.type == "user/message":
            turns[-1].append(texts(event.data.content))  # type: ignore[union-attr]
    return turns


async def test_one_prompt_per_turn_gives_each_caller_its_own_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.8: with ``max_prompts_per_turn=1``, two prompts queued behind a running turn run
    a turn each, in the order sent, and each ``ask`` gets its own turn's answer."""
    options = AgentOptions(model="scripted", max_prompts_per_turn=1)
    answers, agent, model = await ask_while_busy(options, ["a", "b"], ["for a", "for b"])
    assert prompts_of_each_turn(agent) == [["first"], ["a"], ["b"]]
    assert {prompt: result.text for prompt, result in answers.items()} == {
        "first": "busy",
        "a": "for a",
        "b": "for b",
    }
    assert answers["a"].turn != answers["b"].turn
    assert turn_ends(agent.session.events) == ["completed"] * 3
    assert len(model.requests) == 3


async def test_by_default_prompts_queued_together_share_a_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.8: without a limit the two queued prompts are one turn, both asks its answer."""
    answers, agent, _ = await ask_while_busy(
        AgentOptions(model="scripted"), ["a", "b"], ["for both"]
    )
    assert prompts_of_each_turn(agent) == [["first"], ["a", "b"]]
    assert answers["a"].text == answers["b"].text == "for both"


async def test_a_limit_of_two_takes_prompts_two_at_a_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R3.8: ``max_prompts_per_turn=2`` with three queued: a turn of two, then one of one."""
    options = AgentOptions(model="scripted", max_prompts_per_turn=2)
    answers, agent, _ = await ask_while_busy(options, ["a", "b", "c"], ["ab", "c"])
    assert prompts_of_each_turn(agent) == [["first"], ["a", "b"], ["c"]]
    assert [answers[prompt].text for prompt in "abc"] == ["ab", "ab", "c"]
    assert len(of_type(agent.session.events, "turn/end")) == 3


async def test_cancel_still_drops_the_prompts_left_queued(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.25: a cancel drops every prompt still queued, those a limit left behind too."""
    model = ScriptedModel([Reply("slow", delay=10), Reply("after")])
    async with runtime(model) as rt:
        agent = await rt.create_agent(
            "worker", AgentOptions(model="scripted", max_prompts_per_turn=1)
        )
        for prompt in ("one", "two", "three"):
            agent.send(prompt)
        await trio.sleep(1)
        agent.cancel("stop")
        await agent.wait_idle()
        assert prompts_of_each_turn(agent) == [["one"]]
        assert (await agent.ask("again")).text == "after"


@pytest.mark.parametrize("value", [0, -2, 1.0, False, "1"])
def test_max_prompts_per_turn_out_of_range_is_refused_naming_it(value: object) -> None:
    """R2.5: ``max_prompts_per_turn`` is a positive int or ``None``."""
    with pytest.raises(ConfigError, match="max_prompts_per_turn"):
        AgentOptions(max_prompts_per_turn=value)  # type: ignore[arg-type]
