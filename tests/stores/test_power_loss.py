"""What a power loss leaves after an unacknowledged append, and what loading keeps (R11.8)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from retinue._errors import CorruptSessionError
from retinue.session import Session, TurnEnd
from retinue.stores import JSONLStore
from tests.stores._kit import lines, run_turn
from tests.stores.conftest import jsonl_file

LOST_PAGE = 700
"""How many bytes of the unacknowledged append never reached the disk (read back as NULs)."""


async def _acknowledged(root: Path, session_id: str) -> Session:
    """Store two whole turns; return the session, to be appended to without a sync."""
    session = Session.create(session_id)
    run_turn(session)
    run_turn(session)
    async with JSONLStore(root) as store:
        store.attach_new(session)
        await store.detach(session)
    return session


def _lose_power(root: Path, session: Session, start: int, end: int) -> None:
    """Append events ``start..end`` whose first page was lost: NULs, then whole lines."""
    tail = "".join(line + "\n" for line in lines(session.events[start:end])).encode()
    with jsonl_file(root, session.id).open("ab") as file:
        file.write(b"\0" * LOST_PAGE + tail[LOST_PAGE:])


async def test_a_lost_page_of_an_unacknowledged_append_is_dropped_with_what_follows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """R11.8: NULs where an unsynced append's first page should be, then well-formed lines
    and no turn/end: the load keeps every acknowledged event, drops and truncates the rest,
    and warns naming the session and how many records it dropped."""
    root = tmp_path / "sessions"
    session = await _acknowledged(root, "p")
    acknowledged = len(session.events)
    run_turn(session)
    _lose_power(root, session, acknowledged, len(session.events) - 1)
    with caplog.at_level(logging.WARNING, logger="retinue.stores"):
        async with JSONLStore(root) as store:
            loaded = await store.load("p")
            await store.detach(loaded)
    assert lines(loaded.events[:]) == lines(session.events[:acknowledged])
    [warning] = [record.getMessage() for record in caplog.records if "'p'" in record.getMessage()]
    assert "dropping the" in warning
    stored = jsonl_file(root, "p").read_bytes()
    assert b"\0" not in stored
    assert stored.count(b"\n") == 1 + acknowledged


async def test_a_lost_page_before_a_turn_end_that_reached_the_disk_is_refused(
    tmp_path: Path,
) -> None:
    """R11.8: when the whole lines after the lost page include a turn/end, the damage lies
    inside the committed region: the load fails and nothing is truncated."""
    root = tmp_path / "sessions"
    session = await _acknowledged(root, "q")
    acknowledged = len(session.events)
    run_turn(session)
    assert isinstance(session.events[-1].data, TurnEnd)
    _lose_power(root, session, acknowledged, len(session.events))
    before = jsonl_file(root, "q").read_bytes()
    async with JSONLStore(root) as store:
        with pytest.raises(CorruptSessionError, match=r"'q'.*committed region") as caught:
            await store.load("q")
    assert caught.value.code == "CORRUPT_SESSION"
    assert jsonl_file(root, "q").read_bytes() == before
