"""A detach cancelled while the writer holds its write: what the store keeps once that
write has stored everything (R11.6, R12.7)."""

from __future__ import annotations

import pytest
import trio

from retinue.session import Session
from retinue.stores import BufferedStore
from tests.stores._kit import REAL_DEADLINE, HeldCall, lines, run_turn
from tests.stores.conftest import StoreKit


async def _detach_cancelled_mid_write(
    store: BufferedStore, session: Session, monkeypatch: pytest.MonkeyPatch
) -> HeldCall:
    """Store *session*'s turn, log another, and detach it, cancelled once the writer has
    taken that write; returns the write, still held."""
    store.attach_new(session)
    await store.flush(session)
    run_turn(session, "written while its detach is cancelled")
    held = HeldCall(store._backend.write)
    monkeypatch.setattr(store._backend, "write", held)
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def cancel_once_reached() -> None:
                await trio.to_thread.run_sync(held.reached.wait, REAL_DEADLINE)
                scope.cancel()

            nursery.start_soon(cancel_once_reached)
            await store.detach(session)
    assert scope.cancelled_caught
    return held


async def test_store_gives_up_the_claim_of_a_cancelled_detach_once_its_write_stored_all(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7: a detach cancelled once the writer has taken its write leaves the session
    released, kept for a load to take over what it buffered; once that write has stored
    everything nothing is left to take over, and another store (another process) loads
    the session rather than find it locked until this store closes."""
    session = Session.create("held")
    run_turn(session)
    store = blocking_kit.open()
    with trio.fail_after(REAL_DEADLINE):
        async with store:
            held = await _detach_cancelled_mid_write(store, session, monkeypatch)
            held.proceed.set()
            await store.flush(session)  # answered once the held write's group is done
            assert store.statistics().buffered_events == 0
            async with blocking_kit.open() as other:
                loaded = await other.load("held")
                await other.detach(loaded)
    assert lines(loaded.events[:]) == lines(session.events[:])


async def test_a_load_while_the_claim_is_given_up_waits_and_loads_the_stored_session(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7, R11.6: a load of the id while the store gives up a cancelled detach's claim waits for
    the claim to go, then loads the stored session with all its events, not refused SESSION_TRACKED
    ("being loaded") while nothing is loading it."""
    session = Session.create("held")
    run_turn(session)
    store = blocking_kit.open()
    with trio.fail_after(REAL_DEADLINE):
        async with store:
            release = HeldCall(store._backend.release)
            monkeypatch.setattr(store._backend, "release", release)
            held = await _detach_cancelled_mid_write(store, session, monkeypatch)
            held.proceed.set()
            await trio.to_thread.run_sync(release.reached.wait, REAL_DEADLINE)
            loaded: list[Session] = []

            async def load() -> None:
                loaded.append(await store.load("held"))

            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(load)
                    await trio.sleep(0.05)
                    assert loaded == []  # waiting on the release
                    release.proceed.set()
            finally:
                release.proceed.set()  # a failed load must not hold the release for good
            await store.detach(loaded[0])
    assert lines(loaded[0].events[:]) == lines(session.events[:])
