"""The session's per-step appends of turn boundaries and surface messages, checks inlined.

Methods of :class:`~retinue.session.Session` written apart: ``Session.append``
calls them with itself, as it would call its own, and the loop calls
``Session.append_message`` for each step's message.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._checks import check_boundary
from ._events import (
    AssistantMessage,
    Event,
    EventData,
    SteeringMessage,
    SurfaceOp,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
)
from ._sources import checked_sources
from ._stepcheck import STEP_TYPES, check_step

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["append_boundary", "append_message", "append_to_surface"]

_time_ns = time.time_ns
_get_ident = threading.get_ident
_new_tuple = tuple.__new__


def append_boundary(self: Session, data: TurnStart | TurnEnd) -> Event:
    """Log a ``turn/start`` or ``turn/end``, as ``Session._validate`` and ``Session._record`` would.

    Two of every turn's appends: of their checks only the boundary's is
    left (a turn boundary folds no header and touches no surface), its
    valid case tested inline; check_boundary says what is wrong.
    """
    starts = type(data) is TurnStart
    if (
        (self._turn_open or data.turn <= self._last_turn)
        if starts
        else (not self._turn_open or data.turn != self._last_turn or self._open_step is not None)
    ):
        check_boundary(
            data,
            turn_open=self._turn_open,
            last_turn=self._last_turn,
            open_step=self._open_step,
        )
    events = self._events
    event = _new_tuple(Event, (len(events), _time_ns() // 1_000_000, data, None, None))
    events.append(event)
    if starts:
        self._last_turn = data.turn
        self._last_step = 0
    self._turn_open = starts
    return event


def append_to_surface(
    self: Session,
    data: EventData,
    data_type: type[EventData],
    surface: SurfaceOp,
    source_event_seqs: Sequence[int] | None,
    *,
    chunks_vouched: bool = False,
) -> Event:
    """Log a message appended to the open turn's surface, as ``Session._validate`` and
    ``Session._record`` would.

    The per-step path of messages and tool results: of their checks only the
    sources' and the step's are left, and of their recording the surface's
    append. With *chunks_vouched*, an assistant message's sources are the
    step's chunks, as the loop's are: they are not looked for again.
    """
    events = self._events
    seq = len(events)
    sources: tuple[int, ...] | None = None
    if (
        # A tool result's one call, valid as checked_sources would find it (a tuple is
        # its own tuple()): tested inline, as every tool result is.
        type(source_event_seqs) is tuple
        and len(source_event_seqs) == 1
        and type(first := source_event_seqs[0]) is int
        and 0 <= first < seq
    ):
        sources = source_event_seqs
    elif source_event_seqs is not None:
        sources = checked_sources(data.type, source_event_seqs, seq)
    # The valid cases tested inline; check_step says what is wrong.
    if data_type is SteeringMessage:
        if data.turn != self._last_turn:  # type: ignore[union-attr]
            check_step(data, self._last_turn, self._open_step, self._last_step)
    elif data_type in STEP_TYPES and (
        data.step != self._open_step or data.turn != self._last_turn  # type: ignore[union-attr]
    ):
        check_step(data, self._last_turn, self._open_step, self._last_step)
    if data_type is AssistantMessage:
        self._ledger.take_message(events, data, sources, vouched=chunks_vouched)  # type: ignore[arg-type]
    elif data_type is ToolResultEvent:
        self._ledger.result(data, sources)  # type: ignore[arg-type]
    event = _new_tuple(Event, (seq, _time_ns() // 1_000_000, data, sources, surface))
    events.append(event)
    self._surface.append(event)
    return event


def append_message(
    self: Session, data: AssistantMessage, chunk_seqs: Sequence[int] | None
) -> Event:
    """Append the open step's ``assistant/message`` and notify observers: the loop's path.

    ``append(data, surface="append", source_event_seqs=chunk_seqs)``, where the
    caller vouches that *chunk_seqs* are the seqs of every chunk it logged in the
    step (``Session.append_chunk``), in order (``None`` for none), as the loop's are:
    they are not looked for in the log again. Every other check holds.
    """
    thread = self._thread
    if (
        (thread is not None and thread != _get_ident())
        or not self._turn_open
        or type(data) is not AssistantMessage
    ):
        # What is wrong is said as append says it.
        return self.append(data, surface="append", source_event_seqs=chunk_seqs)
    event = append_to_surface(
        self, data, AssistantMessage, "append", chunk_seqs, chunks_vouched=True
    )
    announcer = self._announcer
    direct = announcer.direct
    if direct is None:
        announcer.announce(event)
    else:
        direct(event)
    return event
