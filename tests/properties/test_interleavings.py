"""Random interleavings of verbs, model outcomes and raising listeners keep the log sound.

Properties (over send / steer / inject / cancel / dispose, raising listeners on
every seam, and random ScriptedModel outcomes): the log invariants hold, every
tool call has exactly one result, the driver never dies, and no queued message
is lost except those ``cancel`` (or disposal) discards.
"""

from __future__ import annotations

import contextlib
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import given, strategies as st

import retinue
from retinue.providers import Usage
from retinue.session import TurnEndReason
from retinue.testing import (
    CallTools,
    CutAtMaxTokens,
    FinishAborted,
    FinishWithError,
    Hang,
    RaiseMidStream,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from tests.helpers import OPTIONS, nap

SEAMS = [
    "agent/status",
    "agent/queued",
    "agent/error",
    "agent/prompt-submit",
    "agent/session-prefix",
    "agent/pre-step",
    "agent/request",
    "agent/step-result",
    "agent/turn-continuation",
    "agent/turn-stop",
    "tools/pre-execute",
    "tools/execute",
    "tools/post-execute",
    "tools/result",
    "session/event",
    "session/flush",
]


@retinue.tool
async def tally(n: int) -> str:
    """Count something, exclusively (async: a worker thread would let autojump race ahead).

    Args:
        n: A number.
    """
    return str(n + 1)


def _calls(count: int) -> list[ToolCallSpec]:
    return [
        ToolCallSpec("nap", '{"seconds": 2}') if i % 3 else ToolCallSpec("tally", '{"n": 1}')
        for i in range(count)
    ]


OUTCOMES = st.one_of(
    st.builds(lambda n: Reply("fine", chunks=n, usage=Usage(1, 1)), st.integers(1, 4)),
    st.builds(lambda n: CallTools(_calls(n)), st.integers(1, 4)),
    st.builds(lambda n: CutAtMaxTokens("cut", tool_calls=_calls(n)), st.integers(0, 2)),
    st.just(FinishWithError("boom", "E_TEST")),
    st.just(FinishAborted()),
    st.just(RaiseMidStream(RuntimeError("stream broke"), after_chunks=1)),
    st.builds(lambda d: Hang("hanging", delay=d), st.floats(0, 3)),
    st.builds(lambda d: Reply("slow", delay=d), st.floats(0, 5)),
)

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.integers(0, 99)),
        st.tuples(st.just("steer"), st.integers(0, 99)),
        st.tuples(st.just("inject"), st.integers(0, 99)),
        st.tuples(st.just("cancel"), st.just(0)),
        st.tuples(st.just("sleep"), st.integers(0, 8)),
        st.tuples(st.just("dispose"), st.just(0)),
    ),
    min_size=1,
    max_size=25,
)


def _raiser(seam: str) -> Any:
    def listener(*_args: object) -> None:
        raise RuntimeError(f"listener on {seam} raised")

    return listener


async def _scenario(ops: list[tuple[str, int]], outcomes: list[Any], raising: list[str]) -> None:
    model = ScriptedModel(
        {"scripted": [*outcomes, Reply("fine")], "final": [Reply("final answer")]}, repeat_last=True
    )
    with trio.fail_after(10_000):
        async with retinue.open_runtime(
            models=model, tools=[nap, tally], max_parallel_tool_calls=2
        ) as rt:
            agent = await rt.create_agent("p", OPTIONS)
            removers = [rt.hooks.on(seam, _raiser(seam), agent=agent) for seam in raising]
            asks: dict[int, retinue.TurnResult] = {}
            discards_possible: set[int] = set()
            disposed = False
            async with trio.open_nursery() as nursery:
                for op, value in ops:
                    if disposed:
                        break
                    if op == "send":
                        text = f"m{len(asks)}-{value}"
                        key = len(asks)
                        asks[key] = None  # type: ignore[assignment]

                        async def ask(key: int = key, text: str = text) -> None:
                            try:
                                asks[key] = await agent.ask(text)
                            except retinue.AgentDisposedError:
                                # The send was refused, not lost: the agent was gone first.
                                asks[key] = retinue.TurnResult(0, TurnEndReason.disposed())

                        nursery.start_soon(ask)
                        await trio.lowlevel.checkpoint()
                    elif op == "steer":
                        agent.steer(f"steer-{value}")
                    elif op == "inject":
                        with contextlib.suppress(RuntimeError):
                            agent.inject(f"ctx-{value}")
                    elif op == "cancel":
                        discards_possible.update(asks)
                        agent.cancel("property cancel")
                    elif op == "sleep":
                        await trio.sleep(value)
                    else:
                        discards_possible.update(asks)
                        await agent.dispose()
                        disposed = True
                if not disposed:
                    await trio.testing.wait_all_tasks_blocked()
                    agent.cancel("drain")
                    discards_possible.update(asks)
            events = agent.session.events
            check_session_invariants(events)
            check_no_dangling_tool_calls(events)
            for key, result in asks.items():
                assert result is not None, f"ask {key} never resolved"
                if result.turn == 0:
                    assert key in discards_possible, f"ask {key} lost without a cancel: {result}"
            if not disposed:
                for remove in removers:
                    remove()

                async def final_model(
                    _agent: object, _turn: int, _step: int, config: Any, _next: Any
                ) -> Any:
                    return attrs.evolve(config, model="final")

                rt.hooks.on("agent/request", final_model, agent=agent)
                await agent.wait_idle()
                final = await agent.ask("final question")
                assert final.turn > 0
                assert agent.status == "idle"
                check_session_invariants(agent.session.events)


@given(
    ops=OPS,
    outcomes=st.lists(OUTCOMES, max_size=8),
    raising=st.lists(st.sampled_from(SEAMS), max_size=3, unique=True),
)
def test_interleavings_keep_the_log_sound(
    ops: list[tuple[str, int]], outcomes: list[Any], raising: list[str]
) -> None:
    """R4.13-R4.16, R7.48, R2.25: any interleaving keeps invariants; nothing queued is lost silently."""
    trio.run(_scenario, ops, outcomes, raising, clock=trio.testing.MockClock(autojump_threshold=0))
