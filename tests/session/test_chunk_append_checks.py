"""``append(AssistantChunk(...))`` and seeds refuse a chunk no store can write (R4.5, R4.24, R1.6).

Only ``append_chunk``, the loop's per-chunk path, is left unchecked (the loop's
assembler refuses a malformed chunk before logging it).
"""

from __future__ import annotations

from typing import Any

import pytest

from retinue._content import Text
from retinue._errors import InvalidJsonError
from retinue._stream import STOP, BlockEnd, Finish, TextDelta, ToolCallDelta
from retinue.session import (
    AssistantChunk,
    Event,
    Session,
    SessionHeader,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
)
from retinue.session._codec import decode_event, encode_event

BIG = 10**5000  # more digits than JSON may write by default

# Each chunk event's data, and what its refusal says after the event type.
UNSTORABLE = {
    "bool-turn": (AssistantChunk(True, 1, TextDelta(0, "x")), "turn and step must be integers"),
    "float-step": (AssistantChunk(1, 1.0, TextDelta(0, "x")), "turn and step must be integers"),  # type: ignore[arg-type]
    "long-turn": (AssistantChunk(BIG, 1, TextDelta(0, "x")), "turn is an integer of more than"),
    "bytes-text": (
        AssistantChunk(1, 1, TextDelta(0, b"x")),  # type: ignore[arg-type]
        "text-delta.text must be a string, got b'x'",
    ),
    "bool-index": (
        AssistantChunk(1, 1, TextDelta(True, "x")),
        "text-delta.index must be an integer (not a bool or float), got True",
    ),
    "nan-index": (
        AssistantChunk(1, 1, TextDelta(float("nan"), "x")),  # type: ignore[arg-type]
        "text-delta.index must be an integer (not a bool or float), got nan",
    ),
    "str-chunk": (AssistantChunk(1, 1, "not a chunk"), "str is not a stream chunk"),  # type: ignore[arg-type]
}

STORABLE = [
    TextDelta(0, "x"),
    ToolCallDelta(2**40, None, '{"a": 1}', "t"),
    BlockEnd(0, Text("x")),
    Finish(STOP),
]


def _in_step() -> tuple[Session, list[Event]]:
    session = Session.create("s")
    seen: list[Event] = []
    session.observe(seen.append)
    session.append(TurnStart(1, TurnTrigger("message")))
    session.append(StepStart(1, 1))
    return session, seen


@pytest.mark.parametrize(("data", "problem"), UNSTORABLE.values(), ids=UNSTORABLE.keys())
def test_append_refuses_an_unstorable_chunk_before_logging_or_notifying(
    data: AssistantChunk, problem: str
) -> None:
    """R4.5: refused naming the type and field; nothing is logged, no observer hears of it."""
    session, seen = _in_step()
    with pytest.raises(InvalidJsonError) as caught:
        session.append(data)
    assert str(caught.value).startswith(f"assistant/chunk: {problem}")
    assert (len(session.events), len(seen)) == (2, 2)


@pytest.mark.parametrize("chunk", STORABLE, ids=lambda chunk: chunk.type)
def test_append_logs_a_storable_chunk_that_loads_back(chunk: Any) -> None:
    """R4.5: the checks refuse only what no store could write."""
    session, seen = _in_step()
    event = session.append(AssistantChunk(1, 1, chunk))
    assert seen[-1] is event
    assert decode_event(encode_event(event)) == event


def _closed(data: AssistantChunk) -> Session:
    """A closed turn whose one chunk is *data*, logged through the unchecked path."""
    session, _seen = _in_step()
    session.append_chunk(data.turn, data.step, data.chunk)
    session.append(StepEnd(1, 1))
    session.append(TurnEnd(1, TurnEndReason.completed()))
    return session


@pytest.mark.parametrize(("data", "problem"), UNSTORABLE.values(), ids=UNSTORABLE.keys())
def test_a_seed_holding_an_unstorable_chunk_is_refused_naming_its_seq(
    data: AssistantChunk, problem: str
) -> None:
    """R4.24: a seed is validated like appends, JSON data included."""
    events = list(_closed(data).events)
    with pytest.raises(InvalidJsonError) as caught:
        Session.from_events(SessionHeader("r", 0), events)
    assert str(caught.value).startswith(f"event seq 2: assistant/chunk: {problem}")


def test_fork_refuses_a_source_whose_log_holds_an_unstorable_chunk() -> None:
    """R4.24, R4.25: a fork's seed is validated like appends; the child is never built."""
    source = _closed(AssistantChunk(1, 1, TextDelta(0, b"x")))  # type: ignore[arg-type]
    with pytest.raises(InvalidJsonError, match=r"event seq 2: assistant/chunk: text-delta\.text"):
        source.fork("child")
