"""PostgresStore's close returns within seconds when the server stops answering a commit in
flight: the commit is ended, failing ``COMMIT_UNKNOWN`` once its COMMIT may have been sent, and
the next load reads all of its write or none of it."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import PostgresStore
from tests.stores._kit import run_turn
from tests.stores._postgres_locks_kit import backend_of
from tests.stores._postgres_silent_kit import Forwarder, cut_after

pytestmark = pytest.mark.postgres

_CLOSE_SECONDS = 10.0
_DRAIN_SECONDS = 2.0
"""The deadline of a close whose drain waits for the server: what it leaves unwritten is lost."""
_CUT_SECONDS = 15.0
"""When the forwarder ends what a close still waits for: past the close's deadline."""


def _silenced(forwarder: Forwarder, store: PostgresStore, *, at_commit: bool) -> None:
    """Make the server answer nothing more as *store*'s next group begins its transaction or,
    *at_commit*, as it sends the COMMIT: its statements all answered, the COMMIT is not."""
    tables = backend_of(store)._tables
    write_group = tables.write_group

    def silenced_write(*args: Any) -> None:
        if not at_commit:
            forwarder.muted.set()
        write_group(*args)
        forwarder.muted.set()

    tables.write_group = silenced_write  # type: ignore[method-assign, assignment]


async def _flush_failing(
    store: PostgresStore, session: Session, codes: list[str | None], failed: trio.Event
) -> None:
    with pytest.raises(StoreError) as caught:
        await store.flush(session)
    codes.append(caught.value.code)
    failed.set()


async def _close_under_the_silence(
    forwarder: Forwarder, schema: str, *, at_commit: bool
) -> tuple[float, list[str | None], tuple[int, int]]:
    """A store flushes a session's second turn into a server gone silent, then leaves
    ``async with`` under a deadline: how long the exit took, the codes the flush failed
    with, and how many events the session held before and after the second turn."""
    codes: list[str | None] = []
    failed = trio.Event()
    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as scope:
            async with PostgresStore(forwarder.dsn, schema=schema) as store:
                session = Session.create("silenced")
                store.attach_new(session)
                run_turn(session)
                await store.flush(session)
                stored = len(session.events)
                _silenced(forwarder, store, at_commit=at_commit)
                run_turn(session)
                written = len(session.events)
                nursery.start_soon(_flush_failing, store, session, codes, failed)
                await trio.to_thread.run_sync(forwarder.muted.wait, _CLOSE_SECONDS)
                await trio.sleep(0.3)  # the statement it was muted at is sent, unanswered
                nursery.start_soon(cut_after, forwarder, _CUT_SECONDS)
                started = time.monotonic()
                scope.deadline = trio.current_time() + _DRAIN_SECONDS
        elapsed = time.monotonic() - started
        with trio.fail_after(_CLOSE_SECONDS):
            await failed.wait()
        nursery.cancel_scope.cancel()
    return elapsed, codes, (stored, written)


async def _loaded_events(dsn: str, schema: str, session_id: str) -> int:
    """How many events a new store loads, once the server has ended the silenced connections
    (the claim they held, the transaction left open)."""
    async with PostgresStore(dsn, schema=schema) as store:
        for _ in range(100):
            try:
                return len((await store.inspect(session_id)).events)
            except StoreError as exc:
                if exc.code != "SESSION_LOCKED":
                    raise
            await trio.sleep(0.1)
    raise AssertionError(f"session {session_id!r} stayed locked")


async def test_postgres_a_close_ends_a_commit_whose_commit_the_server_leaves_unanswered(
    postgres_schema: tuple[str, str],
) -> None:
    """The server answers a commit's statements, then not its COMMIT (nor the close's cancel
    request). Leaving ``async with`` under a deadline returns within seconds, the flush failed
    ``COMMIT_UNKNOWN``. The forwarder, cut, may pass the COMMIT on as the connection ends, or
    not: the next load reads all of the write, or none of it."""
    dsn, schema = postgres_schema
    forwarder = Forwarder(dsn)
    try:
        elapsed, codes, (stored, written) = await _close_under_the_silence(
            forwarder, schema, at_commit=True
        )
        assert elapsed < _CLOSE_SECONDS
        assert codes == ["COMMIT_UNKNOWN"]
    finally:
        forwarder.close()
    assert await _loaded_events(dsn, schema, "silenced") in (stored, written)


async def test_postgres_a_close_ends_a_commit_the_server_stops_answering_before_its_commit(
    postgres_schema: tuple[str, str],
) -> None:
    """The server answers nothing more as a commit begins. Leaving ``async with`` under a
    deadline returns within seconds, the flush failed ``STORE_CLOSED``: nothing was committed,
    and the next load reads the first turn alone."""
    dsn, schema = postgres_schema
    forwarder = Forwarder(dsn)
    try:
        elapsed, codes, (stored, _) = await _close_under_the_silence(
            forwarder, schema, at_commit=False
        )
        assert elapsed < _CLOSE_SECONDS
        assert codes == ["STORE_CLOSED"]
    finally:
        forwarder.close()
    assert await _loaded_events(dsn, schema, "silenced") == stored
