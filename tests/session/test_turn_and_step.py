"""Every event with a turn and a step checks them alike: exact ints JSON can write (R4.5, R1.6)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from retinue import Text
from retinue._errors import InvalidJsonError
from retinue._lossless import SMALL_INT
from retinue.session import (
    AssistantMessage,
    Event,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
)
from retinue.session._codec import decode_event, encode_event

BIG = 10**5000  # more digits than sys.get_int_max_str_digits() allows by default
DIGITS = f"an integer of more than {sys.get_int_max_str_digits()} digits"

BUILDERS: dict[str, Callable[[Any, Any], Any]] = {
    "step/start": StepStart,
    "step/end": StepEnd,
    "assistant/message": lambda turn, step: AssistantMessage(turn, step, (Text("x"),)),
    "tool/call": lambda turn, step: ToolCallEvent(turn, step, "c", "n", "{}"),
    "tool/result": lambda turn, step: ToolResultEvent(turn, step, "c", (Text("x"),)),
}


@pytest.mark.parametrize("kind", list(BUILDERS))
@pytest.mark.parametrize(
    "number", [SMALL_INT + 1, -SMALL_INT - 1, 10**400], ids=["past-bound", "below-bound", "long"]
)
def test_an_int_past_the_inline_bound_but_writable_is_accepted_and_reloads(
    kind: str, number: int
) -> None:
    """R4.5, R1.6: the inline test's bound is only where the digit check starts."""
    data = BUILDERS[kind](number, number)
    assert (data.turn, data.step) == (number, number)
    event = Event(0, 1, data)
    assert decode_event(encode_event(event)) == event


@pytest.mark.parametrize("kind", list(BUILDERS))
@pytest.mark.parametrize(("turn", "step"), [(True, 1), (1, 1.0), ("1", 1), (None, None)], ids=repr)
def test_a_turn_or_step_that_is_not_an_int_is_refused_naming_the_event(
    kind: str, turn: Any, step: Any
) -> None:
    """R4.5: a bool or float would be written ``true`` or ``1.0`` and not reload."""
    with pytest.raises(InvalidJsonError) as caught:
        BUILDERS[kind](turn, step)
    assert str(caught.value) == f"{kind}: turn and step must be integers, got {turn!r}, {step!r}"


@pytest.mark.parametrize("kind", list(BUILDERS))
@pytest.mark.parametrize(
    ("turn", "step", "field"), [(BIG, 1, "turn"), (1, -BIG, "step")], ids=["turn", "step"]
)
def test_a_turn_or_step_too_long_to_write_is_refused_naming_it(
    kind: str, turn: int, step: int, field: str
) -> None:
    """R4.5, R1.6: an int with more digits than JSON can write is named, never formatted."""
    with pytest.raises(InvalidJsonError) as caught:
        BUILDERS[kind](turn, step)
    assert str(caught.value) == f"{kind}: {field} is {DIGITS}"
