"""A fork boundary must name an existing non-negative seq; only an omitted one forks an empty source (R4.25)."""

from __future__ import annotations

import pytest

from retinue._errors import SessionError
from retinue.session import Session, TurnEnd, TurnEndReason, TurnStart, TurnTrigger

BIG = 10**5000  # too many digits for an f-string to format


@pytest.mark.parametrize("boundary", [-1, -7, 0, BIG, -BIG], ids=["-1", "-7", "0", "big", "-big"])
def test_an_empty_source_refuses_any_given_boundary(boundary: int) -> None:
    """R4.25: an empty log has no seq to name; the refusal is typed, never a bare ValueError."""
    source = Session.create("src")
    with pytest.raises(SessionError) as caught:
        source.fork("child", boundary)
    assert caught.value.code == "INVALID_BOUNDARY"
    assert source.fork("child").header.seed_length == 0


@pytest.mark.parametrize("boundary", [BIG, -BIG], ids=["big", "-big"])
def test_a_boundary_too_long_to_format_is_refused_naming_its_size(boundary: int) -> None:
    """R4.25: named by its size, not formatted (which raises ValueError past the digit limit)."""
    source = Session.create("src")
    source.append(TurnStart(1, TurnTrigger("message")))
    source.append(TurnEnd(1, TurnEndReason.completed()))
    with pytest.raises(SessionError) as caught:
        source.fork("child", boundary)
    assert caught.value.code == "INVALID_BOUNDARY"
    assert str(caught.value) == "fork boundary an integer of 16610 bits is not a seq"
