"""Session log edges: fork headers, seeded source seqs, huge-int refusals, replay errors."""

from __future__ import annotations

import pytest

from retinue._errors import SessionError
from retinue._stream import TextDelta
from retinue.session import (
    Event,
    Session,
    SessionHeader,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)
from retinue.session._codec import encode_event
from retinue.testing import InvariantError, check_history_replay

BIG = 10**5000  # too many digits for repr to format


def _closed_turn(session: Session) -> None:
    session.append(TurnStart(session.next_turn_number(), TurnTrigger("message")))
    session.append(UserMessage("hi"), surface="append")
    session.append(TurnEnd(session.last_turn, TurnEndReason.completed()))


@pytest.mark.parametrize("cwd", ["C:\\work", "/work"], ids=["windows", "posix"])
def test_a_fork_inherits_any_absolute_cwd_its_source_header_holds(cwd: str) -> None:
    """R4.25: the child inherits the source's cwd, as its header accepted it (either system's)."""
    source = Session.from_events(SessionHeader("src", 0, cwd=cwd), [])
    assert source.fork("empty").header.cwd == cwd
    _closed_turn(source)
    child = source.fork("child")
    assert child.header.cwd == cwd
    assert child.header.parent_session == "src"
    assert child.header.seed_length == 3
    assert list(child.derive_messages()) == list(source.derive_messages())


def _seed_with_sources(sources: object) -> list[Event]:
    return [
        Event(0, 0, TurnStart(1, TurnTrigger("message"))),
        Event(1, 0, UserMessage("a"), None, "append"),
        Event(2, 0, UserMessage("b"), sources, "append"),  # type: ignore[arg-type]
    ]


def test_seeded_source_seqs_are_copied_not_kept_by_reference() -> None:
    """R4.24, R4.7: a seed is deep copied; mutating the caller's list cannot change history."""
    sources = [0, 1]
    session = Session.from_events(SessionHeader("s", 0), _seed_with_sources(sources))
    sources.append(2)
    logged = session.events[2]
    assert logged.source_event_seqs == (0, 1)
    assert '"source_event_seqs":[0,1]' in encode_event(logged)


@pytest.mark.parametrize("sources", [5, 1.5, (s for s in [0])], ids=["int", "float", "generator"])
def test_seeded_source_seqs_of_a_wrong_type_are_refused_typed(sources: object) -> None:
    """R4.22, R4.24: a seed is validated like an append; a non-sequence is INVALID_SOURCES or taken."""
    if isinstance(sources, int | float):
        with pytest.raises(SessionError) as caught:
            Session.from_events(SessionHeader("s", 0), _seed_with_sources(sources))
        assert caught.value.code == "INVALID_SOURCES"
        assert "event seq 2" in str(caught.value)
    else:
        session = Session.from_events(SessionHeader("s", 0), _seed_with_sources(sources))
        assert session.events[2].source_event_seqs == (0,)


@pytest.mark.parametrize(
    ("surface", "sources", "code"),
    [(BIG, None, "INVALID_SURFACE_OP"), ("append", BIG, "INVALID_SOURCES")],
    ids=["surface-op", "sources"],
)
def test_a_huge_int_surface_op_or_sources_is_refused_typed(
    surface: object, sources: object, code: str
) -> None:
    """R4.6, R4.22: refused with a code, never a bare ValueError from formatting the int."""
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    with pytest.raises(SessionError) as caught:
        session.append(UserMessage("x"), surface=surface, source_event_seqs=sources)  # type: ignore[arg-type]
    assert caught.value.code == code
    assert len(session.events) == 1


def test_history_replay_of_a_log_with_an_unstorable_chunk_fails_as_an_invariant() -> None:
    """R5.6: a log that cannot be rebuilt is an InvariantError, whatever refused it."""
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    session.append(StepStart(1, 1))
    session.append_chunk(1, 1, TextDelta(True, "x"))  # unchecked: a bool index
    session.append(StepEnd(1, 1))
    session.append(TurnEnd(1, TurnEndReason.completed()))
    with pytest.raises(InvariantError, match=r"R5\.6: the log cannot be replayed"):
        check_history_replay(list(session.events))
