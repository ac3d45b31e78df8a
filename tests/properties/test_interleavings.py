"""Random interleavings of verbs, model outcomes and raising listeners keep the log sound.

Properties (over send / steer / inject / cancel / dispose, raising listeners on
every seam, and random ScriptedModel outcomes): the log invariants hold, every
tool call has exactly one result, the driver never dies, and no queued message
is lost except those ``cancel`` (or disposal) discards: an ask is answered with
turn 0 exactly when it was still queued (no message turn had opened since it was
sent) at a ``cancel`` or ``dispose``; every other ask ends in the logged turn that
took it, whose reason it reports, and that turn logged its prompt unless it died
before submitting any (R7.11). Likewise every steer is logged once (as steering, or as
a prompt when no turn was running to take it) unless a cancel or dispose found it
unlogged, and one it found so is never logged later (R2.25, R3.10, R3.12).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import example, given, strategies as st

import retinue
from retinue.providers import Usage
from retinue.session import (
    Event,
    PromptBlocked,
    SteeringMessage,
    StepStart,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    UserMessage,
)
from retinue.testing import (
    CallTools,
    CutAtMaxTokens,
    FinishAborted,
    FinishWithError,
    Hang,
    RaiseMidStream,
    RebuildCheckedModel,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_no_dangling_tool_calls,
    check_session_invariants,
)
from tests.helpers import OPTIONS, nap, texts

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
        # Several asks sent before the driver wakes: one turn takes them all (R3.8).
        st.tuples(st.just("burst"), st.integers(2, 3)),
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


def _message_turns(events: Sequence[Event]) -> int:
    """How many turns opened on queued messages: each one drained the whole queue (R3.8)."""
    return sum(
        1
        for event in events
        if isinstance(event.data, TurnStart) and event.data.trigger.kind == "message"
    )


def _turn_span(events: Sequence[Event], turn: int) -> tuple[list[Event], TurnEndReason]:
    """The events of message turn *turn*, from its ``turn/start`` to its ``turn/end``, and its reason."""
    starts = [
        i
        for i, event in enumerate(events)
        if isinstance(event.data, TurnStart)
        and event.data.turn == turn
        and event.data.trigger.kind == "message"
    ]
    assert len(starts) == 1, f"turn {turn} did not open exactly once on queued messages"
    for end in range(starts[0] + 1, len(events)):
        data = events[end].data
        if isinstance(data, TurnEnd) and data.turn == turn:
            return list(events[starts[0] : end + 1]), data.reason
    raise AssertionError(f"turn {turn} never closed")


# Virtual seconds past every delay a scenario can hold a turn for, short of a hang.
_DRAIN_WAIT = 1_000

# A raising listener here fails a turn before it logs its prompts: ``session/event``
# raises out of the ``turn/start`` append, ``agent/prompt-submit`` out of the submission.
_FAIL_BEFORE_PROMPTS = frozenset({"session/event", "agent/prompt-submit"})


def _logged_texts(events: Sequence[Event]) -> list[str]:
    """The text of every prompt and steer the log holds, blocked ones included."""
    return [
        texts(event.data.content)
        for event in events
        if isinstance(event.data, (UserMessage, SteeringMessage, PromptBlocked))
    ]


def _check_steers(
    events: Sequence[Event], steers: list[str], discarded: set[str], raising: list[str]
) -> None:
    """Each steer a cancel or dispose did not find unlogged is logged exactly once (at most
    once where a raising listener may fail a turn before it logs what it took); one it
    found unlogged never is."""
    logged = _logged_texts(events)
    exact = not _FAIL_BEFORE_PROMPTS & set(raising)
    for text in steers:
        count = logged.count(text)
        if text in discarded:
            assert count == 0, f"{text} was discarded by a cancel, yet delivered: {logged}"
        else:
            assert count == 1 if exact else count <= 1, f"{text} logged {count} times: {logged}"


def _check_asks(
    events: Sequence[Event],
    asks: dict[int, retinue.TurnResult | None],
    texts_of: dict[int, str],
    discardable: set[int],
    refused: set[int],
    *,
    disposed: bool,
    raising: list[str],
) -> None:
    """Only prompts queued when a cancel or dispose landed are discarded; each other ask
    ends in the turn that took it, and that turn logged its prompt."""
    for key, result in asks.items():
        if key in refused:
            assert disposed, f"ask {key} refused though the agent was never disposed"
            continue
        assert result is not None, f"ask {key} never resolved"
        if key in discardable:
            # Queued (no turn had taken it) when cancel or dispose cleared the queue.
            assert result.turn == 0, f"ask {key} was queued at a cancel, yet ran: {result}"
            assert result.reason.kind in ("aborted", "disposed"), result
            continue
        assert result.turn > 0, f"ask {key} lost though no cancel found it queued: {result}"
        span, reason = _turn_span(events, result.turn)
        assert reason == result.reason, f"ask {key}: {result} but the log ends it {reason}"
        logged = [
            texts(event.data.content)
            for event in span
            if isinstance(event.data, (UserMessage, PromptBlocked))
        ]
        if texts_of[key] in logged:
            continue
        # Unlogged only if a raising listener failed the turn before its first prompt:
        # turn/start and the prompts are logged with no checkpoint between (the
        # listeners here are synchronous), so no cancel or dispose lands in between,
        # and every prompt of a batch is logged before a step opens (R7.11, R7.14).
        assert reason.kind == "error", (
            f"ask {key}'s prompt missing from turn {result.turn}, which ended {reason}"
        )
        assert _FAIL_BEFORE_PROMPTS & set(raising), (
            f"ask {key}'s turn {result.turn} failed before its prompt with no listener"
            f" raising there: {reason}"
        )
        assert not logged, f"turn {result.turn} logged {logged} but lost ask {key}'s prompt"
        assert not any(isinstance(event.data, StepStart) for event in span), (
            f"turn {result.turn} ran a step without ask {key}'s prompt"
        )


async def _scenario(ops: list[tuple[str, int]], outcomes: list[Any], raising: list[str]) -> None:
    model = ScriptedModel(
        {"scripted": [*outcomes, Reply("fine")], "final": [Reply("final answer")]}, repeat_last=True
    )
    checked = RebuildCheckedModel(model)
    with trio.fail_after(10_000):
        async with retinue.open_runtime(
            models=checked, tools=[nap, tally], max_parallel_tool_calls=2
        ) as rt:
            checked.follow(rt)
            agent = await rt.create_agent("p", OPTIONS)
            removers = [rt.hooks.on(seam, _raiser(seam), agent=agent) for seam in raising]  # type: ignore[call-overload]
            asks: dict[int, retinue.TurnResult | None] = {}
            texts_of: dict[int, str] = {}
            # Message turns opened when each ask was queued: while no further one has
            # opened, the ask is still queued (every message turn drains the queue).
            queued_at: dict[int, int] = {}
            discardable: set[int] = set()
            refused: set[int] = set()
            steers: list[str] = []
            discarded_steers: set[str] = set()

            def clear_queue() -> None:
                """A cancel or dispose just cleared the queue: what it held may be discarded."""
                opened = _message_turns(agent.session.events)
                discardable.update(key for key, at in queued_at.items() if at == opened)
                logged = set(_logged_texts(agent.session.events))
                discarded_steers.update(text for text in steers if text not in logged)

            async def ask(key: int) -> None:
                # No checkpoint between this count and the enqueue inside ask().
                queued_at[key] = _message_turns(agent.session.events)
                try:
                    asks[key] = await agent.ask(texts_of[key])
                except retinue.AgentDisposedError:
                    # The send was refused, not lost: the agent was gone first.
                    del queued_at[key]
                    refused.add(key)

            disposed = False
            async with trio.open_nursery() as nursery:
                for op, value in ops:
                    if disposed:
                        break
                    if op in ("send", "burst"):
                        for _ in range(value if op == "burst" else 1):
                            key = len(asks)
                            texts_of[key] = f"m{key}-{value}"
                            asks[key] = None
                            nursery.start_soon(ask, key)
                        await trio.lowlevel.checkpoint()
                    elif op == "steer":
                        steers.append(f"steer-{len(steers)}-{value}")
                        agent.steer(steers[-1])
                    elif op == "inject":
                        with contextlib.suppress(RuntimeError):
                            agent.inject(f"ctx-{value}")
                    elif op == "cancel":
                        agent.cancel("property cancel")
                        clear_queue()
                    elif op == "sleep":
                        await trio.sleep(value)
                    else:
                        await agent.dispose()
                        clear_queue()
                        disposed = True
                if not disposed:
                    # Run to idle, so that a steer or prompt the runtime dropped shows as
                    # lost; only a turn that cannot end (a hung model) is cancelled.
                    await trio.testing.wait_all_tasks_blocked()
                    with trio.move_on_after(_DRAIN_WAIT) as waiting:
                        await agent.wait_idle()
                    if waiting.cancelled_caught:
                        agent.cancel("drain")
                        clear_queue()
            events = agent.session.events
            check_session_invariants(events)
            check_no_dangling_tool_calls(events)
            _check_asks(
                events, asks, texts_of, discardable, refused, disposed=disposed, raising=raising
            )
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
            _check_steers(agent.session.events, steers, discarded_steers, raising)
    # R8.9 on every request the loop built, whatever the interleaving.
    assert checked.failures == []
    assert checked.checked == len(model.requests)


@example(  # a batch of three, then one sent during its turn and cancelled while queued
    ops=[("burst", 3), ("send", 4), ("cancel", 0), ("send", 5)],
    outcomes=[Reply("slow", delay=2)],
    raising=[],
)
@given(
    ops=OPS,
    outcomes=st.lists(OUTCOMES, max_size=8),
    raising=st.lists(st.sampled_from(SEAMS), max_size=3, unique=True),
)
def test_interleavings_keep_the_log_sound(
    ops: list[tuple[str, int]], outcomes: list[Any], raising: list[str]
) -> None:
    """R4.13-R4.16, R7.48, R2.25, R3.8: any interleaving keeps invariants; only prompts still
    queued at a cancel or dispose are discarded, every other ask ends in the logged turn that took it."""
    trio.run(_scenario, ops, outcomes, raising, clock=trio.testing.MockClock(autojump_threshold=0))
