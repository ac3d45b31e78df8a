"""A SQLite or PostgreSQL session row whose next_seq says it holds no events (R11.3, R11.14): a
session is stored with its first event, so the row is damaged; the listing names it as skipped and
a load refuses it, where the listing left it out without a word."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import attrs
import pytest

from retinue._errors import CorruptSessionError
from retinue.session import Session
from retinue.stores import PostgresStore, SQLiteStore
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import run_turn


class _Damage(Protocol):
    def __call__(self, next_seq: int, *, keep_segments: bool) -> None:
        """Set the ``damaged`` session's next_seq, its segments kept or deleted."""


@attrs.frozen
class Rows:
    """A store of rows, and how to damage its ``damaged`` session's row."""

    open: Callable[[], BufferedStore]
    damage: _Damage
    column: str


def _sqlite(path: Path) -> Rows:
    def damage(next_seq: int, *, keep_segments: bool) -> None:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("UPDATE sessions SET next_seq = ? WHERE id = 'damaged'", (next_seq,))
            if not keep_segments:
                conn.execute(
                    "DELETE FROM segments WHERE sid = (SELECT sid FROM sessions WHERE id = 'damaged')"
                )
            conn.commit()

    return Rows(lambda: SQLiteStore(path), damage, "sessions.next_seq")


def _postgres(dsn: str, schema: str) -> Rows:
    import psycopg
    from psycopg import sql

    def damage(next_seq: int, *, keep_segments: bool) -> None:
        table = sql.Identifier(schema, "retinue_sessions")
        with psycopg.connect(dsn, autocommit=True) as conn:
            update = sql.SQL("UPDATE {} SET next_seq = %s WHERE id = 'damaged'").format(table)
            conn.execute(update, (next_seq,))
            if not keep_segments:
                segments = sql.Identifier(schema, "retinue_segments")
                conn.execute(
                    sql.SQL("DELETE FROM {} WHERE session_id = 'damaged'").format(segments)
                )

    return Rows(lambda: PostgresStore(dsn, schema=schema), damage, "retinue_sessions.next_seq")


@pytest.fixture(params=["sqlite", "postgres"])
def rows(request: pytest.FixtureRequest, tmp_path: Path) -> Rows:
    """A store of rows for each backend that keeps them."""
    if request.param == "sqlite":
        return _sqlite(tmp_path / "sessions.db")
    dsn, schema = request.getfixturevalue("postgres_schema")
    return _postgres(dsn, schema)


@pytest.mark.parametrize(
    ("next_seq", "keep_segments"),
    [(0, True), (-1, True), (0, False)],
    ids=["zero", "negative", "zero-without-segments"],
)
async def test_a_row_saying_it_holds_no_events_is_listed_as_skipped_and_refused(
    rows: Rows, next_seq: int, *, keep_segments: bool
) -> None:
    """R11.14: the listing names the damaged session as skipped, with the column and the value
    it holds, and lists the others; a load refuses it CORRUPT_SESSION with the same words,
    segments or none (a header alone is no stored session)."""
    for session_id in ("damaged", "fine"):
        session = Session.create(session_id)
        run_turn(session)
        async with rows.open() as store:
            store.attach_new(session)
    rows.damage(next_seq, keep_segments=keep_segments)
    problem = (
        f"session 'damaged': {rows.column} holds {next_seq}, yet a session is stored with its "
        "first event: the row is damaged"
    )
    async with rows.open() as store:
        listing = await store.listing()
        assert [header.id for header in listing.headers] == ["fine"]
        assert [(skipped.stored_as, skipped.problem) for skipped in listing.skipped] == [
            ("damaged", problem)
        ]
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("damaged")
    assert (caught.value.code, caught.value.message) == ("CORRUPT_SESSION", problem)
