"""The session log as a unit: append, its observers and its structural validation (SPEC 4)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any
from unittest import mock

import attrs
import pytest

from retinue import SessionError, Text, ToolCall
from retinue._errors import InvalidJsonError
from retinue._lossless import thaw_json
from retinue._request import LlmCallConfig
from retinue._stream import TextDelta, Usage
from retinue.session import (
    AssistantChunk,
    AssistantMessage,
    ContextMessage,
    CustomEvent,
    Event,
    EventData,
    PromptBlocked,
    Replace,
    RequestHeaderDelta,
    Session,
    SessionHeader,
    SteeringMessage,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
    dump_event,
)
from tests.unit._session_log_kit import PLUGIN, _c, _closed_turn, _history_session, _open, _refused

# -- R4.2, R4.5, R4.7, R4.8, R4.10: append ---------------------------------------------


def test_append_assigns_contiguous_seqs_and_millisecond_times() -> None:
    """R4.2: ``seq`` is the log length at append; ``time`` is epoch milliseconds."""
    session = _open()
    session.append(UserMessage(_c("hi")), surface="append")
    session.append(TurnEnd(1, TurnEndReason.completed()))
    assert [e.seq for e in session.events] == [0, 1, 2]
    assert all(e.time > 1_600_000_000_000 for e in session.events)
    assert session.events[1].type == "user/message"


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), b"bytes", {1, 2}, {1: "non-string key"}, object()],
    ids=["nan", "inf", "bytes", "set", "int-key", "object"],
)
def test_append_refuses_non_json_plugin_data_before_logging(value: object) -> None:
    """R4.5, R1.6: non-JSON data is refused, naming where in the payload; nothing is logged."""
    session = _open()
    with pytest.raises(InvalidJsonError) as caught:
        session.append_custom("plugin/probe", {"value": value})  # type: ignore[dict-item]
    assert "value" in str(caught.value)
    assert len(session.events) == 1


@pytest.mark.parametrize("number", [10**5000, -(10**5000)], ids=["huge", "huge-negative"])
def test_append_refuses_an_integer_too_long_to_write_as_json(number: int) -> None:
    """R4.5, R1.6: an integer with more digits than ``str`` may write is refused at append, naming where."""
    session = _open()
    with pytest.raises(InvalidJsonError, match=r"plugin/probe.*stats\[1\]\.n .*digits"):
        session.append_custom("plugin/probe", {"stats": [1, {"n": number}]})
    with pytest.raises(InvalidJsonError, match="digits"):
        session.append_custom("plugin/probe", number)  # type: ignore[arg-type]
    assert len(session.events) == 1
    session.append_custom("plugin/probe", {"n": 10**600})
    assert len(session.events) == 2


def test_append_refusal_names_the_event_type() -> None:
    """R4.5: the error for a non-JSON payload names the event type it was meant for."""
    session = _open()
    with pytest.raises(InvalidJsonError) as caught:
        session.append_custom("plugin/probe", {"value": float("nan")})
    assert "plugin/probe" in str(caught.value)


def test_append_refuses_a_cyclic_payload() -> None:
    """R1.6: cycles are not JSON."""
    cyclic: list[object] = []
    cyclic.append(cyclic)
    session = _open()
    with pytest.raises(InvalidJsonError):
        session.append_custom("plugin/probe", cyclic)  # type: ignore[arg-type]
    assert len(session.events) == 1


class _Colour(enum.StrEnum):
    RED = "red"


@pytest.mark.parametrize(
    "leaf", [1, 10**4300 - 1, _Colour.RED], ids=["plain", "long-int", "str-enum"]
)
def test_append_takes_a_payload_that_shares_one_list_or_object_twice(leaf: object) -> None:
    """R1.6: a value held twice is written twice, not a cycle; a long int or a str enum
    member takes the checked path, which must tell the two apart as well."""
    shared_list: list[object] = [leaf]
    shared_object = {"x": leaf}
    payload = {"a": shared_list, "b": shared_list, "c": [shared_object, shared_object]}
    session = _open()
    event = session.append_custom("plugin/probe", payload)  # type: ignore[arg-type]
    assert thaw_json(event.data.data) == {  # type: ignore[attr-defined]
        "a": [leaf],
        "b": [leaf],
        "c": [{"x": leaf}, {"x": leaf}],
    }


def _append_usage(session: Session, usage_input: float) -> None:
    usage = Usage(usage_input, 1)  # type: ignore[arg-type]
    session.append(AssistantMessage(1, 1, (Text("x"),), usage), surface="append")


def test_append_refuses_non_json_numbers_in_typed_events() -> None:
    """R4.5, R1.6: a non-finite number inside a typed event (an adapter's usage) never reaches the log."""
    session = _open()
    session.append(StepStart(1, 1))
    with pytest.raises((InvalidJsonError, SessionError)):
        _append_usage(session, float("nan"))
    assert [e.type for e in session.events] == ["turn/start", "step/start"]


def test_append_snapshots_the_callers_data() -> None:
    """R4.7: later mutation of the caller's object cannot change the logged event."""
    meta = {"files": ["a.txt"]}
    session = _open()
    session.append(StepStart(1, 1))
    session.append(AssistantMessage(1, 1, (ToolCall("c1", "read", "{}"),)), surface="append")
    session.append(ToolCallEvent(1, 1, "c1", "read", "{}"))
    event = session.append(
        ToolResultEvent(1, 1, "c1", _c("ok"), meta=meta), surface="append", source_event_seqs=[3]
    )
    meta["files"].append("b.txt")
    logged = session.events[4].data
    assert isinstance(logged, ToolResultEvent)
    assert logged.meta == {"files": ("a.txt",)}
    assert event is session.events[4]
    with pytest.raises(TypeError):
        logged.meta["files"] = ()  # type: ignore[index]


def test_events_is_one_live_view_that_later_appends_show_through() -> None:
    """R4.2: every read of ``events`` gives the same read-only view of the log, and
    what is appended after the read is in it: the loop reads it on every step."""
    session = _open()
    view = session.events
    session.append(UserMessage(_c("hi")), surface="append")
    assert session.events is view
    assert [event.seq for event in view] == [0, 1]
    assert view == tuple(session.events)


def test_a_sessions_header_cannot_be_replaced() -> None:
    """R4.1: the header is immutable; its id is what a store tracks the session by. A new header
    would change the id under an attached store, whose flush of the session would then find nothing
    to write and return as if its events were durable."""
    session = Session.create("a", created_at=1)
    with pytest.raises(AttributeError, match="header"):
        session.header = SessionHeader("b", 1)  # type: ignore[misc]
    assert session.id == "a"


def test_append_logs_before_notifying_and_a_raising_observer_propagates() -> None:
    """R4.8, R4.10: observers run once per append after the push; a raise propagates but the event is logged."""
    session = _open()
    seen: list[tuple[int, int]] = []

    def observer(event: Event) -> None:
        seen.append((event.seq, len(session.events)))
        if event.type == "user/message":
            raise RuntimeError("observer failed")

    session.observe(observer)
    with pytest.raises(RuntimeError, match="observer failed"):
        session.append(UserMessage(_c("hi")), surface="append")
    session.append(TurnEnd(1, TurnEndReason.completed()))
    assert seen == [(1, 2), (2, 3)]
    assert [e.type for e in session.events] == ["turn/start", "user/message", "turn/end"]


def test_append_chunk_logs_what_append_logs_and_notifies_after_the_push() -> None:
    """R4.8: the loop's chunk path logs an ``assistant/chunk`` event like ``append`` does."""
    session = _open()
    session.append(StepStart(1, 1))
    heard: list[tuple[Event, int]] = []
    session.observe(lambda event: heard.append((event, len(session.events))))
    chunk = TextDelta(0, "a")
    seq = session.append_chunk(1, 1, chunk)
    event = session.events[seq]
    assert (seq, event.data, event.type) == (2, AssistantChunk(1, 1, chunk), "assistant/chunk")
    assert (event.source_event_seqs, event.surface_op) == (None, None)
    assert heard == [(event, 3)]
    by_append = dump_event(session.append(AssistantChunk(1, 1, chunk)))
    by_chunk = dump_event(event)
    assert {**by_chunk, "seq": 0, "time": 0} == {**by_append, "seq": 0, "time": 0}


@pytest.mark.parametrize("path", ["append", "append_chunk"])
def test_a_raising_observer_does_not_hide_the_event_from_later_observers(path: str) -> None:
    """R4.8, R4.10: every observer hears every append; the first failure is raised after all ran."""
    session = _open()
    heard: list[tuple[str, int]] = []

    def failing(event: Event) -> None:
        heard.append(("first", event.seq))
        raise RuntimeError("first observer failed")

    def also_failing(event: Event) -> None:
        heard.append(("second", event.seq))
        raise ValueError("second observer failed")

    session.observe(failing)
    session.observe(also_failing)
    session.observe(lambda event: heard.append(("third", event.seq)))

    def append() -> None:
        if path == "append":
            session.append(UserMessage(_c("hi")), surface="append")
        else:
            session.append_chunk(1, 1, TextDelta(0, "a"))

    with pytest.raises(RuntimeError, match="first observer failed"):
        append()
    assert heard == [("first", 1), ("second", 1), ("third", 1)]
    assert len(session.events) == 2


def test_an_unsubscriber_removes_only_its_own_registration_once() -> None:
    """R4.10: ``observe`` returns an unsubscriber for that one registration: called again it
    does nothing, and it never removes another registration of the same or an equal observer."""

    @attrs.frozen
    class Recorder:
        seen: list[int]

        def __call__(self, event: Event) -> None:
            self.seen.append(event.seq)

    session = _open()
    first: list[int] = []
    second: list[int] = []
    twice: list[int] = []
    stop_first = session.observe(Recorder(first))
    session.observe(Recorder(second))  # equal to the first while both lists are empty
    again = Recorder(twice)
    stop_once = session.observe(again)
    session.observe(again)
    stop_first()
    stop_first()
    stop_once()
    stop_once()
    session.append(UserMessage(_c("hi")), surface="append")
    assert (first, second, twice) == ([], [1], [1])


def test_seeded_events_do_not_notify() -> None:
    """R4.10, R4.24: a seed is not replayed to observers; only later appends are."""
    source = Session.create("src")
    _closed_turn(source, 1, "hi")
    child = Session.from_events(SessionHeader("child", 0), source.events)
    seen: list[int] = []
    child.observe(lambda event: seen.append(event.seq))
    child.append(TurnStart(2, TurnTrigger("message")))
    assert seen == [6]


# -- R4.6, R4.13-R4.18, R4.22: structural validation -----------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        UserMessage(_c("x")),
        ContextMessage(_c("x")),
        SteeringMessage(1, _c("x")),
        AssistantMessage(1, 1, _c("x")),
        ToolResultEvent(1, 1, "c", _c("x")),
    ],
    ids=lambda data: data.type,
)
def test_surface_events_need_a_surface_op(data: EventData) -> None:
    """R4.6: a surface-eligible event without a surface op is refused."""
    _refused(_open(), "MISSING_SURFACE_OP", data)


@pytest.mark.parametrize(
    "data",
    [
        StepStart(1, 1),
        PromptBlocked(_c("x"), reason="no"),
        CustomEvent("todo/write", {"todos": []}),
    ],
    ids=lambda data: data.type,
)
def test_non_surface_events_refuse_a_surface_op(data: EventData) -> None:
    """R4.6: non-surface events must not carry surface metadata."""
    _refused(_open(), "INVALID_SURFACE_OP", data, surface="append")


@pytest.mark.parametrize("op", ["prepend", "Append", 0, mock.ANY], ids=repr)
def test_surface_ops_other_than_append_or_replace_are_refused(op: Any) -> None:
    """R4.6, R4.19: a surface op is ``"append"`` or a ``Replace``; anything else would be stored as
    nothing, or (an object equal to everything) logged as an op that dumps as no JSON."""
    _refused(_open(), "INVALID_SURFACE_OP", UserMessage(_c("x")), surface=op)


def test_a_seed_event_whose_surface_op_only_compares_equal_to_append_is_refused() -> None:
    """R4.24, R4.19: a seed is checked as an append is: an op equal to everything is no op."""
    turn = Event(0, 0, TurnStart(1, TurnTrigger("message")))
    message = Event(1, 0, UserMessage(_c("x")), None, mock.ANY)
    with pytest.raises(SessionError) as caught:
        Session.from_events(SessionHeader("s", 0), [turn, message])
    assert caught.value.code == "INVALID_SURFACE_OP"


class _Op(enum.StrEnum):
    APPEND = "append"


def test_a_str_enum_append_op_is_logged_as_the_exact_literal() -> None:
    """R4.19: an op given as a StrEnum member equal to ``"append"`` is logged, appended and
    seeded alike, as the ``"append"`` its stored line reads back as."""
    session = _open()
    op: Any = _Op.APPEND  # as a caller without a type checker gives it
    logged = session.append(UserMessage(_c("x")), surface=op)
    seeded = Session.from_events(
        session.header, [session.events[0], logged._replace(surface_op=op)]
    )
    assert type(logged.surface_op) is str
    assert type(seeded.events[1].surface_op) is str
    assert list(seeded.derive_messages()) == list(session.derive_messages())


@pytest.mark.parametrize("name", ["turn/end", "step/start", "user/message", "session", ""])
def test_custom_events_cannot_take_a_built_in_type_name(name: str) -> None:
    """R4.11, R1.6: a custom event named like a built-in type would load back as that type."""
    session = _open()
    with pytest.raises(SessionError) as caught:
        session.append_custom(name, {"turn": 1})
    assert caught.value.code == "INVALID_EVENT_TYPE"
    assert len(session.events) == 1
    assert session.append_custom("plugin/note", {"turn": 1}).type == "plugin/note"


@pytest.mark.parametrize("name", [5, None, b"x/t"])
def test_a_custom_event_type_that_is_no_str_is_refused_saying_so(name: Any) -> None:
    """R4.11: a plugin's event type is a str, and a refusal of 5 says so, not "empty or
    reserved"."""
    with pytest.raises(
        SessionError, match=r"cannot be a custom event type: it is no str$"
    ) as caught:
        _open().append_custom(name, {})
    assert caught.value.code == "INVALID_EVENT_TYPE"


def test_surface_events_outside_a_turn_are_refused() -> None:
    """R4.13: a model-visible event with no open turn would be crash debris; it is refused."""
    _refused(Session.create("s"), "NO_OPEN_TURN", UserMessage(_c("loose")), surface="append")


@pytest.mark.parametrize(
    "sources",
    [
        (),
        (1, 1),
        (5,),
        (4,),
        (-1,),
        (0, 4),
        (0, 9),
        (-1, 0),
        range(0),
        range(2, 5),
        range(-1, 2),
        range(5, 1, -1),
    ],
    ids=[
        "empty",
        "duplicate",
        "later",
        "self",
        "negative",
        "many-self",
        "many-later",
        "many-negative",
        "range-empty",
        "range-self",
        "range-negative",
        "range-descending-later",
    ],
)
def test_source_event_seqs_must_be_non_empty_unique_and_earlier(
    sources: Sequence[int],
) -> None:
    """R4.22: ``source_event_seqs`` must be non-empty, duplicate-free and reference earlier events
    (the message would be seq 4); one source or many, each is checked."""
    session = _open()
    session.append(StepStart(1, 1))
    session.append(AssistantChunk(1, 1, TextDelta(0, "a")))
    session.append(AssistantChunk(1, 1, TextDelta(0, "b")))
    _refused(
        session,
        "INVALID_SOURCES",
        AssistantMessage(1, 1, _c("ab")),
        surface="append",
        source_event_seqs=sources,
    )


def test_a_range_of_source_event_seqs_is_logged_as_its_tuple() -> None:
    """R4.22: a range of earlier seqs is valid sources, logged as the tuple of its items: a
    run (a message's chunks) and a descending one (a rewrite may name what it replaces so)."""
    session = _open()
    session.append(StepStart(1, 1))
    session.append(AssistantChunk(1, 1, TextDelta(0, "a")))
    session.append(AssistantChunk(1, 1, TextDelta(0, "b")))
    event = session.append(
        AssistantMessage(1, 1, _c("ab")), surface="append", source_event_seqs=range(2, 4)
    )
    assert event.source_event_seqs == (2, 3)
    assert type(event.source_event_seqs) is tuple
    rewrite = _history_session().append(
        ContextMessage(_c("summary")), surface=Replace(1, 9), source_event_seqs=range(9, 0, -2)
    )
    assert rewrite.source_event_seqs == (9, 7, 5, 3, 1)
    assert type(rewrite.source_event_seqs) is tuple


@pytest.mark.parametrize(
    ("data", "surface", "sources"),
    [
        (ContextMessage(_c("summary")), Replace(1, 3), (1, 3, 99)),
        (ContextMessage(_c("summary")), Replace(1, 3), (-1, 1, 3)),
        (StepStart(3, 1), None, (13,)),
        (StepStart(3, 1), None, (1, 1)),
    ],
    ids=["replace-later", "replace-negative", "plain-self", "plain-duplicate"],
)
def test_source_event_seqs_are_checked_on_every_kind_of_append(
    data: EventData, surface: Replace | None, sources: tuple[int, ...]
) -> None:
    """R4.22: a surface replace and a plain event check their sources as a surface append does
    (the event would be seq 13)."""
    _refused(
        _history_session(), "INVALID_SOURCES", data, surface=surface, source_event_seqs=sources
    )


def test_turn_boundaries_cannot_overlap_or_mismatch() -> None:
    """R4.14, R4.16, R4.17: one open turn at a time; ``turn/end`` closes exactly it; numbers come from the log."""
    session = Session.create("s")
    assert (session.is_turn_open, session.next_turn_number()) == (False, 1)
    _refused(session, "TURN_MISMATCH", TurnEnd(1, TurnEndReason.completed()))
    session.append(TurnStart(4, TurnTrigger("injection", PLUGIN)))
    assert (session.is_turn_open, session.last_turn, session.next_turn_number()) == (True, 4, 5)
    _refused(session, "TURN_OVERLAP", TurnStart(5, TurnTrigger("message")))
    _refused(session, "TURN_MISMATCH", TurnEnd(3, TurnEndReason.completed()))
    session.append(TurnEnd(4, TurnEndReason.completed()))
    assert (session.is_turn_open, session.next_turn_number()) == (False, 5)


@pytest.mark.parametrize("turn", [4, 2, 0, -1])
def test_a_turn_start_numbered_at_or_below_the_last_turn_is_refused(turn: int) -> None:
    """R4.16: turn numbers increase along the log; a ``turn/start`` repeating or going below the
    last turn's number (or below 1) is refused ``TURN_NUMBER`` and nothing is logged: no two turns
    of one number, which the log checker refuses."""
    session = Session.create("s")
    session.append(TurnStart(4, TurnTrigger("injection", PLUGIN)))
    session.append(TurnEnd(4, TurnEndReason.completed()))
    _refused(session, "TURN_NUMBER", TurnStart(turn, TurnTrigger("message")))
    assert (session.last_turn, session.next_turn_number()) == (4, 5)


def test_header_delta_before_any_header_is_refused() -> None:
    """R4.18: a delta cannot precede the first full header."""
    _refused(_open(), "CORRUPT_HEADER", RequestHeaderDelta(config=LlmCallConfig("m")))
