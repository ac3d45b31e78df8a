"""A session of finished turns and the lines a JSONL store loads, for the JSONL file tests."""

from __future__ import annotations

from pathlib import Path

from retinue.session import Session
from retinue.stores import JSONLStore
from retinue.testing import check_session_invariants
from tests.stores._kit import lines, run_turn


def session_of(session_id: str, turns: int, cwd: str | None = None) -> Session:
    """A new session *session_id* (at *cwd*) holding *turns* finished turns."""
    session = Session.create(session_id, cwd=cwd)
    for index in range(turns):
        run_turn(session, f"turn {index}")
    return session


async def load_lines(root: Path, session_id: str) -> list[str]:
    """The lines of *session_id* loaded from the JSONL store at *root*, its invariants checked."""
    async with JSONLStore(root) as store:
        loaded = await store.load(session_id)
    check_session_invariants(loaded.events)
    return lines(loaded.events)
