"""A stored record whose type was changed to one this version does not know: the load refuses
the step it breaks, as ``sessions import`` refuses it, where it loaded as a plugin event."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from retinue._errors import CorruptSessionError
from retinue.session import Session
from retinue.stores import JSONLStore, SQLiteStore
from retinue.stores._writebehind import BufferedStore
from tests.stores._kit import run_turn

Retype = Callable[[Path, int], None]


def _retyped(line: str) -> str:
    return re.sub(r'"type":"[^"]+"', '"type":"zzz/unknown"', line, count=1)


def _retype_in_sqlite(root: Path, seq: int) -> None:
    with sqlite3.connect(root / "sessions.db") as conn:
        first, body = conn.execute(
            "SELECT first_seq, body FROM segments WHERE first_seq <= ? AND first_seq + count > ?",
            (seq, seq),
        ).fetchone()
        lines = body.split("\n")
        lines[seq - first] = _retyped(lines[seq - first])
        conn.execute("UPDATE segments SET body = ? WHERE first_seq = ?", ("\n".join(lines), first))
    conn.close()


def _retype_in_jsonl(root: Path, seq: int) -> None:
    (path,) = (root / "jsonl").glob("*/retyped.jsonl")
    lines = path.read_text().split("\n")
    lines[seq + 1] = _retyped(lines[seq + 1])  # the header is line 1
    path.write_text("\n".join(lines))


STORES: dict[str, tuple[Callable[[Path], BufferedStore], Retype]] = {
    "sqlite": (lambda root: SQLiteStore(root / "sessions.db"), _retype_in_sqlite),
    "jsonl": (lambda root: JSONLStore(root / "jsonl"), _retype_in_jsonl),
}


def _seq_of(session: Session, kind: str, nth: int = 0) -> int:
    return [event.seq for event in session.events if event.type == kind][nth]


@pytest.mark.parametrize(
    ("retyped", "refused", "rule"),
    [
        ("assistant/chunk", "assistant/message", "R7.36"),
        ("tool/call", "tool/result", "R4.15"),
    ],
)
@pytest.mark.parametrize("kind", STORES.keys())
async def test_a_load_refuses_a_step_broken_by_a_record_of_unknown_type(
    tmp_path: Path, kind: str, retyped: str, refused: str, rule: str
) -> None:
    """R11.8: a record retyped to an unknown type loaded as a plugin event (R4.11), and its
    step then broke the log invariants: a message sourced from a chunk that is none
    (R7.36), a result of no call (R4.15); show, export and resume used it. Now the load
    refuses it, naming the session and the event that breaks the rule."""
    make, retype = STORES[kind]
    async with make(tmp_path) as store:
        session = Session.create("retyped")
        store.attach_new(session)
        run_turn(session)
        run_turn(session)
        await store.detach(session)
    # The second turn's: the first turn's records lie in an earlier segment or line.
    retype(tmp_path, _seq_of(session, retyped, nth=-1))
    async with make(tmp_path) as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("retyped")
    assert caught.value.code == "CORRUPT_SESSION"
    message = caught.value.message
    assert "'retyped'" in message
    assert f"seq {_seq_of(session, refused, nth=-1)} ({refused}): {rule}" in message
    if kind == "jsonl":
        assert f", line {_seq_of(session, refused, nth=-1) + 2}: " in message
