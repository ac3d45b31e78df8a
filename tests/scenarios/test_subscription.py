"""``agent.subscribe()``: a live, bounded feed of the session log (SPEC 2, R4.10)."""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue.actors import Subscription, SubscriptionOverflowError
from retinue.session import Event, Session
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    DelegatingStore,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import OPTIONS, runtime, types


@retinue.tool
async def slow_cleanup(seconds: float) -> str:
    """Work, and take a while to clean up when cancelled.

    Args:
        seconds: How long the work takes.
    """
    try:
        await trio.sleep(seconds)
    finally:
        with trio.CancelScope(shield=True):
            await trio.sleep(1)
    return "done"


async def _collect(subscription: Subscription, into: list[Event], pause: float) -> None:
    async for event in subscription:
        into.append(event)
        await trio.sleep(pause)


async def test_a_subscriber_idle_during_disposal_still_gets_the_closing_events(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.10, R2.36: the feed ends after the turn closed by disposal, never before its last event.

    The subscriber has read everything and asks for more after disposal began
    but before the tool's cleanup let the driver log the closing events.
    """
    model = ScriptedModel([CallTools([ToolCallSpec("slow_cleanup", '{"seconds": 100}')])])
    heard: list[Event] = []
    resume = trio.Event()

    async def collect(subscription: Subscription) -> None:
        async for event in subscription:
            heard.append(event)
            if event.type == "tool/call":
                await resume.wait()

    async with runtime(model, tools=[slow_cleanup]) as rt, trio.open_nursery() as nursery:
        agent = await rt.create_agent("a", OPTIONS)
        nursery.start_soon(collect, agent.subscribe())
        agent.send("go")
        await trio.sleep(5)
        nursery.start_soon(agent.dispose)
        await trio.sleep(0.5)
        assert agent.status == "disposed"
        assert types(agent.session.events)[-1] == "tool/call", "closing events came too soon"
        resume.set()
    assert [event.seq for event in heard] == [event.seq for event in agent.session.events]
    assert types(heard)[-3:] == ["tool/result", "step/end", "turn/end"]
    check_session_invariants(heard)


async def test_dispose_after_a_subscription_was_closed_completes_and_flushes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.35, R12.9: disposal never raises, whatever became of earlier subscriptions."""
    store = MemoryStore()
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        async with agent.subscribe():
            await agent.ask("one")
        left_open = agent.subscribe()
        left_open.close()
        left_open.close()
        await agent.ask("two")
        await agent.dispose()
        assert agent.status == "disposed"
        assert store.statistics().buffered_events == 0
        assert store.statistics().committed_events == len(agent.session.events)


async def test_closing_a_subscription_ends_another_tasks_iteration(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``close()`` from any task ends the feed with a clean ``StopAsyncIteration``."""
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        subscription = agent.subscribe()
        heard: list[Event] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_collect, subscription, heard, 0)
            await agent.ask("one")
            await trio.sleep(1)
            subscription.close()
        assert types(heard)[0] == "turn/start"
        assert types(heard)[-1] == "turn/end"


async def test_a_subscriber_that_falls_behind_gets_what_came_before_the_gap(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Overflow is reported after the buffered events, so the gap's position is known."""
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        subscription = agent.subscribe(buffer=2)
        await agent.ask("one")
        heard: list[Event] = []
        with pytest.raises(SubscriptionOverflowError):
            await _collect(subscription, heard, 0)
        assert types(heard) == ["turn/start", "user/message"]
        with pytest.raises(ValueError, match="at least 1"):
            agent.subscribe(buffer=0)


async def test_an_overflowed_reader_catches_up_from_the_seq_the_error_names(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The overflow names the first event not delivered: the events from it on, taken from
    the session, then a new feed, give every event once and in order while the agent runs."""
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        subscription = agent.subscribe(buffer=3)
        await agent.ask("one")
        heard: list[Event] = []
        with pytest.raises(SubscriptionOverflowError) as caught:
            await _collect(subscription, heard, 0)
        first = heard[0].seq
        assert caught.value.next_seq == first + 3 == heard[-1].seq + 1
        assert f"from seq {first + 3} on" in str(caught.value)
        heard.extend(agent.session.events[caught.value.next_seq :])
        async with agent.subscribe() as events:
            agent.send("two")
            await agent.wait_idle()
            await agent.dispose()
            heard.extend([event async for event in events])
        assert [event.seq for event in heard] == list(range(first, len(agent.session.events)))
        assert types(heard).count("turn/end") == 2


@pytest.mark.parametrize("buffer", [True, 1.5, "3", None], ids=repr)
async def test_a_subscription_buffer_that_is_not_an_int_is_refused_naming_it(
    autojump_clock: trio.testing.MockClock, buffer: object
) -> None:
    """A bool or a float is not taken as a count, and a str or None does not fail on a bare
    comparison naming no argument: each is a TypeError naming the buffer."""
    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        with pytest.raises(TypeError) as caught:
            agent.subscribe(buffer=buffer)  # type: ignore[arg-type]
        assert str(caught.value) == f"a subscription buffer is an int, got {buffer!r}"


async def test_subscribing_to_a_torn_down_agent_ends_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A feed opened after teardown has nothing to wait for."""
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("one")
        await agent.dispose()
        heard: list[Event] = []
        await _collect(agent.subscribe(), heard, 0)
        assert heard == []


async def test_subscribing_during_the_final_detach_ends_with_the_teardown(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: a subscription made while the teardown waits for the store's final detach ends when
    the teardown does, rather than joining a list already ended and waiting forever.
    """
    detaching = trio.Event()

    class _SlowDetach(DelegatingStore):
        async def detach(self, session: Session) -> None:
            detaching.set()
            await trio.sleep(1)
            await self.store.detach(session)

    async with runtime(ScriptedModel([Reply("ok")]), store=_SlowDetach(MemoryStore())) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("hi")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.dispose)
            await detaching.wait()
            late = agent.subscribe()
        with trio.move_on_after(60) as waited:
            assert [event async for event in late] == []
        assert not waited.cancelled_caught


async def test_a_listener_that_appends_while_an_event_is_announced_keeps_the_feed_in_seq_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.10, R7.20: a ``session/event`` listener may inject on ``step/start``; its event
    is announced before the one that caused it, but the feed follows the log's seq order.
    """
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:

        def inject_on_step_start(session: Session, event: Event) -> None:
            if event.type == "step/start":
                agent_of = rt.agents.get(session.id)
                assert agent_of is not None
                agent_of.inject("a note")

        rt.hooks.on("session/event", inject_on_step_start)
        agent = await rt.create_agent("a", OPTIONS)
        subscription = agent.subscribe()
        await agent.ask("one")
        await agent.dispose()
        heard: list[Event] = []
        await _collect(subscription, heard, 0)
    assert [event.seq for event in heard] == list(range(len(agent.session.events)))
    assert "context/message" in types(heard)


async def test_closing_a_subscription_from_a_listener_leaves_the_turn_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.1, R7.48: ``close()`` never blocks and never raises, even while the session is
    announcing an event; the turn it was called from ends ``completed``.
    """
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:
        subscriptions: list[Subscription] = []

        def close_on_step_end(_session: Session, event: Event) -> None:
            if event.type == "step/end":
                subscriptions[0].close()

        rt.hooks.on("session/event", close_on_step_end)
        agent = await rt.create_agent("a", OPTIONS)
        errors: list[object] = []
        rt.hooks.on("agent/error", lambda *args: errors.append(args[-1]), agent=agent)
        subscriptions.append(agent.subscribe())
        result = await agent.ask("one")
    assert result.reason.kind == "completed"
    assert errors == []


async def test_feeds_dropped_on_an_idle_agent_leave_its_session_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A feed nobody refers to any more stops observing the session when it is collected:
    dropped on an idle agent, feeds piled up until its next append, and each new one copied
    them all (a server subscribing per client made subscribing quadratic)."""
    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        session: Any = agent.session  # the observers it holds
        before = len(session._observers)
        for _ in range(200):
            agent.subscribe()
        assert len(session._observers) == before
        async with agent.subscribe() as feed:
            await agent.ask("hi")
            assert len(session._observers) == before + 1
            assert (await feed.__anext__()).type == "turn/start"


async def test_a_feed_collected_in_another_threads_trio_run_leaves_the_session_on_its_own(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A dropped feed in a reference cycle is freed by whichever thread collects; one
    collected inside a worker thread's own ``trio.run`` (a sync tool body's) leaves
    the session's observers alone, which only the agent's run may change: the feed
    leaves at the agent's next append instead."""
    async with runtime(ScriptedModel([Reply("hi")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        session: Any = agent.session  # the observers it holds
        before = len(session._observers)
        gc.disable()
        try:
            feed: Any = agent.subscribe()
            feed.cycle = [feed]  # only the cyclic collector frees it
            del feed

            def collect_in_a_run_of_its_own() -> None:
                async def collect() -> None:
                    await trio.lowlevel.checkpoint()
                    gc.collect()

                trio.run(collect)

            # Joined at once, not awaited: the autojump clock would take a wait for a
            # thread for idleness and jump to the deadline.
            worker = threading.Thread(target=collect_in_a_run_of_its_own)
            worker.start()
            worker.join()
            assert len(session._observers) == before + 1
        finally:
            gc.enable()
        assert (await agent.ask("hi")).reason.kind == "completed"
        assert len(session._observers) == before


async def test_closing_a_feed_that_fell_behind_ends_it_without_an_overflow(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``close()`` drops what was not read, the gap included: iteration ends cleanly."""
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        subscription = agent.subscribe(buffer=2)
        await agent.ask("one")
        subscription.close()
        assert [event async for event in subscription] == []


async def test_closing_a_feed_of_a_torn_down_agent_drops_the_unread_events(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Teardown ends the feed after the last event; a later ``close()`` still drops the unread ones."""
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        subscription = agent.subscribe()
        await agent.ask("one")
        await agent.dispose()
        subscription.close()
        assert [event async for event in subscription] == []


async def test_leaving_the_async_with_block_closes_the_feed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``async with agent.subscribe()``: events logged after the block are not delivered."""
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        async with agent.subscribe() as subscription:
            pass
        await agent.ask("one")
        assert [event async for event in subscription] == []


async def test_a_feed_read_inside_another_trio_run_is_refused_and_the_agent_goes_on() -> None:
    """R4.10: a feed made in the runtime's run and read inside another thread's ``trio.run`` is
    refused when its reader would wait, and the agent's turns go on.

    A reader parked in the other run would be woken by the agent's next append, from this run, where
    trio's bare ``AssertionError`` would fail that append and the agent's turn with it.
    """
    model = ScriptedModel([Reply("one")])
    async with retinue.open_runtime(models=model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        feed = agent.subscribe()

        async def read_one() -> object:
            async for event in feed:
                return event
            return None

        with trio.fail_after(10):  # real time: a worker thread runs its own trio.run
            with pytest.raises(RuntimeError, match=r"not inside another thread's trio\.run"):
                await trio.to_thread.run_sync(trio.run, read_one, abandon_on_cancel=True)
            result = await agent.ask("hi")
        feed.close()
    assert (result.reason.kind, result.text) == ("completed", "one")
    check_session_invariants(agent.session.events)


async def test_a_feed_closed_off_its_runtime_s_run_is_refused_and_still_read() -> None:
    """R4.10: a feed closed from a worker thread or inside another thread's ``trio.run`` is refused
    before anything changes, and its reader, parked in the runtime's run, goes on reading. Such a
    close must not unsubscribe the feed and then fail to wake its reader (trio's ``RuntimeError``,
    or a bare ``AssertionError``), which would wait for nothing ever after."""
    model = ScriptedModel([Reply("one")])
    with trio.fail_after(10):  # real time: worker threads run
        async with retinue.open_runtime(models=model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            feed = agent.subscribe()
            read: list[str] = []

            async def reader() -> None:
                async for event in feed:
                    read.append(event.type)
                    if event.type == "turn/end":
                        return

            async def close_in_its_own_run() -> None:
                feed.close()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(reader)
                await trio.sleep(0.05)
                for call in (feed.close, functools.partial(trio.run, close_in_its_own_run)):
                    with pytest.raises(RuntimeError, match="closed in the trio run"):
                        await trio.to_thread.run_sync(call)
                result = await agent.ask("hi")
            feed.close()
    assert (result.text, read[0], read[-1]) == ("one", "turn/start", "turn/end")


async def test_a_feed_offers_close_and_aclose_and_no_other_way_to_end_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.10, DESIGN 3: a feed's public names are ``close`` and ``aclose`` beside its
    iteration. It also
    offered ``end``, its agent's teardown step, which nothing checked: called from a worker
    thread on a live agent's feed, it unsubscribed the feed, then failed to wake the reader
    parked in it, which waited for nothing ever after."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        async with agent.subscribe() as feed:
            assert {name for name in dir(feed) if not name.startswith("_")} == {"aclose", "close"}


async def test_a_feed_closes_through_aclose_as_a_trio_channel_does(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.10: ``contextlib.aclosing(agent.subscribe())`` reads the feed and closes it at the
    block's end, and ``aclose`` is a checkpoint that ends iteration: events logged after
    it are not delivered."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        async with contextlib.aclosing(agent.subscribe()) as feed:
            await agent.ask("first")
            first = [event async for event in _until_turn_end(feed)]
        assert types(first)[-1] == "turn/end"
        await agent.ask("second")
        with pytest.raises(StopAsyncIteration):
            await feed.__anext__()
        with trio.CancelScope() as scope:
            scope.cancel()
            with pytest.raises(trio.Cancelled):
                await agent.subscribe().aclose()


async def _until_turn_end(feed: Subscription) -> Any:
    async for event in feed:
        yield event
        if event.type == "turn/end":
            return


async def test_a_subscription_taken_in_agent_created_follows_every_agent_whole(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.10, R12.5: a dashboard that subscribes in an ``agent/created`` listener, before each
    driver starts, and reads in a task of its own, hears every agent, those created after it
    registered too, each from its first event to its last, in seq order, none missed."""
    model = ScriptedModel([Reply("hi")], repeat_last=True)
    heard: dict[str, list[int]] = {}
    with trio.fail_after(60):
        async with trio.open_nursery() as dashboard, runtime(model) as rt:

            async def follow(agent: retinue.Agent, subscription: Subscription) -> None:
                async with subscription:
                    async for event in subscription:
                        heard.setdefault(agent.id, []).append(event.seq)

            def on_created(agent: retinue.Agent) -> None:
                dashboard.start_soon(follow, agent, agent.subscribe())

            rt.hooks.on("agent/created", on_created)
            agents = [await rt.create_agent(f"w{i}", OPTIONS) for i in range(3)]
            for agent in agents:
                await agent.ask("hello")
            logs = {agent.id: len(agent.session.events) for agent in agents}
            for agent in agents:
                await agent.dispose()
            await trio.testing.wait_all_tasks_blocked()
    for agent in agents:
        assert logs[agent.id] > 0
        assert heard[agent.id] == list(range(len(agent.session.events))), agent.id
