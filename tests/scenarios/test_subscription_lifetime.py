"""A subscription dropped without ``close()`` is released, like a trio memory channel."""

from __future__ import annotations

import gc
import weakref

import trio
import trio.testing

import retinue
from retinue.actors import Subscription
from retinue.session import Event, Session
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime, types


def _model() -> ScriptedModel:
    return ScriptedModel([Reply("ok", chunks=5)], repeat_last=True)


async def _read_one_turn(agent: retinue.Agent) -> weakref.ref[Subscription]:
    """The per-request pattern: subscribe, send, read to ``turn/end``, drop the feed."""
    feed = agent.subscribe()
    agent.send("hi")
    async for event in feed:
        if event.type == "turn/end":
            break
    return weakref.ref(feed)


async def _collect(feed: Subscription, into: list[Event]) -> None:
    async for event in feed:
        into.append(event)


async def test_feeds_dropped_without_close_are_released_and_stop_being_notified(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Neither the agent nor its session keeps a feed nobody refers to: each append
    would otherwise notify every feed ever dropped, and the turns slow down.
    """
    async with runtime(_model()) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        observers = len(agent.session._observers)
        dropped = [await _read_one_turn(agent) for _ in range(20)]
        gc.collect()
        assert [feed() for feed in dropped] == [None] * 20
        await agent.ask("one more")  # its appends retire the observers of dropped feeds
        assert len(agent.session._observers) == observers
        heard: list[Event] = []
        async with agent.subscribe() as feed, trio.open_nursery() as nursery:
            nursery.start_soon(_collect, feed, heard)
            await agent.ask("still heard")
            await trio.sleep(1)
            feed.close()
        assert types(heard)[0] == "turn/start"
        assert types(heard)[-1] == "turn/end"


async def test_a_feed_dropped_while_an_event_is_announced_leaves_the_other_feeds_whole(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.10: a feed released mid-turn, between two live ones, costs them no event and
    no reordering: both still read the whole log in seq order.
    """
    async with runtime(_model()) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        first: list[Event] = []
        last: list[Event] = []
        held: list[Subscription] = []
        released: list[weakref.ref[Subscription]] = []

        def drop_on_step_start(_session: Session, event: Event) -> None:
            if event.type == "step/start" and held:
                released.append(weakref.ref(held.pop()))
                gc.collect()

        rt.hooks.on("session/event", drop_on_step_start)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_collect, agent.subscribe(), first)
            held.append(agent.subscribe())
            nursery.start_soon(_collect, agent.subscribe(), last)
            await agent.ask("one")
            assert [feed() for feed in released] == [None], "the agent kept the dropped feed"
            await agent.dispose()
    everything = [event.seq for event in agent.session.events]
    assert [event.seq for event in first] == everything
    assert [event.seq for event in last] == everything


async def test_dispose_ends_the_live_feeds_after_the_dropped_ones_were_released(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.35, R12.9: teardown still ends every live feed after the agent's last event,
    whatever became of the feeds dropped before it.
    """
    async with runtime(_model()) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        kept = agent.subscribe()
        dropped = [await _read_one_turn(agent) for _ in range(3)]
        gc.collect()
        assert [feed() for feed in dropped] == [None] * 3
        await agent.dispose()
        heard: list[Event] = []
        with trio.move_on_after(60) as waited:
            await _collect(kept, heard)
        assert not waited.cancelled_caught
    assert [event.seq for event in heard] == [event.seq for event in agent.session.events]


async def test_the_handle_offers_its_verbs_and_no_way_to_end_its_feeds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.1, DESIGN 3: a live agent's public names are its properties and verbs, not
    ``end_subscriptions``, the teardown's own step: called on a live agent, it would end every feed,
    and every later one at once, while the agent went on."""
    async with runtime(_model()) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        public = {name for name in dir(agent) if not name.startswith("_")}
        assert public == {
            "ask",
            "cancel",
            "dispose",
            "id",
            "inject",
            "options",
            "send",
            "session",
            "status",
            "steer",
            "subscribe",
            "wait_idle",
        }


async def test_per_agent_state_kept_weakly_goes_with_a_disposed_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.35, R12.9: an orchestrator may keep per-agent state beside the handles, weakly
    (a WeakKeyDictionary, as for trio's tasks), and it goes once a disposed agent is
    dropped. The handle could not be weakly referenced: TypeError."""
    notes: weakref.WeakKeyDictionary[retinue.Agent, str] = weakref.WeakKeyDictionary()

    async def work_once(rt: retinue.Runtime, index: int) -> None:
        agent = await rt.create_agent("worker", OPTIONS)
        notes[agent] = f"worker {index}"
        await agent.ask("hi")
        await agent.dispose()

    async with runtime(_model()) as rt:
        for index in range(3):
            await work_once(rt, index)
        gc.collect()
        assert dict(notes) == {}
        kept = await rt.create_agent("kept", OPTIONS)
        notes[kept] = "kept"
        assert list(notes.values()) == ["kept"]
