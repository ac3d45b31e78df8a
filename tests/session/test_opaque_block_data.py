"""An opaque block's data that is not lossless JSON is refused naming the field (R1.1, R1.6)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from retinue._content import OpaqueBlock
from retinue._errors import CorruptSessionError, InvalidJsonError
from retinue._lossless import MAX_JSON_DEPTH
from retinue.session import Session, TurnStart, TurnTrigger, UserMessage, load_event

DIGITS = f"an integer of more than {sys.get_int_max_str_digits()} digits"


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"x": [10**5000]}, f"OpaqueBlock.data.x[0] is {DIGITS}"),
        ({"x": [float("nan")]}, "OpaqueBlock.data.x[0] is a non-finite number (nan)"),
        ({"x": [{1}]}, "OpaqueBlock.data.x[0] is not JSON: set"),
        ({"x": {"y": float("inf")}}, "OpaqueBlock.data.x.y is a non-finite number (inf)"),
        ({1: "a"}, "OpaqueBlock.data has a non-string key 1"),
    ],
    ids=["long-int", "nan", "set", "inf", "key"],
)
def test_a_value_inside_an_opaque_blocks_data_is_named_from_the_field(
    data: dict[Any, Any], problem: str
) -> None:
    """R1.6: whatever is wrong inside the data, the message says it is the block's ``data``,
    as a Text's or a ToolCall's field error names ``Text.text``."""
    with pytest.raises(InvalidJsonError) as caught:
        OpaqueBlock("vendor", data)
    assert str(caught.value) == problem


def test_data_nested_too_deeply_is_named_from_the_field() -> None:
    """R1.6: the path of the level past the limit is long; its start names the field."""
    with pytest.raises(InvalidJsonError) as caught:
        OpaqueBlock("vendor", {"x": _nested(MAX_JSON_DEPTH)})
    assert str(caught.value).startswith("OpaqueBlock.data.x[0][0]")
    assert str(caught.value).endswith(f"is nested too deeply: more than {MAX_JSON_DEPTH} levels")


def test_a_stored_opaque_block_is_still_named_by_its_stored_path() -> None:
    """R11.2: stored, the data is the block's own object; the path inside it is the stored one."""
    session = Session.create("s1")
    session.append(TurnStart(1, TurnTrigger("message")))
    session.append(UserMessage(OpaqueBlock("vendor", {"x": [1]})), surface="append")
    record = json.loads(json.dumps(session.dump()))[1]
    record["data"]["content"][0]["x"][0] = float("nan")
    with pytest.raises(CorruptSessionError) as caught:
        load_event(record, session_id="s1")
    assert str(caught.value) == (
        "session 's1': event seq 1 is malformed: "
        "x[0] is a non-finite number (nan) @ $.data.content[0]"
    )
