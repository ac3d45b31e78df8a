"""A stored plugin event loads with the data it was stored with, or is refused (R4.11)."""

from __future__ import annotations

import enum
import json

import pytest

from retinue._errors import CorruptSessionError, SessionError
from retinue._lossless import JsonValue
from retinue.session import Session, load_event


@pytest.mark.parametrize("data", [None, {}, 0, "", [], {"k": [1, None]}])
def test_a_plugin_event_loads_back_with_exactly_its_data(data: JsonValue) -> None:
    """R4.11, R1.6: ``null`` and an empty object are stored and load back apart."""
    session = Session.create("s")
    event = session.append_custom("plugin/note", data)
    (record,) = json.loads(json.dumps(session.dump()))
    assert load_event(record) == event


def test_a_plugin_event_stored_without_its_data_is_refused_naming_its_seq() -> None:
    """R4.11, R11.2: a line missing ``data`` held none of it: not loaded as an empty object."""
    session = Session.create("s")
    session.append_custom("plugin/note", None)
    session.append_custom("plugin/note", {"k": 1})
    record = json.loads(json.dumps(session.dump()))[1]
    del record["data"]
    with pytest.raises(CorruptSessionError) as caught:
        load_event(record)
    assert "seq 1" in caught.value.message
    assert "'data'" in caught.value.message


@pytest.mark.parametrize("kind", ["", "session"], ids=["empty", "header-line"])
def test_a_stored_event_of_a_type_no_plugin_may_take_is_refused_naming_its_type(kind: str) -> None:
    """R4.11, R11.2: an empty type, or the header line's, names no event: the refusal names
    the seq and ``$.type``, the field at fault, not ``$.data``, which is sound."""
    session = Session.create("s")
    session.append_custom("plugin/note", {"k": 1})
    (record,) = json.loads(json.dumps(session.dump()))
    record["type"] = kind
    with pytest.raises(CorruptSessionError) as caught:
        load_event(record)
    assert caught.value.message == (
        f"session '?': event seq 0 is malformed: {kind!r} cannot be a custom event type "
        "(empty or reserved) @ $.type"
    )


class Kind(enum.StrEnum):
    PROBE = "plugin/probe"


class Unequal(str):
    """A str equal to nothing, itself included, hashed alike whatever it holds."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return 1


def test_a_plugin_event_type_given_as_a_str_subclass_is_logged_as_its_text() -> None:
    """R4.11: a ``StrEnum`` member as the type is held as the plain str the log stores, so
    the live event is the one loaded back."""
    session = Session.create("s")
    event = session.append_custom(Kind.PROBE, {"k": 1})
    assert type(event.type) is str
    (record,) = json.loads(json.dumps(session.dump()))
    assert load_event(record) == event


def test_a_built_in_type_in_a_str_subclass_is_refused() -> None:
    """R4.11: a subclass whose ``==`` finds no built-in type name is still refused as the
    name it holds: logged, ``turn/start`` would load as a turn's start, not as this event."""
    session = Session.create("s")
    with pytest.raises(SessionError) as refused:
        session.append_custom(Unequal("turn/start"), {"turn": 1})
    assert refused.value.code == "INVALID_EVENT_TYPE"
    assert session.events == []
