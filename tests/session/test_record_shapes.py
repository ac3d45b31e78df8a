"""A stored record that is no JSON object is refused naming its seq and path, never loaded as defaults."""

from __future__ import annotations

import json
from typing import Any

import pytest

from retinue import Text
from retinue._errors import CorruptSessionError
from retinue._stream import Usage
from retinue.session import (
    AssistantMessage,
    Session,
    StepStart,
    TurnStart,
    TurnTrigger,
    UserMessage,
    load_event,
    load_header,
)

NOT_OBJECTS = ["plugin", "", [], ["kind", "plugin"], 0, True]


def _stored_turn() -> list[dict[str, Any]]:
    """The records of a turn whose user message and assistant usage are stored as objects."""
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    session.append(UserMessage((Text("hi"),)), surface="append")
    session.append(StepStart(1, 1))
    usage = Usage(input_tokens=3, output_tokens=4)
    session.append(AssistantMessage(1, 1, (Text("yo"),), usage), surface="append")
    records: list[dict[str, Any]] = json.loads(json.dumps(session.dump()))
    return records


@pytest.mark.parametrize("value", NOT_OBJECTS)
@pytest.mark.parametrize(
    ("seq", "path"),
    [(0, ("trigger", "source")), (1, ("source",)), (3, ("usage",))],
)
def test_a_record_stored_as_no_object_is_refused_naming_its_seq_and_path(
    seq: int, path: tuple[str, ...], value: Any
) -> None:
    """R11.2, R4.5: a source, trigger source or usage of another JSON shape is corrupt.

    Every field of these records has a default, so reading such a value as an
    absent record would load the user's source or a zero usage in its place.
    """
    record = _stored_turn()[seq]
    holder = record["data"]
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    with pytest.raises(CorruptSessionError) as caught:
        load_event(record)
    assert f"seq {seq}" in caught.value.message
    assert "$.data." + ".".join(path) in caught.value.message


def test_a_refused_record_names_a_long_seq_that_is_no_integer_cut_short() -> None:
    """R11.2: a refused record whose seq is a long string names it by its start and length,
    not in full in a message as long as the record."""
    record = {"seq": "x" * 5000, "type": "step/start", "time": 1, "data": {"turn": 1}}
    with pytest.raises(CorruptSessionError) as caught:
        load_event(record, session_id="s1")
    assert caught.value.message == (
        f"session 's1': event seq '{'x' * 39}...' (5000 characters) is malformed: "
        "required field missing @ $.data.step"
    )


def test_a_refused_seq_that_is_a_long_string_is_shown_cut_short_in_the_problem_too() -> None:
    """R11.2: where the seq itself is the refused field, the problem shows it by its start
    and length as the lead does, not in full, which made a message as long as the record."""
    record = {"seq": "x" * 5000, "type": "step/start", "time": 1, "data": {"turn": 1, "step": 1}}
    with pytest.raises(CorruptSessionError) as caught:
        load_event(record, session_id="s1")
    shown = f"'{'x' * 39}...' (5000 characters)"
    assert caught.value.message == (
        f"session 's1': event seq {shown} is malformed: expected an integer, got {shown} @ $.seq"
    )


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"turn": 1, "step": 1, "k" * 50_000: 1}, "$.data"),
        (
            {"turn": 1, "trigger": {"kind": "k" * 50_000, "source": {"kind": "user"}}},
            "$.data.trigger.kind",
        ),
        ({"turn": 1, "step": 1, "chunk": {"type": "k" * 50_000, "index": 0}}, "$.data.chunk"),
    ],
    ids=["unknown key", "value of no literal", "chunk type"],
)
def test_a_refused_record_shows_a_long_value_cut_short_and_names_its_field(
    data: dict[str, object], field: str
) -> None:
    """R11.2: a long stored key, literal value or type tag is shown by its start and
    length, the field still named, not in full in a message as long as the record."""
    kinds = {"$.data": "step/start", "$.data.trigger.kind": "turn/start"}
    record = {"seq": 1, "type": kinds.get(field, "assistant/chunk"), "time": 1, "data": data}
    with pytest.raises(CorruptSessionError) as caught:
        load_event(record, session_id="s1")
    message = caught.value.message
    assert len(message) < 400
    assert message.endswith(f"characters) @ {field}")


@pytest.mark.parametrize(
    ("record", "path"),
    [
        ({"seq": 0, "type": "step/start", "time": 0, "data": {"turn": 1, "step": 1}, 5: 1}, "$"),
        (
            {"seq": 0, "type": "step/start", "time": 0, "data": {"turn": 1, "step": 1, None: 1}},
            "$.data",
        ),
        (
            {
                "seq": 0,
                "type": "step/start",
                "time": 0,
                "data": {"turn": 1, "step": 1},
                5: 1,
                "x": 2,
            },
            "$",
        ),
    ],
    ids=["envelope", "record", "mixed-keys"],
)
def test_a_record_given_a_key_that_is_no_str_is_refused_as_corrupt(
    record: dict[Any, Any], path: str
) -> None:
    """R4.5, R1.6: a mapping built in Python with a key JSON cannot hold is refused as a corrupt
    record naming the key and where it is, as any other unknown key is."""
    with pytest.raises(
        CorruptSessionError, match=r"extra fields found \(.*(5|None).*\) @ "
    ) as caught:
        load_event(record)
    assert f"@ {path}" in str(caught.value)


def test_a_header_given_a_key_that_is_no_str_is_refused_as_corrupt() -> None:
    """R4.3: the stored header line's mapping, given a key that is no str, is refused as corrupt."""
    header: dict[Any, Any] = {"type": "session", "id": "s", "created_at": 0, "version": 0, 5: 1}
    with pytest.raises(CorruptSessionError, match=r"extra fields found \(5\)"):
        load_header(header)
