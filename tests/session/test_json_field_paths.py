"""A JSON field's refusal names the field first, as every other field's does (R4.5, R11.2)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pytest

from retinue import Text
from retinue._errors import CorruptSessionError, InvalidJsonError
from retinue.session import (
    AssistantMessage,
    ContextMessage,
    CustomEvent,
    PromptBlocked,
    Replace,
    Session,
    SteeringMessage,
    SystemEdit,
    ToolResultEvent,
    ToolsDelta,
    UserMessage,
)
from retinue.session._codec import decode_event

BIG = 10**5000  # more digits than sys.get_int_max_str_digits() allows by default
DIGITS = f"an integer of more than {sys.get_int_max_str_digits()} digits"


# -- R4.5: when built ---------------------------------------------------------------------------------


def test_a_long_integer_in_meta_is_named_like_the_events_other_fields() -> None:
    """R4.5, R1.6: ``meta`` is prefixed like the event's turn, and its path inside follows."""
    with pytest.raises(InvalidJsonError) as turn:
        ToolResultEvent(BIG, 1, "c", ())
    with pytest.raises(InvalidJsonError) as meta:
        ToolResultEvent(1, 1, "c", (), meta={"a": [1, BIG]})
    assert str(turn.value) == f"tool/result: turn is {DIGITS}"
    assert str(meta.value) == f"tool/result: meta.a[1] is {DIGITS}"


@pytest.mark.parametrize(
    ("meta", "problem"),
    [
        (BIG, f"tool/result: meta is {DIGITS}"),
        ({"a": float("nan")}, "tool/result: meta.a is a non-finite number (nan)"),
        ({"a": {1}}, "tool/result: meta.a is not JSON: set"),
    ],
    ids=["long-int-itself", "nan", "set"],
)
def test_every_meta_refusal_starts_with_the_field(meta: Any, problem: str) -> None:
    """R4.5, R1.6: whatever is wrong inside ``meta``, the message says it is ``meta``."""
    with pytest.raises(InvalidJsonError) as caught:
        ToolResultEvent(1, 1, "c", (), meta=meta)
    assert str(caught.value) == problem


def test_a_custom_events_data_is_named_once_after_its_type() -> None:
    """R4.5: a plugin event's data is named ``data``, after the event type, whether the event
    is built or appended."""
    with pytest.raises(InvalidJsonError) as built:
        CustomEvent("plugin/probe", {"stats": [1, {"n": BIG}]})
    with pytest.raises(InvalidJsonError) as appended:
        Session.create("s").append_custom("plugin/probe", {"stats": [1, {"n": BIG}]})
    assert str(built.value) == f"plugin/probe event: data.stats[1].n is {DIGITS}"
    assert str(appended.value) == f"plugin/probe event: data.stats[1].n is {DIGITS}"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"a": float("nan")}, "data.a is a non-finite number (nan)"),
        ({"a": {1}}, "data.a is not JSON: set"),
        ({1: 2}, "data has a non-string key 1"),
    ],
    ids=["nan", "set", "key"],
)
def test_a_custom_event_built_with_bad_data_names_its_type(data: Any, problem: str) -> None:
    """R4.5: whatever is wrong in a plugin event's data, the refusal of the event built
    directly starts with its type, as that of ``append_custom`` does."""
    with pytest.raises(InvalidJsonError) as built:
        CustomEvent("plugin/probe", data)
    with pytest.raises(InvalidJsonError) as appended:
        Session.create("s").append_custom("plugin/probe", data)
    assert str(built.value) == str(appended.value) == f"plugin/probe event: {problem}"


@pytest.mark.parametrize("event_type", ["", None, "turn/start"], ids=["empty", "none", "reserved"])
def test_a_custom_event_wrong_in_its_type_and_its_data_is_refused_for_its_type(
    event_type: Any,
) -> None:
    """R4.5: the type is judged before the data, so a record wrong in both is told of its
    type, not of its data under a type that can be none (`` event: data.a ...``)."""
    with pytest.raises(ValueError, match="cannot be a custom event type"):
        CustomEvent(event_type, {"a": float("nan")})


# -- R4.5: every event field's refusal starts with the event type ----------------------------------------

FIELD_REFUSALS: dict[str, tuple[Callable[[], object], type[Exception], str]] = {
    "steering turn": (
        lambda: SteeringMessage("1", (Text("a"),)),  # type: ignore[arg-type]
        InvalidJsonError,
        "steering/message: turn must be an integer, got '1'",
    ),
    "steering long turn": (
        lambda: SteeringMessage(BIG, (Text("a"),)),
        InvalidJsonError,
        f"steering/message: turn is {DIGITS}",
    ),
    "blocked content": (
        lambda: PromptBlocked([1]),  # type: ignore[arg-type]
        TypeError,
        "prompt/blocked: content[0] is not a content block: int",
    ),
    "context content": (
        lambda: ContextMessage(5),  # type: ignore[arg-type]
        TypeError,
        (
            "context/message: content must be a str, a content block or a sequence of content "
            "blocks, got int"
        ),
    ),
    "steering content": (
        lambda: SteeringMessage(1, [Text("a"), b"x"]),  # type: ignore[arg-type]
        TypeError,
        "steering/message: content[1] is not a content block: bytes",
    ),
    "assistant content": (
        lambda: AssistantMessage(1, 1, [Text("a"), 5]),  # type: ignore[arg-type]
        TypeError,
        "assistant/message: content[1] is not a content block: int",
    ),
    "tool result content": (
        lambda: ToolResultEvent(1, 1, "c", [None]),  # type: ignore[arg-type]
        TypeError,
        "tool/result: content[0] is not a content block: NoneType",
    ),
    "user content": (
        lambda: UserMessage(5),  # type: ignore[arg-type]
        TypeError,
        (
            "user/message: content must be a str, a content block or a sequence of content "
            "blocks, got int"
        ),
    ),
    "replace start": (
        lambda: Replace(True, 1),
        InvalidJsonError,
        "Replace.start must be an integer, got True",
    ),
    "system edit keep": (
        lambda: SystemEdit(-1, 0),
        InvalidJsonError,
        "SystemEdit.keep_start must be a non-negative integer JSON can write, got -1",
    ),
    "delta removed": (
        lambda: ToolsDelta(removed=[1]),  # type: ignore[list-item]
        InvalidJsonError,
        "ToolsDelta.removed must hold only strings, got (1,)",
    ),
}


@pytest.mark.parametrize("case", list(FIELD_REFUSALS.values()), ids=list(FIELD_REFUSALS))
def test_a_field_refusal_names_the_event_type_then_the_field(
    case: tuple[Callable[[], object], type[Exception], str],
) -> None:
    """R4.5: as ``tool/result: turn ...`` does, each refusal names its event type (or record) first."""
    make, kind, message = case
    with pytest.raises(kind) as caught:
        make()
    assert type(caught.value) is kind
    assert str(caught.value) == message


# -- R11.2: when loaded ---------------------------------------------------------------------------------

RESULT = {
    "seq": 3,
    "type": "tool/result",
    "time": 1,
    "data": {"turn": 1, "step": 1, "call_id": "c", "content": [], "is_error": False},
    "source_event_seqs": [2],
    "surface_op": "append",
}
LONG = "9" * (sys.get_int_max_str_digits() + 1)


def _with_long_int(record: dict[str, Any], place: Callable[[dict[str, Any]], None]) -> str:
    """*record*'s line with a too-long integer written where *place* puts the marker."""
    copy = json.loads(json.dumps(record))
    place(copy)
    return json.dumps(copy).replace('"LONG"', LONG)


def _set(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def place(record: dict[str, Any]) -> None:
        target = record
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = "LONG"

    return place


def _meta(record: dict[str, Any]) -> None:
    record["data"]["meta"] = {"a": [1, "LONG"]}


@pytest.mark.parametrize(
    ("record", "place", "where", "seq"),
    [
        (RESULT, _meta, "$.data.meta.a[1]", "3"),
        (RESULT, _set(("data", "turn")), "$.data.turn", "3"),
        (RESULT, _set(("source_event_seqs", 0)), "$.source_event_seqs[0]", "3"),
        (RESULT, _set(("seq",)), "$.seq", "?"),
        (
            {"seq": 0, "type": "x/y", "time": 1, "data": {"n": 1}},
            _set(("data", "n")),
            "$.data.n",
            "0",
        ),
    ],
    ids=["meta", "turn", "source-seq", "seq", "custom-data"],
)
def test_a_long_integer_in_a_stored_line_is_refused_naming_its_path(
    record: dict[str, Any], place: Callable[[dict[str, Any]], None], where: str, seq: str
) -> None:
    """R11.2, R1.6: the line is JSON, too long a number is a malformed field, named like any other."""
    with pytest.raises(CorruptSessionError) as caught:
        decode_event(_with_long_int(record, place), session_id="s1")
    assert str(caught.value) == f"session 's1': event seq {seq} is malformed: {DIGITS} @ {where}"


def test_a_line_torn_after_a_long_integer_is_still_not_json() -> None:
    """R11.8: a torn line stays a line that is not JSON, whatever number it was cut after."""
    line = _with_long_int(RESULT, _meta)
    with pytest.raises(CorruptSessionError, match="is not valid UTF-8 JSON"):
        decode_event(line[: line.index(LONG) + len(LONG) + 2])


@pytest.mark.parametrize(
    ("meta", "problem"),
    [
        ('{"a": NaN}', "a is a non-finite number (nan)"),
        ("[" * 201 + "]" * 201, "is nested too deeply: more than 200 levels"),
    ],
    ids=["nan", "too-deep"],
)
def test_a_stored_meta_that_is_not_lossless_json_is_refused_saying_why(
    meta: str, problem: str
) -> None:
    """R11.2, R1.6: the refusal keeps what is wrong with the value, not only where it is."""
    line = json.dumps(RESULT).replace('"is_error": false', '"is_error": false, "meta": ' + meta)
    with pytest.raises(CorruptSessionError) as caught:
        decode_event(line)
    assert problem in str(caught.value)
    assert str(caught.value).endswith("@ $.data.meta")
