"""The log checker and a rebuilt session agree on random surface ops, good and bad.

Logs that open a turn with one append, then go on with appends, replaces and ops of neither
kind (R4.6) across steps and turns. A replace names two seqs of the current surface, now
and then reversed, now and then any earlier seq (one replaced already, or no surface event
at all), with source seqs that name its range exactly, miss one of it, name one more, or
are absent (R4.19). Property: :func:`check_session_invariants` refuses a log exactly when
``Session.from_events`` does, at the same seq; a log both take also passes
:func:`check_history_replay` (R5.6).
"""

from __future__ import annotations

import re
from typing import cast

import attrs
from hypothesis import given, strategies as st

from retinue import Text
from retinue._errors import SessionError
from retinue.session import (
    ContextMessage,
    Event,
    EventData,
    Replace,
    Session,
    SessionHeader,
    StepEnd,
    StepStart,
    SurfaceOp,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)
from retinue.testing import InvariantError, check_history_replay, check_session_invariants

KINDS = ("append", "append", "append", "replace", "replace", "bad-op", "step", "turn")
SOURCES = ("exact", "exact", "exact", "exact", "miss-one", "one-more", "absent")


@attrs.define
class _Builder:
    """A log built event by event, with the surface a session would have if it took it."""

    draw: st.DataObject
    events: list[Event] = attrs.field(factory=list)
    surface: list[int] = attrs.field(factory=list)
    turn: int = 1
    step: int = 0

    def log(
        self, data: EventData, op: object = None, sources: tuple[int, ...] | None = None
    ) -> None:
        """Log *data* next with *op*, of any value, and *sources*."""
        surface = cast("SurfaceOp | None", op)
        self.events.append(Event(len(self.events), 0, data, sources, surface))

    def message(self) -> EventData:
        kind = self.draw.draw(st.sampled_from([UserMessage, ContextMessage]))
        return kind((Text(f"m{len(self.events)}"),))

    def append(self) -> None:
        self.surface.append(len(self.events))
        self.log(self.message(), "append")

    def replace(self) -> None:
        start, end = self.ends()
        sources = self.sources(start, end)
        seq = len(self.events)
        self.log(self.message(), Replace(start, end), sources)
        if start in self.surface and end in self.surface:
            first, last = self.surface.index(start), self.surface.index(end)
            if first <= last:
                self.surface[first : last + 1] = [seq]

    def ends(self) -> tuple[int, int]:
        """Two seqs of the surface, now and then reversed, or now and then any earlier seqs."""
        anywhere = st.integers(0, len(self.events) - 1)
        if self.draw.draw(st.integers(0, 19)) == 0:
            return self.draw.draw(anywhere), self.draw.draw(anywhere)
        index = st.integers(0, len(self.surface) - 1)
        first, last = sorted((self.draw.draw(index), self.draw.draw(index)))
        if self.draw.draw(st.integers(0, 4)) == 0:
            first, last = last, first
        return self.surface[first], self.surface[last]

    def sources(self, start: int, end: int) -> tuple[int, ...] | None:
        """Source seqs for a replace of *start* through *end*, drawn right or wrong."""
        kind = self.draw.draw(st.sampled_from(SOURCES))
        if kind == "absent":
            return None
        exact = self.range(start, end)
        if kind == "miss-one" and len(exact) > 1:
            exact.remove(self.draw.draw(st.sampled_from(exact)))
        elif kind == "one-more" or not exact:
            others = [seq for seq in range(len(self.events)) if seq not in exact]
            if others:
                exact.append(self.draw.draw(st.sampled_from(others)))
        return tuple(exact) or None

    def range(self, start: int, end: int) -> list[int]:
        """The surface seqs from *start* through *end* (reversed if need be), if both are on it."""
        if start not in self.surface or end not in self.surface:
            return []
        first, last = sorted((self.surface.index(start), self.surface.index(end)))
        return self.surface[first : last + 1]

    def boundaries(self, kind: str) -> None:
        if kind == "step":
            self.step += 1
            self.log(StepStart(self.turn, self.step))
            self.log(StepEnd(self.turn, self.step))
        else:
            self.log(TurnEnd(self.turn, TurnEndReason.completed()))
            self.turn, self.step = self.turn + 1, 0
            self.log(TurnStart(self.turn, TurnTrigger("message")))


def _checker_refusal(events: list[Event]) -> str | None:
    """What the checker says of *events*, or None if it takes them."""
    try:
        check_session_invariants(events)
    except InvariantError as error:
        return str(error)
    return None


def _session_refusal(events: list[Event]) -> SessionError | None:
    """Why a session refuses to rebuild *events*, or None if it takes them."""
    try:
        Session.from_events(SessionHeader("s", 0), events)
    except SessionError as error:
        return error
    return None


def _seq(pattern: str, message: str) -> int:
    found = re.match(pattern, message)
    assert found, message
    return int(found[1])


@given(st.data())
def test_checker_refuses_the_surface_ops_a_session_refuses(data: st.DataObject) -> None:
    """R4.6, R4.19, R5.6: see the module docstring."""
    builder = _Builder(data)
    builder.log(TurnStart(1, TurnTrigger("message")))
    builder.append()
    for kind in data.draw(st.lists(st.sampled_from(KINDS), max_size=30)):
        if kind == "append":
            builder.append()
        elif kind == "replace":
            builder.replace()
        elif kind == "bad-op":
            op = data.draw(st.sampled_from(["prepend", "", {"op": "append"}, None]))
            builder.log(builder.message(), op)
        else:
            builder.boundaries(kind)
    events = builder.events
    refused, said = _session_refusal(events), _checker_refusal(events)
    if refused is None:
        assert said is None
        check_history_replay(events)
    else:
        assert refused.code in {"INVALID_SURFACE_OP", "MISSING_SURFACE_OP"}, refused.message
        assert said is not None, refused.message
        assert _seq(r"seq (\d+) \(", said) == _seq(r"event seq (\d+) \(", refused.message)
