"""A stored session, a store's backend and its commits, a dropped lock connection: for the
PostgreSQL lock tests."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import PostgresStore, _pgclaims
from retinue.stores._backend import AppendBatch
from retinue.stores._postgres import PostgresBackend
from tests.stores._kit import open_tool_turn, run_turn


def backend_of(store: PostgresStore) -> PostgresBackend:
    """*store*'s backend, a PostgresBackend."""
    backend = store._backend
    assert isinstance(backend, PostgresBackend)
    return backend


async def store_session(dsn: str, schema: str, session_id: str, *, open_turn: bool = False) -> None:
    """Store a session *session_id* of one turn, then a tool turn left open if *open_turn*."""
    session = Session.create(session_id)
    async with PostgresStore(dsn, schema=schema) as store:
        store.attach_new(session)
        run_turn(session)
        if open_turn:
            open_tool_turn(session)
        await store.detach(session)


def drops_noticed_by_use_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leave a dropped lock connection to be noticed by the store's next claim or write, as the
    tests of that path want: the store's watcher, which would retake its claims first, looks no
    more within a test."""
    monkeypatch.setattr(_pgclaims, "_WATCH_SECONDS", 3600.0)


def drop_lock_connection(dsn: str, store: PostgresStore) -> None:
    """End the store's lock connection on the server, as a restart or a network cut does.

    Returns once the backend is gone, its locks with it (PostgreSQL 14+ waits up to the
    timeout given; terminating alone only asks the backend to exit).
    """
    import psycopg

    pid = backend_of(store)._claims._locker.info.backend_pid
    with psycopg.connect(dsn, autocommit=True) as conn:
        ended = conn.execute("SELECT pg_terminate_backend(%s, 30000)", (pid,)).fetchone()
    assert ended == (True,)


def count_commits(store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the commits *store* begins to write a group (each trying it in transactions until
    its lock timeout is over): a list holding the count."""
    backend = backend_of(store)
    commit, count = backend._commit_group_in_attempts, [0]

    def counted(batches: Sequence[AppendBatch], results: list[StoreError | None]) -> None:
        count[0] += 1
        commit(batches, results)

    monkeypatch.setattr(backend, "_commit_group_in_attempts", counted)
    return count
