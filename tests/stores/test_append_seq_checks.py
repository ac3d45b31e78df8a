"""An append must start at the stored log's next seq (R11.4), in every backend that keeps a log
of its own: one starting past it would store a seq gap, and the session would not load again;
one starting before it would store some seqs twice.

Played out on the backends themselves: through a store, the claims (R12.7) keep a second
writer from getting that far, so an append out of step is what a backend is left to refuse.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from retinue.session import Event, Session
from retinue.stores import AppendBatch, StorageBackend
from retinue.stores._memory import MemoryBackend
from retinue.stores._sqlite import SQLiteBackend
from tests.stores._jsonl_files_kit import session_of
from tests.stores._kit import lines, run_turn


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StorageBackend]:
    opened: MemoryBackend | SQLiteBackend = (
        MemoryBackend() if request.param == "memory" else SQLiteBackend(tmp_path / "sessions.db")
    )
    opened.open()
    try:
        yield opened
    finally:
        opened.close()


def _refusal(backend: StorageBackend, batch: AppendBatch) -> str | None:
    """The code *backend* refuses *batch* with, ``None`` if it commits it."""
    [result] = backend.write([batch])
    return None if result is None else result.code


def _from(session: Session, first: int) -> AppendBatch:
    return AppendBatch(session.id, first, tuple(session.events[first:]))


def _stored_lines(backend: StorageBackend, session_id: str) -> list[str]:
    """The stored records of *session_id* as event lines (memory keeps them as events)."""
    stored = backend.read(session_id)
    assert stored is not None
    return [
        lines([record])[0]
        if isinstance(record, Event)
        else record.decode()
        if isinstance(record, bytes)
        else record
        for record in stored.records
    ]


@pytest.mark.parametrize("offset", [1, -1], ids=["past-the-next-seq", "before-the-next-seq"])
def test_an_append_out_of_step_with_the_stored_log_is_refused(
    backend: StorageBackend, offset: int
) -> None:
    """R11.4: an append starting past the stored next seq (a gap) or before it is refused
    SEQ_CONFLICT and stores nothing; the one starting at it is committed."""
    session = session_of("s1", 1)
    stored = len(session.events)
    assert backend.write([AppendBatch("s1", 0, tuple(session.events), header=session.header)]) == [
        None
    ]
    run_turn(session)

    assert _refusal(backend, _from(session, stored + offset)) == "SEQ_CONFLICT"
    assert _stored_lines(backend, "s1") == lines(session.events[:stored])
    assert _refusal(backend, _from(session, stored)) is None
    assert _stored_lines(backend, "s1") == lines(session.events)
