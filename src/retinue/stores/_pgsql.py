"""The SQL of the PostgreSQL store: a group commit's checks and writes, and a session's reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, final

import attrs

from retinue._errors import StoreError
from retinue.session._codec import encode_event, encode_header

from ._backend import AppendBatch
from ._common import already_exists, seq_conflict
from ._pgclaims import SessionClaims
from ._pgrefusals import claim_lost, commit_unknown
from ._pgschema import in_schema, psycopg_module

if TYPE_CHECKING:
    import psycopg

__all__ = ["SessionTables"]


@final
class SessionTables:
    """Statements on ``retinue_sessions`` and ``retinue_segments``, run on a given connection.

    A group commit locks the group's session rows, checks each batch's next
    seq, inserts the rows of created sessions, then COPYs the events: a
    segment row holds the canonical lines of one committed batch. *unsure*
    is the backend's set of ids whose create may have committed with its
    reply lost, which a retry of that create recognises.
    """

    def __init__(self, schema: str, claims: SessionClaims, unsure: set[str]) -> None:
        self._schema = schema
        self._claims = claims
        self._unsure = unsure

    def _sql(self, text: str) -> str:
        return in_schema(self._schema, text)

    def commit(
        self,
        conn: psycopg.Connection[Any],
        batches: Sequence[AppendBatch],
        results: list[StoreError | None],
    ) -> None:
        """:meth:`write_group` in one transaction on *conn*, committed; ``COMMIT_UNKNOWN`` if
        *conn* is lost once the COMMIT may have been sent."""
        committing = False
        try:
            with conn.transaction():
                self.write_group(conn, batches, results)
                committing = True
        except psycopg_module().OperationalError as exc:
            if committing and conn.broken:
                raise commit_unknown(exc) from exc
            raise

    def write_group(
        self,
        conn: psycopg.Connection[Any],
        batches: Sequence[AppendBatch],
        results: list[StoreError | None],
    ) -> None:
        live = [index for index, result in enumerate(results) if result is None]
        # NO KEY UPDATE: a commit changes next_seq, never the id. FOR UPDATE would also wait for
        # the KEY SHARE lock an insert into a table with a foreign key to the row takes, yet it
        # still waits for a claim's handover (FOR SHARE) and another writer's commit.
        rows = conn.execute(
            self._sql(
                "SELECT id, next_seq, header FROM {schema}.retinue_sessions "
                "WHERE id = ANY(%s) FOR NO KEY UPDATE"
            ),
            ([batches[index].session_id for index in live],),
        ).fetchall()
        stored = {session_id: (next_seq, header) for session_id, next_seq, header in rows}
        unlocked = self._claims.unlocked(conn, [batches[index].session_id for index in live])
        todo: dict[int, AppendBatch] = {}
        for index in live:
            batch = batches[index]
            if batch.session_id in unlocked:
                results[index] = claim_lost(
                    batch.session_id, taken=self._claims.taken_elsewhere(batch.session_id)
                )
                continue
            outcome = self._check(conn, batch, stored.get(batch.session_id))
            if isinstance(outcome, StoreError):
                results[index] = outcome
            elif outcome is not None:
                todo[index] = outcome
        self._insert_created(conn, todo, results)
        self._append(conn, list(todo.values()))

    def delete(self, conn: psycopg.Connection[Any], session_id: str) -> None:
        """Delete the session's segments, then its row, in one transaction on *conn*.

        Its row is locked first and its claim checked under that lock, as a group
        commit checks a write's: a claim lost with the lock connection may be
        another store's by now, whose session this must not delete."""
        with conn.transaction():
            row = conn.execute(
                self._sql("SELECT 1 FROM {schema}.retinue_sessions WHERE id = %s FOR UPDATE"),
                (session_id,),
            ).fetchone()
            if row is None:
                raise StoreError(f"session {session_id!r} is not stored", code="SESSION_NOT_FOUND")
            if self._claims.unlocked(conn, [session_id]):
                raise claim_lost(session_id, taken=self._claims.taken_elsewhere(session_id))
            conn.execute(
                self._sql("DELETE FROM {schema}.retinue_segments WHERE session_id = %s"),
                (session_id,),
            )
            conn.execute(
                self._sql("DELETE FROM {schema}.retinue_sessions WHERE id = %s"), (session_id,)
            )

    def locked_rows(self, conn: psycopg.Connection[Any], session_ids: list[str]) -> set[str]:
        """Which of *session_ids* are stored with their row locked by another transaction.

        Asked once a commit has waited out the lock timeout: a row the skipping
        query does not return, though stored, is locked. Locks nothing past the
        transaction, which writes nothing."""
        with conn.transaction():
            stored = conn.execute(
                self._sql("SELECT id FROM {schema}.retinue_sessions WHERE id = ANY(%s)"),
                (session_ids,),
            ).fetchall()
            free = conn.execute(
                self._sql(
                    "SELECT id FROM {schema}.retinue_sessions WHERE id = ANY(%s) "
                    "FOR NO KEY UPDATE SKIP LOCKED"
                ),
                (session_ids,),
            ).fetchall()
        return {row[0] for row in stored} - {row[0] for row in free}

    def _insert_created(
        self,
        conn: psycopg.Connection[Any],
        todo: dict[int, AppendBatch],
        results: list[StoreError | None],
    ) -> None:
        """Insert the rows of the sessions *todo* creates; check again those found stored.

        A create of another writer still committing (its process killed, so its
        lock is gone) was not seen by the row query: the insert waits for it
        and, once it commits, inserts nothing, so the create is refused as a
        duplicate (or, if it was ours with its reply lost, continued) rather
        than failing the whole group on the unique key.
        """
        creates = {index: batch for index, batch in todo.items() if batch.header is not None}
        if not creates:
            return
        with conn.cursor() as cursor:
            cursor.executemany(
                self._sql(
                    "INSERT INTO {schema}.retinue_sessions (id, header, created_at, next_seq) "
                    "VALUES (%s, %s, %s, 0) ON CONFLICT (id) DO NOTHING RETURNING id"
                ),
                [
                    (b.session_id, encode_header(b.header), b.header.created_at)
                    for b in creates.values()
                    if b.header
                ],
                returning=True,
            )
            inserted: set[str] = set()
            while True:
                inserted.update(row[0] for row in cursor.fetchall())
                if not cursor.nextset():
                    break
        for index, batch in creates.items():
            if batch.session_id not in inserted:
                outcome = self._check(conn, batch, self._locked_row(conn, batch.session_id))
                del todo[index]
                if isinstance(outcome, StoreError):
                    results[index] = outcome
                elif outcome is not None:
                    todo[index] = outcome

    def _locked_row(self, conn: psycopg.Connection[Any], session_id: str) -> tuple[int, str]:
        """The next seq and header of a session another transaction has just stored."""
        row = conn.execute(
            self._sql(
                "SELECT next_seq, header FROM {schema}.retinue_sessions "
                "WHERE id = %s FOR NO KEY UPDATE"
            ),
            (session_id,),
        ).fetchone()
        assert row is not None, "a row that made an insert conflict is never deleted"
        return row[0], row[1]

    def _check(
        self, conn: psycopg.Connection[Any], batch: AppendBatch, row: tuple[int, str] | None
    ) -> AppendBatch | StoreError | None:
        """What of *batch* is left to write (``None``: nothing), or why it is refused."""
        session_id = batch.session_id
        if row is None:
            if batch.header is not None:
                return batch
            return StoreError(f"session {session_id!r} is not stored", code="SESSION_NOT_FOUND")
        next_seq, header = row
        if batch.header is not None:
            # Only a create of ours whose commit went unanswered may find its own row.
            if session_id not in self._unsure or header != encode_header(batch.header):
                return already_exists(session_id)
            batch = attrs.evolve(batch, header=None)
        elif batch.truncate_to is not None and batch.truncate_to != batch.first_seq:
            return seq_conflict(session_id, next_seq, batch.first_seq)
        if next_seq == batch.first_seq or batch.truncate_to is not None:
            return batch
        return self._unstored_part(conn, batch, next_seq)

    def _unstored_part(
        self, conn: psycopg.Connection[Any], batch: AppendBatch, next_seq: int
    ) -> AppendBatch | StoreError | None:
        """*batch* less the leading events stored by a commit whose reply was lost.

        Stored events that differ are another writer's: ``SEQ_CONFLICT``."""
        first = batch.first_seq
        overlap = min(next_seq - first, len(batch.events))
        if overlap <= 0 or self._stored_lines(conn, batch.session_id, first, first + overlap) != [
            encode_event(event) for event in batch.events[:overlap]
        ]:
            return seq_conflict(batch.session_id, next_seq, first)
        if overlap == len(batch.events):
            return None
        return attrs.evolve(batch, first_seq=first + overlap, events=batch.events[overlap:])

    def _stored_lines(
        self, conn: psycopg.Connection[Any], session_id: str, start: int, end: int
    ) -> list[str]:
        """The stored event lines with ``start <= seq < end`` (segments are contiguous)."""
        rows = conn.execute(
            self._sql(
                "SELECT first_seq, body FROM {schema}.retinue_segments WHERE session_id = %s "
                "AND first_seq < %s AND first_seq + count > %s ORDER BY first_seq"
            ),
            (session_id, end, start),
        ).fetchall()
        lines = [line for _, body in rows for line in body.split("\n")]
        return lines[start - rows[0][0] : end - rows[0][0]] if rows else []

    def _append(self, conn: psycopg.Connection[Any], batches: list[AppendBatch]) -> None:
        """Write *batches*, whose created sessions' rows are inserted already."""
        with conn.cursor() as cursor:
            for batch in batches:
                if batch.truncate_to is not None:
                    self._truncate(cursor, batch.session_id, batch.truncate_to)
            copy_sql = self._sql(
                "COPY {schema}.retinue_segments (session_id, first_seq, count, body) FROM STDIN"
            )
            with cursor.copy(copy_sql) as copy:
                for batch in batches:
                    if batch.events:
                        body = "\n".join([encode_event(event) for event in batch.events])
                        copy.write_row((batch.session_id, batch.first_seq, len(batch.events), body))
            cursor.executemany(
                self._sql("UPDATE {schema}.retinue_sessions SET next_seq = %s WHERE id = %s"),
                [(batch.first_seq + len(batch.events), batch.session_id) for batch in batches],
            )

    def _truncate(self, cursor: psycopg.Cursor[Any], session_id: str, keep: int) -> None:
        """Drop stored events with ``seq >= keep``, cutting a segment that straddles it."""
        cursor.execute(
            self._sql(
                "DELETE FROM {schema}.retinue_segments WHERE session_id = %s AND first_seq >= %s"
            ),
            (session_id, keep),
        )
        row = cursor.execute(
            self._sql(
                "SELECT first_seq, body FROM {schema}.retinue_segments WHERE session_id = %s "
                "ORDER BY first_seq DESC LIMIT 1"
            ),
            (session_id,),
        ).fetchone()
        if row is None:
            return
        first, body = row
        lines = body.split("\n")
        if first + len(lines) > keep:
            kept = lines[: keep - first]
            cursor.execute(
                self._sql(
                    "UPDATE {schema}.retinue_segments SET count = %s, body = %s "
                    "WHERE session_id = %s AND first_seq = %s"
                ),
                (len(kept), "\n".join(kept), session_id, first),
            )

    def read_rows(
        self, conn: psycopg.Connection[Any], session_id: str, *, lock_timeout_ms: int
    ) -> tuple[tuple[str, int], list[tuple[int, int, str]]] | None:
        """The session's row and its segment rows, or ``None`` if it is not stored; each
        statement gives up on a lock held elsewhere after *lock_timeout_ms*."""
        # One snapshot, so the rows and next_seq are one commit's: read apart, a
        # commit between them looks like a seq gap.
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            conn.execute(f"SET LOCAL lock_timeout = '{lock_timeout_ms}ms'")
            row = conn.execute(
                self._sql("SELECT header, next_seq FROM {schema}.retinue_sessions WHERE id = %s"),
                (session_id,),
            ).fetchone()
            if row is None:
                return None
            segments = conn.execute(
                self._sql(
                    "SELECT first_seq, count, body FROM {schema}.retinue_segments "
                    "WHERE session_id = %s ORDER BY first_seq"
                ),
                (session_id,),
            ).fetchall()
        return row, segments
