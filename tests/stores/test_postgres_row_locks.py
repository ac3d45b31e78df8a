"""PostgresStore meeting a session's row locked by another transaction: a flush committing on its
own heeds its deadline, and a commit that waits out the lock timeout fails that session only."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio

from retinue.session import Session
from retinue.stores import PostgresStore
from tests.stores._kit import REAL_DEADLINE, flush_together, run_turn
from tests.stores._postgres_locks_kit import count_commits

pytestmark = pytest.mark.postgres


@contextmanager
def _row_locked(dsn: str, schema: str, *session_ids: str) -> Iterator[None]:
    """Hold the sessions' rows in another connection's transaction, as a hand-run
    ``SELECT ... FOR UPDATE`` does; let go after 20 s at the latest, so that a store
    waiting for it makes its test fail rather than hang."""
    import psycopg

    blocker = psycopg.connect(dsn)
    let_go = threading.Timer(20, blocker.rollback)
    try:
        blocker.execute(
            f'SELECT 1 FROM "{schema}".retinue_sessions WHERE id = ANY(%s) FOR UPDATE',
            (list(session_ids),),
        )
        let_go.start()
        yield
    finally:
        let_go.cancel()
        blocker.rollback()
        blocker.close()


async def _flush_cut_short_keeping_its_events(
    store: PostgresStore, session: Session, dsn: str, schema: str
) -> None:
    """Flush *session* under a 0.3 s deadline while its row is locked elsewhere: the
    deadline ends the flush, its turn's 22 events kept buffered, and a detach once the
    lock is gone stores them all."""
    with _row_locked(dsn, schema, session.id), trio.move_on_after(0.3) as deadline:
        await store.flush(session)
    assert deadline.cancelled_caught
    assert store.statistics().buffered_events == 22
    with trio.fail_after(REAL_DEADLINE):
        await store.detach(session)
        await store.aclose()
        async with PostgresStore(dsn, schema=schema) as again:
            assert len((await again.inspect(session.id)).events) == len(session.events)


async def test_a_deadline_ends_a_postgres_flush_waiting_for_a_row_lock(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.5: a flush committing on its own (no writer task) while another transaction holds its
    session's row locked ends at its deadline, writing nothing, its events kept buffered for the
    next flush, rather than waiting out the lock timeout in its worker thread, past the deadline, to
    fail with the server's lock timeout."""
    import retinue.stores._postgres as postgres

    monkeypatch.setattr(postgres, "_WRITE_LOCK_TIMEOUT_MS", 5_000)
    dsn, schema = postgres_schema
    session = Session.create("row-locked")
    store = PostgresStore(dsn, schema=schema)
    store.attach_new(session)
    run_turn(session)
    await store.flush(session)
    run_turn(session)
    await _flush_cut_short_keeping_its_events(store, session, dsn, schema)


async def test_a_deadline_ends_a_postgres_flush_whose_claim_waits_for_a_row_lock(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.5: a flush committing on its own of a stored session this store has not claimed yet,
    while another transaction holds its row locked (a previous writer's commit still under way),
    ends at its deadline, writing nothing, its events kept buffered for the next flush; its claim
    does not wait for the row in its worker thread past the deadline (up to 10 s) and then
    commit."""
    dsn, schema = postgres_schema
    session = Session.create("claim-waits")
    run_turn(session)
    async with PostgresStore(dsn, schema=schema) as first:
        first.attach_new(session)
    store = PostgresStore(dsn, schema=schema)
    store.attach(session)  # stored, not claimed: its first commit claims it
    run_turn(session)
    await _flush_cut_short_keeping_its_events(store, session, dsn, schema)


async def _stored_with_a_turn_to_flush(
    store: PostgresStore, session_ids: list[str]
) -> list[Session]:
    """New sessions *session_ids* in *store*, a turn of each stored and another run since."""
    sessions = [Session.create(session_id) for session_id in session_ids]
    for session in sessions:
        store.attach_new(session)
        run_turn(session)
    assert await flush_together(store, sessions) == {}
    for session in sessions:
        run_turn(session)
    return sessions


async def test_a_postgres_commit_waiting_out_a_row_lock_fails_that_session_only(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.5: a group commit that waits out the lock timeout on a session's row locked by another
    transaction fails that session's flush with ``SESSION_LOCKED``, saying another transaction holds
    its row, not ``STORAGE_ERROR`` with the server's bare lock timeout; the others are committed."""
    import retinue.stores._postgres as postgres

    monkeypatch.setattr(postgres, "_WRITE_LOCK_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    with trio.fail_after(REAL_DEADLINE):
        async with PostgresStore(dsn, schema=schema) as store:
            sessions = await _stored_with_a_turn_to_flush(store, ["free", "locked"])
            with _row_locked(dsn, schema, "locked"):
                errors = await flush_together(store, sessions)
            assert list(errors) == ["locked"]
            assert errors["locked"].code == "SESSION_LOCKED"
            assert "'locked': another transaction holds its row locked" in str(errors["locked"])
            assert await flush_together(store, sessions) == {}
            assert store.statistics().buffered_events == 0


async def test_a_postgres_group_meeting_row_locks_waits_once_and_commits_the_rest(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.5: a group commit whose sessions' rows another transaction holds locked waits out the
    lock timeout once: then each of those sessions fails ``SESSION_LOCKED`` naming it, and the rest
    of the group is committed. The group does not fail whole to be split, each session waiting out
    the timeout again, the free ones too."""
    import retinue.stores._postgres as postgres

    monkeypatch.setattr(postgres, "_WRITE_LOCK_TIMEOUT_MS", 300)
    dsn, schema = postgres_schema
    with trio.fail_after(REAL_DEADLINE):
        async with PostgresStore(dsn, schema=schema) as store:
            sessions = await _stored_with_a_turn_to_flush(store, ["free", "locked", "locked-too"])
            commits = count_commits(store, monkeypatch)
            with _row_locked(dsn, schema, "locked", "locked-too"):
                errors = await flush_together(store, sessions)
            assert commits == [1]
            assert sorted(errors) == ["locked", "locked-too"]
            for session_id, error in errors.items():
                assert error.code == "SESSION_LOCKED"
                assert f"session {session_id!r}: another transaction holds its row" in str(error)
            assert store.statistics().buffered_events == 2 * 22
            assert await flush_together(store, sessions) == {}
            assert store.statistics().buffered_events == 0


async def test_a_postgres_commit_does_not_wait_for_an_insert_referring_to_its_row(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.5: an application table with a foreign key to ``retinue_sessions(id)``: a transaction
    inserting a row of it that refers to a session (which locks that session's row FOR KEY SHARE)
    holds up no commit of the session, which changes its row but never its id; a commit does not
    wait out the lock timeout to fail ``SESSION_LOCKED``."""
    import psycopg

    import retinue.stores._postgres as postgres

    monkeypatch.setattr(postgres, "_WRITE_LOCK_TIMEOUT_MS", 2_000)
    dsn, schema = postgres_schema
    with trio.fail_after(REAL_DEADLINE):
        async with PostgresStore(dsn, schema=schema) as store:
            sessions = await _stored_with_a_turn_to_flush(store, ["noted", "other"])
            with psycopg.connect(dsn) as inserter:
                inserter.execute(
                    f'CREATE TABLE "{schema}".notes (session_id text '
                    f'REFERENCES "{schema}".retinue_sessions (id))'
                )
                inserter.commit()
                inserter.execute(f'INSERT INTO "{schema}".notes VALUES (%s)', ("noted",))
                started = trio.current_time()
                errors = await flush_together(store, sessions)
                elapsed = trio.current_time() - started
                inserter.rollback()
            assert errors == {}
            assert elapsed < 1.0
            assert store.statistics().buffered_events == 0
