"""What a store keeps of a session once its detach succeeded: nothing, on every store."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores._backend import AppendBatch
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


async def test_a_detach_stores_what_the_session_logged_during_each_of_its_writes(
    blocking_kit: StoreKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A detach flushes until nothing is left: a turn logged while its first write is under
    way, and another while the write of that one is, are stored before the store stops
    observing the session; none is left behind in a buffer nobody writes."""
    session = Session.create("busy")
    async with blocking_kit.open() as store:
        store.attach_new(session)
        run_turn(session, "first")
        write = store._backend.write
        writes = 0

        def write_and_log_a_turn(batches: Sequence[AppendBatch]) -> list[StoreError | None]:
            nonlocal writes
            writes += 1
            if writes <= 2:
                trio.from_thread.run_sync(run_turn, session, f"during write {writes}")
            return write(batches)

        monkeypatch.setattr(store._backend, "write", write_and_log_a_turn)
        await store.detach(session)
        monkeypatch.undo()
        assert writes == 3
    async with blocking_kit.open() as reopened:
        assert lines((await reopened.inspect("busy")).events[:]) == lines(session.events[:])
