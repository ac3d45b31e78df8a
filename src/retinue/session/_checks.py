"""A session's checks of events beyond their own constructors': seeds, folds, chunks, forks."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NoReturn

from retinue._errors import InvalidJsonError, SessionError
from retinue._lossless import shown

from ._chunkcheck import chunk_event_problem
from ._events import (
    AssistantChunk,
    CustomEvent,
    EpochHeader,
    Event,
    EventData,
    RequestHeader,
    RequestHeaderDelta,
    TurnEnd,
    TurnStart,
)
from ._header import fold_header
from ._sources import as_sources

__all__ = [
    "as_events",
    "check_boundary",
    "check_chunk_event",
    "exact_op",
    "folded",
    "fork_seed",
    "own_parts",
    "refuse_outside_turn",
    "refuse_seed_event",
    "refuse_surface_op",
    "refuse_thread",
]


def folded(current: EpochHeader | None, data: RequestHeader | RequestHeaderDelta) -> EpochHeader:
    """The header fold after *data*; a delta that cannot apply is a typed refusal."""
    try:
        return fold_header(current, data)
    except TypeError as exc:
        # Every field is type-checked when built, a str subclass held as its plain
        # text, but a schema built with attrs' validators switched off may name its
        # tool by anything: an unhashable name cannot key the fold's tables. The one
        # failure left; refuse it like a corrupt delta.
        raise SessionError(f"{data.type} cannot be folded: {exc}", code="CORRUPT_HEADER") from exc


def check_chunk_event(data: AssistantChunk) -> None:
    """Refuse a chunk event whose stored line would not load again (R4.5): the decoder's rules."""
    problem = chunk_event_problem(*data)
    if problem is not None:
        raise InvalidJsonError(f"{data.type}: {problem}")


def own_parts(event: Event) -> Event:
    """*event* with its source seqs a tuple of its own and its surface op exact, as append
    makes them (R4.24).

    A seed's list would stay the caller's to change, and an int or float is refused typed.
    """
    sources = event.source_event_seqs
    op: object = event.surface_op  # a seed built without a type checker may hold anything
    if (sources is None or type(sources) is tuple) and (type(op) is str or not isinstance(op, str)):
        return event
    return event._replace(
        source_event_seqs=None if sources is None else as_sources(sources),
        surface_op=exact_op(op),
    )


def exact_op(op: object) -> Any:
    """*op* as it is logged: a str equal to ``"append"`` (a StrEnum member) as that literal.

    The checks and the encoder then read it by ``==``, which a subclass may redefine.
    Anything else is kept for the check to refuse unless it is a ``Replace``.
    """
    if isinstance(op, str) and str.__eq__(op, "append"):
        return "append"
    return op


def as_events(session_id: object, events: Iterable[Event]) -> Iterator[Event]:
    """An iterator over the *events* given to a session; a non-iterable is refused typed."""
    try:
        return iter(events)
    except TypeError:
        raise SessionError(
            f"session {shown(session_id)}: events must be an iterable of Events, got {shown(events)}",
            code="INVALID_EVENT",
        ) from None


def refuse_seed_event(session_id: str, index: int, event: Event) -> NoReturn:
    """Raise the refusal of seed *event* at *index*: its seq or time is not what a store writes."""
    seq = event.seq
    if type(seq) is not int or seq != index:
        raise SessionError(
            f"session {session_id!r}: seed event has seq {shown(seq)}, expected {index}",
            code="SEQ_GAP",
        )
    raise SessionError(
        f"session {session_id!r}: seed event seq {index} has time {shown(event.time)}, "
        "not an integer a store can write",
        code="INVALID_TIME",
    )


def fork_seed(events: list[Event], boundary: int | None) -> list[Event]:
    """The events a fork at *boundary* copies: ``0..boundary`` (R4.25); the last by default.

    Raises:
        SessionError: *boundary* is not an existing seq (``INVALID_BOUNDARY``) or
            inside a turn: neither a ``turn/end`` nor a plugin event between
            turns (``OPEN_TURN``).
    """
    if boundary is None:
        boundary = len(events) - 1
    elif type(boundary) is not int:
        # A bool would index as 0 or 1, a float not at all.
        raise SessionError(
            f"fork boundary {shown(boundary)} is not a seq (an int)", code="INVALID_BOUNDARY"
        )
    if not 0 <= boundary < len(events):
        raise SessionError(f"fork boundary {shown(boundary)} is not a seq", code="INVALID_BOUNDARY")
    data = events[boundary].data
    if not isinstance(data, TurnEnd) and not _between_turns(events, boundary):
        raise SessionError(
            f"fork boundary {boundary} ({data.type}) lies inside a turn: fork at a turn/end",
            code="OPEN_TURN",
        )
    return events[: boundary + 1]


def _between_turns(events: list[Event], boundary: int) -> bool:
    """Whether the event at *boundary* is a plugin's, logged while no turn was open.

    Only plugin events may sit between turns (R4.11, R4.13); a fork there copies
    no part of a turn, as one at the ``turn/end`` before them would not.
    """
    if type(events[boundary].data) is not CustomEvent:
        return False
    for event in reversed(events[:boundary]):
        if isinstance(event.data, TurnStart | TurnEnd):
            return isinstance(event.data, TurnEnd)
    return True


def refuse_thread(session_id: str) -> NoReturn:
    """Raise the refusal of an append from a thread other than the observers' (R4.8)."""
    raise SessionError(
        f"session {session_id!r}: appended from a thread other than the one its observers "
        "run on; from a worker thread, append through trio.from_thread.run_sync",
        code="WRONG_THREAD",
    )


def refuse_outside_turn(kind: str) -> NoReturn:
    """Raise the refusal of a built-in event appended between turns (R4.13)."""
    raise SessionError(f"{kind} appended outside a turn", code="NO_OPEN_TURN")


def refuse_surface_op(kind: str, op: object, *, turn_open: bool) -> NoReturn:
    """Raise the refusal of a surface event's *op*, the first rule it breaks (R4.19)."""
    if op is None:
        raise SessionError(f"{kind} needs a surface op", code="MISSING_SURFACE_OP")
    if not turn_open:
        refuse_outside_turn(kind)
    raise SessionError(
        f"{kind}: surface op {shown(op)} is neither 'append' nor a Replace",
        code="INVALID_SURFACE_OP",
    )


def check_boundary(
    data: EventData, *, turn_open: bool, last_turn: int, open_step: int | None
) -> None:
    """Refuse a ``turn/start`` while a turn is open or numbered at or below the last turn
    (R4.14, R4.16), and a ``turn/end`` of another turn or with a step open (R4.14).

    A number above the next one is taken: a log may continue another's numbering.
    """
    if isinstance(data, TurnStart):
        if turn_open:
            raise SessionError("turn/start while a turn is open", code="TURN_OVERLAP")
        if data.turn <= last_turn:
            raise SessionError(
                f"turn/start {data.turn} does not follow turn {last_turn}: turn numbers "
                f"increase (the next is {last_turn + 1})",
                code="TURN_NUMBER",
            )
    if isinstance(data, TurnEnd) and (not turn_open or data.turn != last_turn):
        raise SessionError(
            f"turn/end {data.turn} does not close the open turn", code="TURN_MISMATCH"
        )
    if isinstance(data, TurnEnd) and open_step is not None:
        raise SessionError(
            f"turn/end {data.turn} while step {open_step} is open: step/end comes first",
            code="STEP_OPEN",
        )
