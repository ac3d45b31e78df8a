"""PostgresStore without create: it writes nothing to open, so readers need only SELECT."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import trio
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from retinue._errors import StoreError
from retinue.cli._sessions import add_parser
from retinue.session import Session
from retinue.stores import PostgresStore
from tests.stores._kit import lines, run_turn, store_one_turn
from tests.stores.conftest import postgres_dsn

pytestmark = pytest.mark.postgres


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="retinue")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["sessions", *argv])
    return int(args.handler(args))


def _sql(dsn: str, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(sql, args)
        return cursor.fetchall() if cursor.description else []


@pytest.fixture
def database() -> Iterator[str]:
    """The DSN of a fresh database (its ``public`` schema is what the CLI opens), dropped after."""
    dsn = postgres_dsn()
    name = f"t_{uuid.uuid4().hex[:16]}"
    _sql(dsn, f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(dsn, dbname=name)
    finally:
        _sql(dsn, f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def reader_role(database: str) -> Iterator[str]:
    """The name of a login role, dropped after; :func:`_grant_select` says what it may do."""
    name = f"r_{uuid.uuid4().hex[:16]}"
    _sql(database, f'CREATE ROLE "{name}" LOGIN')
    try:
        yield name
    finally:
        _sql(database, f'DROP OWNED BY "{name}"')
        _sql(database, f'DROP ROLE "{name}"')


def _grant_select(database: str, role: str) -> None:
    """Let *role* connect to *database* and read the tables it has now, and create nothing."""
    dbname = f'"{conninfo_to_dict(database)["dbname"]}"'
    for statement in (
        f"REVOKE CREATE ON DATABASE {dbname} FROM PUBLIC",
        "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
        f'GRANT CONNECT ON DATABASE {dbname} TO "{role}"',
        f'GRANT USAGE ON SCHEMA public TO "{role}"',
        f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"',
    ):
        _sql(database, statement)


def _tables(dsn: str) -> list[str]:
    rows = _sql(dsn, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
    return [name for (name,) in rows]


def test_cli_reading_commands_on_postgres_create_no_tables(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reading commands change nothing: on a database without retinue tables they fail
    naming the schema, and leave the database as it was (no schema, tables or rows)."""
    _sql(database, "CREATE TABLE orders (id int)")
    spec = f"postgres:{database}"
    for command in (["list"], ["show", "x"], ["export", "x"], ["replay", "x"]):
        assert _cli("--store", spec, *command) == 1
        error = capsys.readouterr().err
        assert "schema 'public' is not a retinue store" in error
    assert _tables(database) == ["orders"]


def test_cli_reading_commands_on_postgres_need_only_select(
    database: str, reader_role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A role that may only read the tables lists, shows, exports and replays a session."""
    session = trio.run(store_one_turn, PostgresStore(database), "kept")
    _grant_select(database, reader_role)
    spec = f"postgres:{make_conninfo(database, user=reader_role)}"
    assert _cli("--store", spec, "list") == 0
    assert capsys.readouterr().out.startswith("kept\t")
    assert _cli("--store", spec, "export", "kept") == 0
    exported = capsys.readouterr().out.splitlines()
    assert exported[1:] == lines(session.events[:])
    for command in ("show", "replay"):
        assert _cli("--store", spec, command, "kept") == 0, capsys.readouterr().err
        assert "kept" in capsys.readouterr().out


def _connections(dsn: str, role: str) -> int:
    rows = _sql(dsn, "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", role)
    return int(rows[0][0])


async def test_postgres_store_without_create_reads_on_one_connection(
    database: str, reader_role: str
) -> None:
    """Opened without create, a store that only reads holds one connection: no write or lock
    connection until something is written or claimed."""
    session = await store_one_turn(PostgresStore(database), "kept")
    _grant_select(database, reader_role)
    async with PostgresStore(make_conninfo(database, user=reader_role), create=False) as store:
        assert [header.id for header in await store.list()] == ["kept"]
        inspected = await store.inspect("kept")
        assert lines(inspected.events[:]) == lines(session.events[:])
        assert _connections(database, reader_role) == 1


async def test_postgres_store_without_create_refuses_a_missing_schema_and_creates_none(
    postgres_schema: tuple[str, str],
) -> None:
    """Without create, a schema without retinue tables is refused by name, and left absent."""
    dsn, schema = postgres_schema
    with pytest.raises(StoreError) as caught:
        async with PostgresStore(dsn, schema=schema, create=False):
            pass
    assert caught.value.code == "UNSUPPORTED_SCHEMA"
    assert repr(schema) in caught.value.message
    found = _sql(dsn, "SELECT 1 FROM pg_namespace WHERE nspname = %s", schema)
    assert found == []


async def test_postgres_store_without_create_writes_and_claims_on_first_use(
    postgres_schema: tuple[str, str],
) -> None:
    """R12.7: a store opened without create on existing tables (say, a role without CREATE)
    still loads, appends and holds its sessions against other writers."""
    dsn, schema = postgres_schema
    session = Session.create("shared")
    async with PostgresStore(dsn, schema=schema) as store:
        store.attach_new(session)
        run_turn(session)
    async with (
        PostgresStore(dsn, schema=schema, create=False) as store,
        PostgresStore(dsn, schema=schema) as other,
    ):
        loaded = await store.load("shared")
        store.attach(loaded)
        with pytest.raises(StoreError) as caught:
            await other.load("shared")
        assert caught.value.code == "SESSION_LOCKED"
        run_turn(loaded, "again")
        await store.flush(loaded)
        await store.detach(loaded)
        reloaded = await other.load("shared")
    assert lines(reloaded.events[:]) == lines(loaded.events[:])


async def test_postgres_writes_on_a_read_only_server_fail_once_as_read_only(
    postgres_schema: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R11.5: on a server in read-only mode (default_transaction_read_only, a hot standby)
    a group commit fails once, each of its flushes with ``READ_ONLY`` naming that mode,
    instead of being written again session by session; loading and creating the tables are
    refused alike. The stored log is untouched and the flushed events stay buffered."""
    dsn, schema = postgres_schema
    stored = await store_one_turn(PostgresStore(dsn, schema=schema), "stored")
    read_only = make_conninfo(dsn, options="-c default_transaction_read_only=on")
    with pytest.raises(StoreError) as refused:
        async with PostgresStore(read_only, schema=schema):
            pass
    assert refused.value.code == "READ_ONLY"
    sessions = [Session.create(f"new-{index}") for index in range(3)]
    errors: list[StoreError] = []
    async with PostgresStore(read_only, schema=schema, create=False) as store:
        backend = store._backend
        write = backend.write
        written: list[str] = []

        def counted(batches: Any) -> Any:
            written.extend(batch.session_id for batch in batches)
            return write(batches)

        monkeypatch.setattr(backend, "write", counted)

        async def flush(session: Session) -> None:
            with pytest.raises(StoreError) as caught:
                await store.flush(session)
            errors.append(caught.value)

        for session in sessions:
            store.attach_new(session)
            run_turn(session)
        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(flush, session)
        assert sorted(written) == [session.id for session in sessions]
        assert [error.code for error in errors] == ["READ_ONLY"] * 3
        assert all("read-only mode" in error.message for error in errors)
        buffered = sum(len(session.events) for session in sessions)
        assert store.statistics().buffered_events == buffered
        with pytest.raises(StoreError) as refused:
            await store.load("stored")
        assert refused.value.code == "READ_ONLY"
        with pytest.raises(StoreError):
            await store.aclose()
    async with PostgresStore(dsn, schema=schema) as store:
        assert lines((await store.inspect("stored")).events[:]) == lines(stored.events[:])
        assert not await store.exists("new-0")
