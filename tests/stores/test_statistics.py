"""What a store's statistics() says of its commits (StoreStatistics)."""

from __future__ import annotations

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from tests.stores._kit import REAL_DEADLINE, flush_together, run_turn, store_one_turn
from tests.stores.conftest import StoreKit


async def test_largest_group_counts_the_sessions_a_group_committed(blocking_kit: StoreKit) -> None:
    """A group of three flushes, two of them creates of stored ids, commits one session:
    the largest group says one, not the three sessions the group was asked to write."""
    for stored_id in ("taken-1", "taken-2"):
        await store_one_turn(blocking_kit.open(), stored_id)
    sessions = [Session.create(session_id) for session_id in ("taken-1", "taken-2", "fresh")]
    store = blocking_kit.open()
    with trio.fail_after(REAL_DEADLINE):
        async with store:
            for session in sessions:
                run_turn(session)
                store.attach_new(session)
            errors = await flush_together(store, sessions)
            statistics = store.statistics()
            for session in sessions[:2]:
                # A refused create keeps nothing once its detach is refused too.
                with pytest.raises(StoreError, match="already exists"):
                    await store.detach(session)
    assert sorted(errors) == ["taken-1", "taken-2"]
    assert {error.code for error in errors.values()} == {"SESSION_ALREADY_EXISTS"}
    assert statistics.commits == 1
    assert statistics.committed_events == len(sessions[2].events)
    assert statistics.largest_group == 1


async def test_flush_requests_leave_out_flushes_an_earlier_commit_left_nothing_to_write(
    blocking_kit: StoreKit,
) -> None:
    """Three flushes of one session at once, without a writer task, commit one after
    another: the first writes the events, the others find nothing left to write and
    count as no flush request."""
    session = Session.create("flushed-thrice")
    run_turn(session)
    store = blocking_kit.open()
    store.attach_new(session)
    with trio.fail_after(REAL_DEADLINE):
        assert await flush_together(store, [session, session, session]) == {}
        statistics = store.statistics()
        await store.aclose()
    assert statistics.commits == 1
    assert statistics.flush_requests == 1


async def test_flushes_of_one_session_a_group_answers_together_count_as_one_request(
    blocking_kit: StoreKit,
) -> None:
    """Three flushes of one session at once inside ``async with``, which the writer answers
    with one group, count as one flush request, as they do without a writer."""
    session = Session.create("flushed-together")
    run_turn(session)
    store = blocking_kit.open()
    with trio.fail_after(REAL_DEADLINE):
        async with store:
            store.attach_new(session)
            assert await flush_together(store, [session, session, session]) == {}
            statistics = store.statistics()
    assert statistics.commits == 1
    assert statistics.flush_requests == 1
