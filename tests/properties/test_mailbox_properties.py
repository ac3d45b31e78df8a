"""The inbox as a model-checked FIFO pair, and T-P3 through a live agent (SPEC 3, R4.16).

Properties: any sequence of mailbox operations behaves like two plain lists;
any mixed schedule of sends and settles (waiting for idle, sleeping, letting
the driver run) loses no prompt, numbers turns 1..k contiguously, runs at most
one turn per send, and delivers every prompt once, in send order.
"""

from __future__ import annotations

import itertools

import trio
import trio.testing
from hypothesis import example, given, strategies as st

import retinue
from retinue import MessageSource
from retinue._content import as_content
from retinue.mailbox import Mailbox, MailboxItem
from retinue.session import TurnStart, UserMessage
from retinue.testing import Reply, ScriptedModel, check_session_invariants
from tests.helpers import OPTIONS

MAILBOX_OPS = st.lists(
    st.sampled_from(["enqueue", "steer", "drain_queued", "drain_steering", "requeue", "clear"]),
    max_size=40,
)


@given(ops=MAILBOX_OPS)
# Steering left over and requeued behind a later send: rare among random draws.
@example(ops=["steer", "enqueue", "requeue", "drain_queued"])
@example(ops=["enqueue", "steer", "enqueue", "requeue", "drain_steering", "drain_queued"])
def test_mailbox_behaves_like_two_fifo_lists(ops: list[str]) -> None:
    """R3.2-R3.6, R3.10: every operation matches a model of two lists; nothing is reordered or
    lost, and requeued steering rejoins the queued items in the order both arrived."""
    mailbox = Mailbox()
    queued: list[str] = []
    steering: list[str] = []
    for number, op in enumerate(ops):
        text = f"m{number}"
        if op == "enqueue":
            mailbox.enqueue(MailboxItem(as_content(text), MessageSource()))
            queued.append(text)
        elif op == "steer":
            mailbox.steer(MailboxItem(as_content(text), MessageSource()))
            steering.append(text)
        elif op == "drain_queued":
            assert [i.content[0].text for i in mailbox.drain_queued()] == queued  # type: ignore[union-attr]
            queued.clear()
        elif op == "drain_steering":
            assert [i.content[0].text for i in mailbox.drain_steering()] == steering  # type: ignore[union-attr]
            steering.clear()
        elif op == "requeue":
            mailbox.requeue_steering()
            # Arrival order across both FIFOs: each text is numbered as it came.
            queued[:] = sorted([*queued, *steering], key=lambda text: int(text[1:]))
            steering.clear()
        else:
            mailbox.clear()
            queued.clear()
            steering.clear()
        assert mailbox.has_queued == bool(queued)
        assert mailbox.has_steering == bool(steering)
        stats = mailbox.statistics()
        assert (stats.queued, stats.steering) == (len(queued), len(steering))


SCHEDULE = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.integers(1, 3)),
        st.tuples(st.just("settle"), st.just(0)),
        st.tuples(st.just("sleep"), st.integers(0, 4)),
        st.tuples(st.just("yield"), st.just(0)),
    ),
    min_size=1,
    max_size=20,
)


async def _schedule(ops: list[tuple[str, int]], delays: list[int]) -> None:
    model = ScriptedModel([Reply("ok", delay=d) for d in delays] + [Reply("ok")], repeat_last=True)
    sent: list[str] = []
    numbers = itertools.count()
    answers: dict[str, retinue.TurnResult] = {}
    with trio.fail_after(10_000):
        async with retinue.open_runtime(models=model) as rt:
            agent = await rt.create_agent("p", OPTIONS)
            async with trio.open_nursery() as nursery:
                for op, value in ops:
                    if op == "send":
                        for _ in range(value):
                            text = f"m{next(numbers)}"

                            async def ask(text: str = text) -> None:
                                # Recorded in the same step as the send: ask enqueues
                                # before its first checkpoint, so this is the send order.
                                sent.append(text)
                                answers[text] = await agent.ask(text)

                            nursery.start_soon(ask)
                    elif op == "settle":
                        await trio.testing.wait_all_tasks_blocked()
                        await agent.wait_idle()
                    elif op == "sleep":
                        await trio.sleep(value)
                    else:
                        await trio.lowlevel.checkpoint()
            await agent.wait_idle()
            events = agent.session.events
    check_session_invariants(events)
    turns = [e.data.turn for e in events if isinstance(e.data, TurnStart)]
    assert turns == list(range(1, len(turns) + 1)), "turn numbers are contiguous from 1"
    assert 1 <= len(turns) <= len(sent), "at most one turn per send"
    delivered = [e.data.content[0].text for e in events if isinstance(e.data, UserMessage)]  # type: ignore[union-attr]
    assert delivered == sent, "every prompt delivered once, in send order"
    assert sorted(answers) == sorted(sent), "no ask was lost"
    assert all(result.reason.kind == "completed" for result in answers.values())
    assert {result.turn for result in answers.values()} == set(turns)


@given(ops=SCHEDULE, delays=st.lists(st.integers(0, 3), max_size=6))
def test_mixed_sends_and_settles_lose_nothing(
    ops: list[tuple[str, int]], delays: list[int]
) -> None:
    """T-P3 / R3.8, R4.16: no loss, contiguous turn numbers, at most one turn per send."""
    if not any(op == "send" for op, _ in ops):
        ops = [*ops, ("send", 1)]
    trio.run(_schedule, ops, delays, clock=trio.testing.MockClock(autojump_threshold=0))
