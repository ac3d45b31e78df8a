"""A policy given a collection of the wrong shape refuses it when built, naming the field.

A fault kind given alone was taken for its letters and refused as the kind
``s``; a replay of values that are no recorded replies failed each request
they answered with a 500 a test took for the server's own.
"""

from __future__ import annotations

import pytest

from retinue.providers.mock import FaultPolicy


@pytest.mark.parametrize("kinds", ["stall", None, 5])
def test_fault_policy_kinds_not_a_collection_is_type_error(kinds: object) -> None:
    """One kind (or no collection at all) is refused as not a collection of kinds."""
    with pytest.raises(TypeError, match=r"FaultPolicy\.kinds must be a collection of fault kinds"):
        FaultPolicy(kinds=kinds)  # type: ignore[arg-type]


def test_fault_policy_one_kind_in_a_tuple_is_taken() -> None:
    """The kind in a collection is taken as itself."""
    assert FaultPolicy(kinds=("stall",)).kinds == ("stall",)
