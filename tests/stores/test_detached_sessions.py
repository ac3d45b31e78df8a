"""What a store keeps of a session once its detach succeeded: nothing, on every store."""

from __future__ import annotations

import trio

from retinue.session import Session
from tests.stores._kit import lines, run_turn
from tests.stores.conftest import StoreKit


async def test_a_detached_session_is_no_longer_heard_by_its_store(kit: StoreKit) -> None:
    """A detach stops the store observing the session: the session may then be appended to
    from another thread, as a session nobody observes may, and what it logs after the
    detach is neither buffered nor stored."""
    session = Session.create("detached")
    async with kit.open() as store:
        store.attach_new(session)
        run_turn(session, "stored")
        await store.detach(session)
        stored = len(session.events)
        await trio.to_thread.run_sync(run_turn, session, "after the detach")
        assert len(session.events) > stored
        assert store.statistics().buffered_events == 0
    async with kit.open() as reopened:
        assert lines((await reopened.inspect("detached")).events[:]) == lines(
            session.events[:stored]
        )
