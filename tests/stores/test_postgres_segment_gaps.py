"""PostgresStore reads: a segment row lost or cut short is lost data, refused and left as stored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from retinue._content import Text
from retinue._errors import CorruptSessionError
from retinue.session import Session, ToolResultEvent
from retinue.stores import PostgresStore
from retinue.stores._backend import AppendBatch
from retinue.stores._postgres import PostgresBackend
from tests.stores._kit import open_tool_turn, run_turn

pytestmark = pytest.mark.postgres


def _sql(dsn: str, schema: str, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(sql.replace("{s}", f'"{schema}"'), args)
        return cursor.fetchall() if cursor.description else []


def _segments(dsn: str, schema: str, session_id: str) -> list[tuple[int, int, str]]:
    rows = _sql(
        dsn,
        schema,
        "SELECT first_seq, count, body FROM {s}.retinue_segments WHERE session_id = %s "
        "ORDER BY first_seq",
        session_id,
    )
    return [(first, count, body) for first, count, body in rows]


async def _stored_in_four_commits(dsn: str, schema: str, session_id: str) -> Session:
    """Two complete turns, then an open third turn written in two commits: four segment rows."""
    session = Session.create(session_id)
    async with PostgresStore(dsn, schema=schema) as store:
        store.attach_new(session)
        for text in ("one", "two"):
            run_turn(session, text)
            await store.flush(session)
        call_id = open_tool_turn(session)
        await store.flush(session)
        call = len(session.events) - 1
        session.append(
            ToolResultEvent(3, 1, call_id, (Text("ok"),)),
            surface="append",
            source_event_seqs=[call],
        )
        await store.flush(session)
        await store.detach(session)
    return session


@pytest.mark.parametrize("lost", [1, 2, 3], ids=["a complete turn", "open turn", "final"])
async def test_postgres_lost_segment_is_refused_naming_the_missing_seqs_and_nothing_is_deleted(
    postgres_schema: tuple[str, str], lost: int
) -> None:
    """R11.8: a committed segment is atomic, so a missing one is lost acknowledged events, not a
    torn tail: load and inspect fail naming the session and the missing seqs, and the rows
    after the gap stay stored (a load must not truncate them as a repair)."""
    dsn, schema = postgres_schema
    await _stored_in_four_commits(dsn, schema, "gappy")
    segments = _segments(dsn, schema, "gappy")
    assert len(segments) == 4
    first, count, _ = segments[lost]
    _sql(
        dsn,
        schema,
        "DELETE FROM {s}.retinue_segments WHERE session_id = %s AND first_seq = %s",
        "gappy",
        first,
    )
    async with PostgresStore(dsn, schema=schema) as store:
        for read in (store.load, store.inspect):
            with pytest.raises(CorruptSessionError) as caught:
                await read("gappy")
            assert caught.value.code == "CORRUPT_SESSION"
            assert f"'gappy': a seq gap: events {first}..{first + count - 1} are missing" in str(
                caught.value
            )
    assert _segments(dsn, schema, "gappy") == segments[:lost] + segments[lost + 1 :]


async def test_postgres_segment_holding_fewer_records_than_its_count_is_refused(
    postgres_schema: tuple[str, str],
) -> None:
    """R11.8: a final segment whose body lost records it counts is refused by name, not loaded
    as a shorter log whose repair then conflicts with the stored next seq."""
    dsn, schema = postgres_schema
    await _stored_in_four_commits(dsn, schema, "short")
    first, count, body = _segments(dsn, schema, "short")[2]
    assert count > 1
    cut = "\n".join(body.split("\n")[:-1])
    _sql(
        dsn,
        schema,
        "UPDATE {s}.retinue_segments SET body = %s WHERE session_id = %s AND first_seq = %s",
        cut,
        "short",
        first,
    )
    async with PostgresStore(dsn, schema=schema) as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("short")
    assert caught.value.code == "CORRUPT_SESSION"
    assert f"the segment from seq {first} holds {count - 1} event records, not {count}" in str(
        caught.value
    )
    assert _segments(dsn, schema, "short")[2] == (first, count, cut)


class _CommitBeforeSegments:
    """A reader connection that runs *commit* (once) just before the segments are queried."""

    def __init__(self, conn: psycopg.Connection[Any], commit: Callable[[], None]) -> None:
        self._conn = conn
        self._commit: Callable[[], None] | None = commit

    def transaction(self) -> Any:
        return self._conn.transaction()

    def execute(self, sql: str, *args: Any) -> Any:
        if "FROM " in sql and "retinue_segments" in sql and self._commit is not None:
            commit, self._commit = self._commit, None
            commit()
        return self._conn.execute(sql, *args)

    def close(self) -> None:
        self._conn.close()


def test_postgres_read_is_one_snapshot_while_a_commit_lands(
    postgres_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.5, R11.8: a commit between the session row and its segments is not a seq gap: the
    read sees the log as one commit left it."""
    dsn, schema = postgres_schema
    session = Session.create("live")
    run_turn(session)
    writer = PostgresBackend(dsn, schema=schema)
    writer.open()
    first = tuple(session.events)
    assert writer.write([AppendBatch("live", 0, first, header=session.header)]) == [None]
    run_turn(session)
    rest = tuple(session.events[len(first) :])

    def commit() -> None:
        assert writer.write([AppendBatch("live", len(first), rest)]) == [None]

    reader = PostgresBackend(dsn, schema=schema)
    reader.open()
    connect = reader._connect
    monkeypatch.setattr(
        reader,
        "_connect",
        lambda **params: _CommitBeforeSegments(connect(**params), commit),
    )
    try:
        log = reader.read("live")
        assert log is not None
        assert len(log.records) == len(first)  # the snapshot from before the commit
        log = reader.read("live")
        assert log is not None
        assert len(log.records) == len(session.events)
    finally:
        reader.close()
        writer.close()
