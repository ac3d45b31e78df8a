"""What a store does with sessions attached while it closes (R11.6)."""

from __future__ import annotations

import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import REAL_DEADLINE, lines, run_turn
from tests.stores.conftest import StoreKit


async def _attach_refusals(store: BufferedStore, session: Session, refusals: list[str]) -> None:
    """Attach *session* as new, recording the code it is refused with."""
    await trio.lowlevel.checkpoint()
    try:
        store.attach_new(session)
    except StoreError as exc:
        refusals.append(str(exc.code))


async def test_store_refuses_an_attach_while_its_close_drains(kit: StoreKit) -> None:
    """R11.6: closing drains the sessions attached when it begins; one attached meanwhile
    would be neither drained nor let go, buffering each later append for a store that can
    no longer write it, so the attach is refused ``STORE_CLOSED`` and nothing is kept."""
    draining = Session.create("draining")
    run_turn(draining)
    late = Session.create("late")
    refusals: list[str] = []
    store = kit.open()
    store.attach_new(draining)
    async with trio.open_nursery() as nursery:
        # Runs at the close's first schedule point, with the drain under way.
        nursery.start_soon(_attach_refusals, store, late, refusals)
        await store.aclose()
    run_turn(late)
    assert refusals == ["STORE_CLOSED"]
    assert store.statistics().buffered_events == 0
    async with kit.open() as reopened:
        assert lines((await reopened.inspect("draining")).events[:]) == lines(draining.events[:])
        assert not await reopened.exists("late")


async def test_a_close_while_another_drains_waits_for_it_and_raises_nothing(kit: StoreKit) -> None:
    """R11.6: a close is idempotent, also while another task's close drains: it waits for
    that drain and returns, rather than report the sessions that drain stores as not
    drained (its own requests, queued behind, found the store closed)."""
    sessions = [Session.create(f"closing-{index}") for index in range(3)]
    store = kit.open()
    for session in sessions:
        run_turn(session)
        store.attach_new(session)
    finished: list[str] = []

    async def close(name: str) -> None:
        await store.aclose()
        finished.append(name)

    with trio.fail_after(REAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(close, "first")
            nursery.start_soon(close, "second")
    assert sorted(finished) == ["first", "second"]
    async with kit.open() as reopened:
        for session in sessions:
            assert lines((await reopened.inspect(session.id)).events) == lines(session.events)
