"""PostgresStore claims when the server's shared lock table is full, or a claim fails part-way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import PostgresStore
from retinue.stores._backend import AppendBatch
from retinue.stores._postgres import PostgresBackend
from tests.stores._kit import flush_together, run_turn
from tests.stores._postgres_locks_kit import drops_noticed_by_use_only

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _drops_noticed_by_use_only(monkeypatch: pytest.MonkeyPatch) -> None:
    drops_noticed_by_use_only(monkeypatch)


class _Locker:
    """A lock connection whose advisory lock of some sessions fails with *error*."""

    def __init__(self, conn: Any, refuse: Callable[[str], bool], error: Callable[[], Exception]):
        self._conn = conn
        self._refuse = refuse
        self._error = error

    def execute(self, sql: str, params: Any = None) -> Any:
        if "pg_try_advisory_lock" in sql and self._refuse(params[0]):
            raise self._error()
        return self._conn.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _refusing(
    backend: PostgresBackend, victim: str, error: Callable[[], Exception]
) -> PostgresBackend:
    """Make *backend*'s lock connection fail to lock *victim* with *error*."""
    claims = backend._claims
    connect = claims._connect
    claims._connect = lambda **params: _Locker(  # type: ignore[assignment,return-value]
        connect(**params), lambda key: key.endswith(f".{victim}"), error
    )
    return backend


def _out_of_shared_memory() -> Exception:
    import psycopg

    return psycopg.errors.OutOfMemory(
        "out of shared memory\nHINT:  You might need to increase max_locks_per_transaction."
    )


def _backend(store: PostgresStore) -> PostgresBackend:
    backend = store._backend
    assert isinstance(backend, PostgresBackend)
    return backend


async def test_a_full_lock_table_fails_only_the_claim_it_refused_naming_the_setting(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.5, R12.7: a claim the server refuses for want of lock table entries fails its
    session's flush with LOCK_TABLE_FULL naming max_locks_per_transaction; the other
    sessions of the group commit."""
    dsn, schema = postgres_schema
    store = PostgresStore(dsn, schema=schema)
    _refusing(_backend(store), "victim", _out_of_shared_memory)
    sessions = [Session.create(session_id) for session_id in ("alpha", "victim", "omega")]
    async with store:
        for session in sessions:
            store.attach_new(session)
            run_turn(session)
        errors = await flush_together(store, sessions)
        assert list(errors) == ["victim"]
        assert errors["victim"].code == "LOCK_TABLE_FULL"
        assert "'victim'" in errors["victim"].message
        assert "max_locks_per_transaction" in errors["victim"].message
        store._tracked.pop("victim").unsubscribe()  # nothing left to drain on exit
        assert await store.exists("alpha")
        assert await store.exists("omega")
        assert not await store.exists("victim")


def test_a_claim_failing_part_way_gives_up_the_locks_taken_for_the_group(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: when claiming a group's sessions fails part-way (the lock connection broke),
    nothing is written and no lock taken for the group is kept for nobody."""
    import psycopg

    dsn, schema = postgres_schema
    backend = _refusing(
        PostgresBackend(dsn, schema=schema),
        "broken",
        lambda: psycopg.OperationalError("the connection was lost"),
    )
    sessions = [Session.create(session_id) for session_id in ("first", "broken", "last")]
    for session in sessions:
        run_turn(session)
    batches = [AppendBatch(s.id, 0, tuple(s.events), header=s.header) for s in sessions]
    backend.open()
    try:
        with pytest.raises(psycopg.OperationalError):
            backend.write(batches)
        assert not backend._claims.holds("first")
        with psycopg.connect(dsn, autocommit=True) as other:
            row = other.execute(
                "SELECT pg_try_advisory_lock(hashtextextended(%s, 7))", (f"{schema}.first",)
            ).fetchone()
        assert row == (True,)
    finally:
        backend.close()


def test_the_lock_table_limit_is_documented() -> None:
    """The store's documentation names the limit and the setting that raises it."""
    assert PostgresStore.__doc__ is not None
    assert "max_locks_per_transaction" in PostgresStore.__doc__


def test_a_group_commit_out_of_lock_table_entries_is_a_typed_error(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.5: a write transaction the server refuses for want of lock table entries raises
    LOCK_TABLE_FULL naming the setting, not a bare driver error."""
    dsn, schema = postgres_schema
    backend = PostgresBackend(dsn, schema=schema)
    session = Session.create("solo")
    run_turn(session)

    def full(*args: object) -> None:
        raise _out_of_shared_memory()

    monkeypatch.setattr(backend._tables, "write_group", full)
    backend.open()
    try:
        with pytest.raises(StoreError) as caught:
            backend.write([AppendBatch("solo", 0, tuple(session.events), header=session.header)])
        assert caught.value.code == "LOCK_TABLE_FULL"
        assert "max_locks_per_transaction" in caught.value.message
        assert not backend._claims.holds("solo")
    finally:
        backend.close()


async def test_a_lock_the_reconnected_lock_connection_could_not_retake_is_not_held(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: when the lock connection is remade and retaking a session's lock fails (the
    lock table is full), the store no longer counts that session as claimed. Another store
    may then take it over, and this store's next flush is refused instead of making a
    second writer."""
    import psycopg

    dsn, schema = postgres_schema
    store = PostgresStore(dsn, schema=schema)
    backend = _backend(store)
    session = Session.create("victim")
    async with store:
        store.attach_new(session)
        run_turn(session)
        await store.flush(session)
        pid = backend._claims._locker.info.backend_pid  # type: ignore[union-attr]
        refusals = [True]  # the retake only: the server has room again afterwards
        claims = backend._claims
        connect = claims._connect
        claims._connect = lambda **params: _Locker(  # type: ignore[assignment,return-value]
            connect(**params),
            lambda key: key.endswith(".victim") and bool(refusals) and refusals.pop(),
            _out_of_shared_memory,
        )
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 30000)", (pid,))
        run_turn(session)
        with pytest.raises(StoreError) as full:
            await store.flush(session)
        assert full.value.code == "LOCK_TABLE_FULL"
        async with PostgresStore(dsn, schema=schema) as other:
            taken = await other.load("victim")
            with pytest.raises(StoreError) as refused:
                await store.flush(session)
            assert refused.value.code == "SESSION_LOCKED"
            assert len((await other.inspect("victim")).events) == len(taken.events)
            await other.detach(taken)
        store._tracked.pop("victim").unsubscribe()  # nothing left to drain on exit
