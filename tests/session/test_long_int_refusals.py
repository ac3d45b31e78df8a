"""An integer too long to write, wherever it sits in a refused value, is named, never repr'd (R4.5)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from retinue._content import ToolResultBlock
from retinue._errors import CorruptSessionError, InvalidJsonError
from retinue.session import ToolCallEvent, ToolResultEvent, TurnTrigger, load_event

BIG = 10**5000


@pytest.mark.parametrize(
    ("build", "said"),
    [
        (lambda: ToolCallEvent(1, 1, BIG, "n", "{}"), "an integer of 16610 bits"),  # type: ignore[arg-type]
        (lambda: ToolResultEvent(1, 1, "c", (), is_error=BIG), "an integer of 16610 bits"),  # type: ignore[arg-type]
        (lambda: TurnTrigger(BIG), "an integer of 16610 bits"),  # type: ignore[arg-type]
        (lambda: ToolResultBlock("c", (BIG,)), "a tuple holding an integer too long to show"),  # type: ignore[arg-type]
    ],
    ids=["tool/call id", "tool/result is_error", "turn trigger kind", "inside a tuple"],
)
def test_a_refusal_names_a_long_int_instead_of_failing_to_show_it(
    build: Callable[[], object], said: str
) -> None:
    """Refused with the typed error naming the field, not a bare ValueError from repr()."""
    with pytest.raises((TypeError, ValueError, InvalidJsonError)) as refused:
        build()
    assert said in str(refused.value)


def test_a_stored_record_refused_with_a_seq_too_long_to_show_names_it() -> None:
    """R11.2: a record whose seq is an integer too long to write and whose data is refused is
    refused typed, its seq named, not failing with a bare ValueError from formatting it."""
    record = {"seq": BIG, "type": "step/start", "time": 1, "data": {"turn": 1}}
    with pytest.raises(CorruptSessionError) as refused:
        load_event(record, session_id="s1")
    assert str(refused.value) == (
        "session 's1': event seq an integer of 16610 bits is malformed: "
        "required field missing @ $.data.step"
    )
