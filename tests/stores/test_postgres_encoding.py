"""PostgresStore text encoding: any Unicode text, whatever the client or database encoding."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from retinue._content import Text
from retinue._errors import StoreError
from retinue._sources import MessageSource
from retinue.session import (
    Session,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)
from retinue.stores import PostgresStore
from retinue.stores._pgschema import _DDL, SCHEMA_VERSION, in_schema
from tests.stores._kit import lines, run_turn
from tests.stores.conftest import postgres_dsn

pytestmark = pytest.mark.postgres

_TEXT = "héllo wörld, 你好, 😀"
_ID = "ünïcode-😀"


def _sql(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(sql)
        return cursor.fetchall() if cursor.description else []


@pytest.fixture
def database() -> Iterator[Callable[[str], str]]:
    """Makes a fresh database of the encoding given and returns its DSN; all dropped after."""
    dsn = postgres_dsn()
    names: list[str] = []

    def make(encoding: str) -> str:
        name = f"t_{uuid.uuid4().hex[:16]}"
        _sql(
            dsn,
            f"CREATE DATABASE \"{name}\" ENCODING '{encoding}' TEMPLATE template0 "
            "LC_COLLATE 'C' LC_CTYPE 'C'",
        )
        names.append(name)
        return make_conninfo(dsn, dbname=name)

    yield make
    for name in names:
        _sql(dsn, f'DROP DATABASE "{name}" WITH (FORCE)')


async def _round_trip(dsn: str) -> None:
    """Store a session with non-Latin-1 text and id, then list and load it as it was."""
    session = Session.create(_ID)
    async with PostgresStore(dsn) as store:
        store.attach_new(session)
        run_turn(session, _TEXT)
        await store.detach(session)
    async with PostgresStore(dsn) as store:
        assert [header.id for header in await store.list()] == [_ID]
        loaded = await store.load(_ID)
        await store.detach(loaded)
    assert lines(loaded.events[:]) == lines(session.events[:])


async def test_postgres_store_keeps_any_text_whatever_client_encoding_the_dsn_asks(
    database: Callable[[str], str],
) -> None:
    """R11.2, R11.4: events are stored verbatim. A DSN (or PGCLIENTENCODING) asking for a
    client encoding other than UTF-8 does not make text outside it unstorable."""
    dsn = make_conninfo(database("UTF8"), client_encoding="LATIN1")
    await _round_trip(dsn)


async def test_postgres_store_in_a_sql_ascii_database_keeps_any_text(
    database: Callable[[str], str],
) -> None:
    """R11.2: a SQL_ASCII database keeps the UTF-8 bytes it is sent, so it holds a store:
    it opens (its schema version read as text), and its events and ids read back as stored."""
    await _round_trip(database("SQL_ASCII"))


async def test_postgres_store_refuses_to_create_tables_in_a_database_that_cannot_hold_all_text(
    database: Callable[[str], str],
) -> None:
    """R11.4: a LATIN1 database cannot hold every event's text, so the store refuses to create
    its tables there, naming the encoding, rather than fail later flushes one by one."""
    dsn = database("LATIN1")
    with pytest.raises(StoreError) as caught:
        async with PostgresStore(dsn):
            pass
    assert caught.value.code == "UNSUPPORTED_ENCODING"
    assert "LATIN1" in caught.value.message
    assert _sql(dsn, "SELECT 1 FROM pg_tables WHERE tablename LIKE 'retinue%'") == []


async def test_postgres_store_already_in_a_latin1_database_still_opens(
    database: Callable[[str], str],
) -> None:
    """R11.4, R11.10: the encoding is checked only before tables are created. A store whose
    tables a LATIN1 database already holds (made before the check) opens with the default
    ``create=True`` as with ``create=False``, and reads its sessions."""
    dsn = database("LATIN1")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET client_encoding = 'UTF8'")
        # The tables as a store made before the encoding check left them.
        schema = "public"
        conn.execute(in_schema(schema, "CREATE SCHEMA IF NOT EXISTS {schema}"))
        for statement in _DDL:
            conn.execute(in_schema(schema, statement))
        conn.execute(
            in_schema(schema, "INSERT INTO {schema}.retinue_meta VALUES ('schema_version', %s)"),
            (str(SCHEMA_VERSION),),
        )
    session = Session.create("latin")
    async with PostgresStore(dsn) as store:
        store.attach_new(session)
        session.append(TurnStart(1, TurnTrigger("message", MessageSource())))
        session.append(UserMessage((Text("plain text"),)), surface="append")
        session.append(TurnEnd(1, TurnEndReason.completed()))
        await store.detach(session)
    for create in (True, False):
        async with PostgresStore(dsn, create=create) as store:
            assert [header.id for header in await store.list()] == ["latin"]
