"""A session as JSONL text (R11.13): what ``sessions export`` writes and ``sessions import`` reads."""

from __future__ import annotations

import re
from collections.abc import Iterator

from retinue._errors import CorruptSessionError, InvalidJsonError, RetinueError, SessionError
from retinue.session import Event, Session, SessionHeader
from retinue.session._codec import decode_event, encode_event, encode_header
from retinue.stores._common import check_version, parse_header

__all__ = ["read_jsonl", "to_jsonl"]


def to_jsonl(session: Session) -> str:
    """Return *session* in the JSONL format (R11.13): the header line, then one line per event."""
    lines = [encode_header(session.header), *(encode_event(event) for event in session.events)]
    return "\n".join(lines) + "\n"


def read_jsonl(text: str, *, source: str, new_id: str | None = None) -> Session:
    """Parse an exported session; every event is validated as it is replayed.

    Blank lines at the end (an editor's trailing newline) are skipped; a bad
    line, a blank one before the last record, or an event out of seq order or
    breaking an invariant (SPEC 4.4; a log may end inside a turn, as a crash
    leaves it), is reported with its line number.
    """
    numbered = _records(text, source)
    if not numbered:
        raise RetinueError(f"{source} is empty", code="CORRUPT_SESSION")
    header = parse_header(numbered[0][1], source, at=f"{source}, line {numbered[0][0]}")
    # Stored as it stands, it could never be loaded, and its id would stay taken.
    check_version(header, f"{source}, line {numbered[0][0]}")
    events = [
        (number, _decode_line(line, number, source, header.id)) for number, line in numbered[1:]
    ]
    # A fork's seed is the start of its log (R4.25): a longer one names events not there.
    if header.seed_length is not None and header.seed_length > len(events):
        raise CorruptSessionError(
            f"{source}, line {numbered[0][0]}: the header's seed_length {header.seed_length} "
            f"is more than the {len(events)} events that follow it"
        )
    if new_id is not None:
        header = SessionHeader(
            id=new_id,
            created_at=header.created_at,
            version=header.version,
            cwd=header.cwd,
            parent_session=header.parent_session,
            seed_length=header.seed_length,
        )
    session = _replayed(header, events, source)
    _check_invariants(session, [number for number, _ in events], source)
    return session


def _records(text: str, source: str) -> list[tuple[int, str]]:
    """The lines of *text* up to its last that is not blank, each with its number.

    A store reads every line of a log as a record, and refuses a blank one before
    the last (a JSONL file's, say): stored, such a log would not load as it reads here.
    """
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise CorruptSessionError(
                f"{source}, line {number}: a blank line inside the log (every line up to "
                "the last is a record: the header, then one event per line)"
            )
    return list(enumerate(lines, 1))


def _check_invariants(session: Session, lines: list[int], source: str) -> None:
    """Refuse a log breaking an invariant replaying it does not check (a result of no
    call, a step in another turn), naming the line of the event that breaks it: stored,
    its history would be no valid transcript. *lines* holds each event's line."""
    from retinue.testing import InvariantError, check_session_invariants

    try:
        check_session_invariants(session.events)
    except InvariantError as exc:
        # The checker names the event by its seq, which is its index among the events.
        named = re.match(r"seq (\d+) ", str(exc))
        where = f"{source}, line {lines[int(named[1])]}" if named else source
        raise CorruptSessionError(f"{where}: {exc}") from exc


def _replayed(header: SessionHeader, events: list[tuple[int, Event]], source: str) -> Session:
    """The session of *events*, each with its line number; a refusal names the line of its event."""
    line = 0

    def each() -> Iterator[Event]:
        nonlocal line
        # Each event is checked as it is taken, so the one refused is the last taken.
        for number, event in events:
            line = number
            yield event

    try:
        return Session.from_events(header, each())
    except (SessionError, InvalidJsonError) as exc:
        raise CorruptSessionError(f"{source}, line {line}: {exc.message}", code=exc.code) from exc


def _decode_line(line: str, number: int, source: str, session_id: str) -> Event:
    try:
        return decode_event(line, session_id=session_id)
    except CorruptSessionError as exc:
        raise CorruptSessionError(f"{source}, line {number}: {exc}") from exc
