"""The surface kept incrementally agrees with every rebuild of it (SPEC 4.5, 5; R4.19-R4.21, R5.5, R5.6).

Any mix of appends, replaces (within a turn and across turns) and turn
boundaries: after each event, ``derive_messages()`` equals an independent fold
of the log; at the end it equals the history of the same events rebuilt in a
fresh session, through the stored JSON lines, and of every fork at a turn end;
and no snapshot taken on the way changes afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, strategies as st

from retinue import Message, Text
from retinue.session import (
    AssistantMessage,
    ContextMessage,
    Event,
    EventData,
    Replace,
    Session,
    SteeringMessage,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
    project,
)
from retinue.session._codec import decode_event, encode_event

KINDS = ("user", "context", "steering", "assistant", "empty", "replace", "step", "turn")
OPS = st.lists(
    st.tuples(st.sampled_from(KINDS), st.integers(0, 63), st.integers(0, 63)), max_size=40
)


def folded(events: Sequence[Event]) -> list[Message]:
    """The history by a plain list fold of the surface ops (R4.19) and the projection (R5.2)."""
    surface: list[tuple[int, Message | None]] = []
    for event in events:
        op = event.surface_op
        if op == "append":
            surface.append((event.seq, project(event)))
        elif isinstance(op, Replace):
            seqs = [seq for seq, _ in surface]
            first, last = seqs.index(op.start), seqs.index(op.end)
            surface[first : last + 1] = [(event.seq, project(event))]
    return [message for _, message in surface if message is not None]


def surface_seqs(events: Sequence[Event]) -> list[int]:
    """The seqs on the surface, by the same fold."""
    seqs: list[int] = []
    for event in events:
        op = event.surface_op
        if op == "append":
            seqs.append(event.seq)
        elif isinstance(op, Replace):
            first, last = seqs.index(op.start), seqs.index(op.end)
            seqs[first : last + 1] = [event.seq]
    return seqs


def message(kind: str, turn: int, text: str, step: int = 1) -> EventData:
    content = (Text(text),)
    if kind == "user":
        return UserMessage(content)
    if kind == "context":
        return ContextMessage(content)
    if kind == "steering":
        return SteeringMessage(turn, content)
    return AssistantMessage(turn, step, () if kind == "empty" else content)


def replace(session: Session, turn: int, number: int, a: int, b: int) -> None:
    """Replace a range of the surface, picked by *a* and *b*, with one summary event."""
    seqs = surface_seqs(session.events)
    if not seqs:
        return
    first = a % len(seqs)
    last = first + b % (len(seqs) - first)
    summary = message(("context", "assistant", "empty", "user")[a % 4], turn, f"s{number}")
    session.append(
        summary,
        surface=Replace(seqs[first], seqs[last]),
        source_event_seqs=tuple(seqs[first : last + 1]),
    )


@given(ops=OPS)
def test_incremental_history_equals_every_rebuild(ops: list[tuple[str, int, int]]) -> None:
    """R4.19-R4.21, R5.5, R5.6: the incremental surface never drifts from a fold of the log."""
    session = Session.create("s")
    turn, step = 1, 0
    session.append(TurnStart(turn, TurnTrigger("message")))
    snapshots: list[tuple[Sequence[Message], list[Message]]] = []
    for number, (kind, a, b) in enumerate(ops):
        if kind == "replace":
            replace(session, turn, number, a, b)
        elif kind == "step":
            step += 1
            session.append(StepStart(turn, step))
            session.append(StepEnd(turn, step))
        elif kind == "turn":
            session.append(TurnEnd(turn, TurnEndReason.completed()))
            turn, step = turn + 1, 0
            session.append(TurnStart(turn, TurnTrigger("message")))
        elif kind in {"assistant", "empty"}:
            # An assistant message lies inside its step (R4.14).
            step += 1
            session.append(StepStart(turn, step))
            session.append(message(kind, turn, f"m{number}", step), surface="append")
            session.append(StepEnd(turn, step))
        else:
            session.append(message(kind, turn, f"m{number}"), surface="append")
        history = session.derive_messages()
        assert list(history) == folded(session.events)
        snapshots.append((history, list(history)))
    session.append(TurnEnd(turn, TurnEndReason.completed()))
    final = list(session.derive_messages())
    replaces = sum(isinstance(event.surface_op, Replace) for event in session.events)
    assert session.surface_generation == replaces
    assert all(list(snapshot) == taken for snapshot, taken in snapshots)

    rebuilt = Session.from_events(session.header, session.events)
    assert list(rebuilt.derive_messages()) == final
    stored = [decode_event(encode_event(event)) for event in session.events]
    assert stored == list(session.events)
    reloaded = Session.from_events(session.header, stored)
    assert list(reloaded.derive_messages()) == final
    assert reloaded.surface_generation == session.surface_generation
    for event in session.events:
        if isinstance(event.data, TurnEnd):
            child = session.fork("child", event.seq)
            assert list(child.derive_messages()) == folded(session.events[: event.seq + 1])
