"""The session log as a unit: append validation, surface, fork, seed, codec, projection (SPEC 4, 5)."""

from __future__ import annotations

import enum
import json
from typing import Any

import attrs
import pytest

from retinue import Message, MessageSource, Reasoning, SessionError, Text, ToolCall, ToolResultBlock
from retinue._content import OpaqueBlock
from retinue._errors import InvalidJsonError
from retinue._lossless import thaw_json
from retinue._request import LlmCallConfig, ToolSchema
from retinue._stream import (
    ABORTED,
    MAX_TOKENS,
    STOP,
    TOOL_CALLS,
    BlockEnd,
    BlockStart,
    Errored,
    Finish,
    OtherFinish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from retinue.session import (
    AssistantChunk,
    AssistantMessage,
    ContextMessage,
    CustomEvent,
    EpochHeader,
    Event,
    EventData,
    PromptBlocked,
    Replace,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    SessionHeader,
    SteeringMessage,
    StepEnd,
    StepStart,
    SurfaceOp,
    SystemEdit,
    ToolCallEvent,
    ToolErrorInfo,
    ToolResultEvent,
    ToolsDelta,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
    dump_event,
    load_event,
    project,
)
from retinue.testing import check_session_invariants

PLUGIN = MessageSource("plugin", "memory")


def _c(text: str) -> tuple[Text]:
    """One text block as content."""
    return (Text(text),)


def _open(session_id: str = "s", **kwargs: Any) -> Session:
    session = Session.create(session_id, **kwargs)
    session.append(TurnStart(1, TurnTrigger("message")))
    return session


def _closed_turn(session: Session, turn: int, text: str) -> None:
    session.append(TurnStart(turn, TurnTrigger("message")))
    session.append(UserMessage(_c(text)), surface="append")
    session.append(StepStart(turn, 1))
    session.append(AssistantMessage(turn, 1, (Text(f"re: {text}"),)), surface="append")
    session.append(StepEnd(turn, 1))
    session.append(TurnEnd(turn, TurnEndReason.completed()))


def _refused(session: Session, code: str, data: EventData, **kwargs: Any) -> SessionError:
    before = list(session.events)
    with pytest.raises(SessionError) as caught:
        session.append(data, **kwargs)
    assert caught.value.code == code
    assert list(session.events) == before
    return caught.value


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
    session.append(ToolCallEvent(1, 1, "c1", "read", "{}"))
    event = session.append(
        ToolResultEvent(1, 1, "c1", _c("ok"), meta=meta), surface="append", source_event_seqs=[2]
    )
    meta["files"].append("b.txt")
    logged = session.events[3].data
    assert isinstance(logged, ToolResultEvent)
    assert logged.meta == {"files": ("a.txt",)}
    assert event is session.events[3]
    with pytest.raises(TypeError):
        logged.meta["files"] = ()  # type: ignore[index]


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
    heard: list[tuple[Event, int]] = []
    session.observe(lambda event: heard.append((event, len(session.events))))
    chunk = TextDelta(0, "a")
    seq = session.append_chunk(1, 2, chunk)
    event = session.events[seq]
    assert (seq, event.data, event.type) == (1, AssistantChunk(1, 2, chunk), "assistant/chunk")
    assert (event.source_event_seqs, event.surface_op) == (None, None)
    assert heard == [(event, 2)]
    by_append = dump_event(session.append(AssistantChunk(1, 2, chunk)))
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


@pytest.mark.parametrize("op", ["prepend", "Append", 0])
def test_surface_ops_other_than_append_or_replace_are_refused(op: Any) -> None:
    """R4.6, R4.19: a surface op is ``"append"`` or a ``Replace``; anything else would be stored as nothing."""
    _refused(_open(), "INVALID_SURFACE_OP", UserMessage(_c("x")), surface=op)


@pytest.mark.parametrize("name", ["turn/end", "step/start", "user/message", "session", ""])
def test_custom_events_cannot_take_a_built_in_type_name(name: str) -> None:
    """R4.11, R1.6: a custom event named like a built-in type would load back as that type."""
    session = _open()
    with pytest.raises(SessionError) as caught:
        session.append_custom(name, {"turn": 1})
    assert caught.value.code == "INVALID_EVENT_TYPE"
    assert len(session.events) == 1
    assert session.append_custom("plugin/note", {"turn": 1}).type == "plugin/note"


def test_surface_events_outside_a_turn_are_refused() -> None:
    """R4.13: a model-visible event with no open turn would be crash debris; it is refused."""
    _refused(Session.create("s"), "NO_OPEN_TURN", UserMessage(_c("loose")), surface="append")


@pytest.mark.parametrize(
    "sources",
    [(), (1, 1), (5,), (4,), (-1,), (0, 4), (0, 9), (-1, 0)],
    ids=[
        "empty",
        "duplicate",
        "later",
        "self",
        "negative",
        "many-self",
        "many-later",
        "many-negative",
    ],
)
def test_source_event_seqs_must_be_non_empty_unique_and_earlier(sources: tuple[int, ...]) -> None:
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
    """R4.16: turn numbers increase along the log; a ``turn/start`` repeating or going below
    the last turn's number (or below 1) is refused ``TURN_NUMBER`` and nothing is logged. It
    was taken, leaving two turns of one number, which the log checker refuses."""
    session = Session.create("s")
    session.append(TurnStart(4, TurnTrigger("injection", PLUGIN)))
    session.append(TurnEnd(4, TurnEndReason.completed()))
    _refused(session, "TURN_NUMBER", TurnStart(turn, TurnTrigger("message")))
    assert (session.last_turn, session.next_turn_number()) == (4, 5)


def test_header_delta_before_any_header_is_refused() -> None:
    """R4.18: a delta cannot precede the first full header."""
    _refused(_open(), "CORRUPT_HEADER", RequestHeaderDelta(config=LlmCallConfig("m")))


# -- R4.19-R4.21: surface replace ---------------------------------------------------------------


def _history_session() -> Session:
    session = Session.create("s")
    _closed_turn(session, 1, "one")  # surface seqs 1, 3
    _closed_turn(session, 2, "two")  # surface seqs 7, 9
    session.append(TurnStart(3, TurnTrigger("message")))  # seq 12
    return session


def test_surface_replace_swaps_a_range_for_one_event() -> None:
    """R4.19-R4.21: a replace removes nodes start..end from the surface; the log keeps them."""
    session = _history_session()
    before = session.derive_messages()
    generation = session.surface_generation
    summary = ContextMessage(_c("summary of turns 1-2"), PLUGIN)
    session.append(summary, surface=Replace(1, 7), source_event_seqs=(1, 3, 7))
    history = list(session.derive_messages())
    assert [m.role for m in history] == ["user", "assistant"]
    assert history[0] == project(session.events[-1])
    assert history[1].content == (Text("re: two"),)
    assert session.surface_generation > generation
    assert len(session.events) == 14
    assert [m.content[0] for m in before] == [
        Text("one"),
        Text("re: one"),
        Text("two"),
        Text("re: two"),
    ]
    check_session_invariants(session.events)


@pytest.mark.parametrize(
    ("op", "sources"),
    [
        (Replace(1, 7), (1, 7)),
        (Replace(1, 7), (1, 3)),
        (Replace(7, 1), (1, 3, 7)),
        (Replace(3, 1), (1, 3)),
        (Replace(2, 3), (2, 3)),
        (Replace(1, 99), (1,)),
    ],
    ids=[
        "sources-miss-a-node",
        "sources-miss-the-last-node",
        "start-after-end",
        "start-next-after-end",
        "start-not-on-surface",
        "end-not-in-log",
    ],
)
def test_surface_replace_refuses_an_invalid_range(op: Replace, sources: tuple[int, ...]) -> None:
    """R4.19: both ends on the surface, start not after end, and every removed node in the sources."""
    session = _history_session()
    generation = session.surface_generation
    _refused(
        session,
        "INVALID_SURFACE_OP",
        ContextMessage(_c("summary")),
        surface=op,
        source_event_seqs=sources,
    )
    assert session.surface_generation == generation
    assert len(session.derive_messages()) == 4


def test_surface_replace_of_already_replaced_nodes_is_refused() -> None:
    """R4.20: replaced events stay in the log but are no longer on the surface."""
    session = _history_session()
    session.append(ContextMessage(_c("summary")), surface=Replace(1, 3), source_event_seqs=(1, 3))
    _refused(
        session,
        "INVALID_SURFACE_OP",
        ContextMessage(_c("again")),
        surface=Replace(1, 3),
        source_event_seqs=(1, 3),
    )
    session.append(
        ContextMessage(_c("again")), surface=Replace(13, 9), source_event_seqs=(7, 9, 13)
    )
    assert [m.content[1] for m in session.derive_messages()] == [Text("again")]


# -- R4.24, R4.25: seed and fork ----------------------------------------------------------------


def test_seed_is_validated_like_appends() -> None:
    """R4.24: seq == index, surface markers on surface events, structural rules; violations are refused."""
    source = _history_session()
    events = list(source.events)
    with pytest.raises(SessionError) as gap:
        Session.from_events(SessionHeader("x", 0), [events[0], events[2]])
    assert gap.value.code == "SEQ_GAP"
    bare = Event(1, events[1].time, events[1].data)
    with pytest.raises(SessionError) as marker:
        Session.from_events(SessionHeader("x", 0), [events[0], bare])
    assert marker.value.code == "MISSING_SURFACE_OP"
    replayed = Session.create("copy", seed=events)
    assert list(replayed.derive_messages()) == list(source.derive_messages())
    assert replayed.is_turn_open
    assert replayed.next_turn_number() == 4


def test_seed_refusal_names_the_event_that_breaks_an_invariant() -> None:
    """R4.24, R11.8: a stored log that breaks an invariant is refused naming the event's seq
    and type, so the bad record can be found."""
    events = list(_history_session().events)
    bare = Event(1, events[1].time, events[1].data)
    with pytest.raises(SessionError, match=r"^event seq 1 \(user/message\): ") as marker:
        Session.from_events(SessionHeader("x", 0), [events[0], bare])
    assert marker.value.code == "MISSING_SURFACE_OP"
    again = Event(1, events[0].time, events[0].data)
    with pytest.raises(SessionError, match=r"^event seq 1 \(turn/start\): turn/start while"):
        Session.from_events(SessionHeader("x", 0), [events[0], again])


def test_fork_copies_a_closed_prefix_with_lineage() -> None:
    """R4.25: the child holds events 0..boundary, names its parent and seed length, inherits cwd."""
    source = Session.create("parent", cwd="/work")
    _closed_turn(source, 1, "one")
    _closed_turn(source, 2, "two")
    child = source.fork("child", 5)
    assert list(child.events) == list(source.events[:6])
    assert (child.header.parent_session, child.header.seed_length, child.header.cwd) == (
        "parent",
        6,
        "/work",
    )
    assert child.next_turn_number() == 2
    whole = source.fork("whole")
    assert len(whole.events) == 12
    assert whole.header.seed_length == 12
    child.append(TurnStart(2, TurnTrigger("message")))
    assert len(source.events) == 12


def test_the_event_log_compares_by_its_events_like_the_tuple_it_stands_for() -> None:
    """R4.1, R4.25: the log is a read-only sequence of events, equal to another holding the
    same events (itself read twice, a fork of it, the tuple or list of them) and unhashable,
    as it is live."""
    source = Session.create("parent")
    _closed_turn(source, 1, "one")
    _closed_turn(source, 2, "two")
    assert source.events == source.events
    assert source.events == tuple(source.events)
    assert source.events == list(source.events)
    assert source.fork("whole").events == source.events
    assert source.fork("child", 5).events == source.events[:6]
    assert source.fork("child", 5).events != source.events
    assert source.events != "turn/start"
    with pytest.raises(TypeError):
        hash(source.events)


@pytest.mark.parametrize(
    ("boundary", "code"),
    [
        (-1, "INVALID_BOUNDARY"),
        (12, "INVALID_BOUNDARY"),
        (3, "OPEN_TURN"),
        (5.0, "INVALID_BOUNDARY"),
        (True, "INVALID_BOUNDARY"),
        ("5", "INVALID_BOUNDARY"),
    ],
    ids=repr,
)
def test_fork_refuses_a_bad_boundary(boundary: Any, code: str) -> None:
    """R4.25: the boundary must be an existing non-negative seq (an int, not a bool or float)
    whose event is a ``turn/end``."""
    source = Session.create("parent")
    _closed_turn(source, 1, "one")
    _closed_turn(source, 2, "two")
    with pytest.raises(SessionError) as caught:
        source.fork("child", boundary)
    assert caught.value.code == code


def test_fork_of_an_open_tail_without_boundary_is_refused_and_empty_source_forks_empty() -> None:
    """R4.25: an omitted boundary is the last event (so an open turn refuses); an empty source forks empty."""
    with pytest.raises(SessionError) as caught:
        _open().fork("child")
    assert caught.value.code == "OPEN_TURN"
    child = Session.create("empty").fork("child")
    assert list(child.events) == []
    assert child.header.parent_session == "empty"


# -- Codec round trip of every event type ----------------------------------------------------------

_SCHEMA = ToolSchema(
    "read", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}
)
_CONFIG = LlmCallConfig("m", provider="p", temperature=0.2, max_tokens=100, stop=("END",))
_PREFIX = (Message("user", (Text("prefix"),)),)
_ALL_EVENTS: list[tuple[EventData, SurfaceOp | None, tuple[int, ...] | None]] = [
    (TurnStart(1, TurnTrigger("message", PLUGIN)), None, None),
    (TurnStart(2, TurnTrigger("injection")), None, None),
    (StepStart(1, 1), None, None),
    (StepEnd(1, 1), None, None),
    (UserMessage((Text("hi"), Reasoning("why", "sig"))), "append", None),
    (UserMessage((OpaqueBlock("image", {"source": {"type": "url", "url": "u"}}),)), "append", None),
    (UserMessage((OpaqueBlock("opaque", {}), OpaqueBlock("", {"n": 1}))), "append", None),
    (PromptBlocked(_c("bad"), PLUGIN, "vetoed"), None, None),
    (ContextMessage(_c("ctx"), PLUGIN), "append", None),
    (SteeringMessage(1, _c("steer")), "append", None),
    (ContextMessage(_c("summary")), Replace(1, 2), (1, 2)),
    (
        AssistantMessage(
            1, 1, (Text("a"), ToolCall("c1", "read", '{"path": "x"}')), Usage(1, 2, 3, 4, 5)
        ),
        "append",
        (0, 1),
    ),
    (AssistantMessage(1, 1, ()), "append", None),
    (ToolCallEvent(1, 1, "c1", "read", '{"path": '), None, None),
    (
        ToolResultEvent(1, 1, "c1", _c("ok"), meta={"n": [1, 2.5, "s", True], "m": {}}),
        "append",
        (0,),
    ),
    (
        ToolResultEvent(
            1,
            1,
            "c1",
            (ToolResultBlock("c0", (Text("nested"),), True),),
            True,
            ToolErrorInfo("ToolError", "X"),
        ),
        "append",
        (0,),
    ),
    (RequestHeader(EpochHeader(_CONFIG, "sys", (_SCHEMA,), _PREFIX), "initial"), None, None),
    (RequestHeader(EpochHeader(LlmCallConfig("m")), "fallback"), None, None),
    (
        RequestHeaderDelta(
            SystemEdit(1, 0, ("x", "")), ToolsDelta((_SCHEMA,), ("old",), (_SCHEMA,)), _CONFIG, ()
        ),
        None,
        None,
    ),
    (RequestHeaderDelta(message_prefix=_PREFIX), None, None),
    (CustomEvent("todo/write", {"todos": [{"content": "x", "status": "done"}]}), None, None),
    *(
        (TurnEnd(1, reason), None, None)
        for reason in (
            TurnEndReason.completed(),
            TurnEndReason.aborted("why"),
            TurnEndReason.aborted(),
            TurnEndReason.error(2, "boom", "CODE"),
            TurnEndReason.error(0, "boom"),
            TurnEndReason.disposed(),
            TurnEndReason.max_tokens(),
            TurnEndReason.rejected("blocked"),
            TurnEndReason.interrupted(),
            TurnEndReason("future-kind"),
        )
    ),
    *(
        (AssistantChunk(1, 1, chunk), None, None)
        for chunk in (
            BlockStart(0, "text"),
            TextDelta(0, "t"),
            ReasoningDelta(1, "r", "sig"),
            ToolCallDelta(2, "c1", '{"a', "read"),
            ToolCallDelta(2, None, "1}"),
            BlockEnd(0, Text("t")),
            BlockEnd(2, ToolCall("c1", "read", "{}")),
            BlockEnd(3, OpaqueBlock("image", {"url": "u"})),
            UsageChunk(Usage(1, 2)),
            Finish(STOP),
            Finish(TOOL_CALLS),
            Finish(MAX_TOKENS),
            Finish(ABORTED),
            Finish(Errored("bad", "E")),
            Finish(Errored("bad")),
            Finish(OtherFinish("content-filter")),
        )
    ),
]


@pytest.mark.parametrize(
    ("data", "surface", "sources"), _ALL_EVENTS, ids=lambda v: getattr(v, "type", None)
)
def test_codec_round_trips_every_event_type(
    data: EventData, surface: SurfaceOp | None, sources: tuple[int, ...] | None
) -> None:
    """R4.3, R11.13: ``load_event(dump_event(e)) == e`` through real JSON text; absent optionals are omitted."""
    event = Event(7, 1_700_000_000_000, data, sources, surface)
    dumped = dump_event(event)
    text = json.dumps(dumped, allow_nan=False)
    assert load_event(json.loads(text)) == event
    assert dumped["type"] == data.type
    assert ("surface_op" in dumped) == (surface is not None)
    assert ("source_event_seqs" in dumped) == (sources is not None)
    assert "null" not in text


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("text", {"mime": "x"}),
        ("tool-call", {}),
        ("tool-result", {}),
        ("reasoning", {}),
        ("redacted-reasoning", {}),
        ("image", {"type": "base64", "data": "AAA"}),
        (5, {}),
        ("image", ["not", "an", "object"]),
    ],
    ids=repr,
)
def test_opaque_blocks_that_would_not_reload_as_themselves_are_refused(
    kind: Any, data: Any
) -> None:
    """R1.1, R4.3: an opaque block is stored as its data tagged with its kind, so a kind naming a
    built-in block type, a non-string kind or data with its own "type" key is refused when built."""
    with pytest.raises(ValueError, match="opaque block"):
        OpaqueBlock(kind, data)


def test_dump_is_plain_json_data_equal_to_its_stored_line_parsed() -> None:
    """DESIGN 3 (``Session.dump``), R11.4: each dumped event is plain JSON data (dicts, lists and
    scalars), equal to its JSON line parsed back and the caller's to change, however deeply the
    event's JSON payloads (plugin data, tool result meta, tool schemas, opaque blocks) nest."""
    session = _open()
    session.append(
        UserMessage((OpaqueBlock("image", {"source": {"sizes": [1, 2]}}),)), surface="append"
    )
    session.append_custom("todo/write", {"todos": [{"content": "x", "tags": ["a"]}]})
    session.append(RequestHeader(EpochHeader(_CONFIG, "sys", (_SCHEMA,)), "initial"))
    session.append(
        ToolResultEvent(1, 1, "c1", _c("ok"), meta={"n": [1, {"m": []}]}),
        surface="append",
        source_event_seqs=(1,),
    )
    dumped = session.dump()
    assert dumped == json.loads(json.dumps(dumped))

    def plain(value: object) -> bool:
        if type(value) is dict:
            return all(type(key) is str and plain(item) for key, item in value.items())
        if type(value) is list:
            return all(plain(item) for item in value)
        return value is None or type(value) in (str, int, float, bool)

    assert all(plain(line) for line in dumped)
    todos: list[object] = dumped[2]["data"]["todos"]  # type: ignore[index]
    todos.append("mine")
    assert session.events[2].data == CustomEvent(
        "todo/write", {"todos": [{"content": "x", "tags": ["a"]}]}
    )
    assert [load_event(line) for line in session.dump()] == list(session.events)


def test_codec_keeps_unknown_event_types_verbatim() -> None:
    """R4.11: an unknown type survives a load and dump unchanged and is ignored by history."""
    raw = {"seq": 0, "type": "compact/plan", "time": 5, "data": {"keep": [1, {"x": "y"}]}}
    event = load_event(raw)
    assert event.type == "compact/plan"
    assert json.loads(json.dumps(dump_event(event))) == raw
    assert project(event) is None


# -- R5.2, R5.3, R5.5, R5.7: projection -------------------------------------------------------------


def test_context_and_steering_envelope_golden() -> None:
    """R5.2, R5.7 golden: context and steering are wrapped in ``<context source="KIND">`` / ``<steering ...>``."""
    session = _open()
    session.append(ContextMessage((Text("fact one"), Text("fact two")), PLUGIN), surface="append")
    session.append(SteeringMessage(1, _c("turn left")), surface="append")
    session.append(ContextMessage(_c("odd"), MessageSource('we"ird')), surface="append")
    rendered = [[block.text for block in m.content] for m in session.derive_messages()]  # type: ignore[union-attr]
    assert rendered == [
        ['<context source="plugin">', "fact one", "fact two", "</context>"],
        ['<steering source="user">', "turn left", "</steering>"],
        ['<context source="we\\"ird">', "odd", "</context>"],
    ]
    assert all(m.role == "user" for m in session.derive_messages())


def test_projection_of_each_surface_type() -> None:
    """R5.2, R5.3: user, assistant, tool result projections; empty assistant hidden; nothing merged."""
    session = _open()
    session.append(UserMessage(_c("q")), surface="append")
    session.append(StepStart(1, 1))
    call = ToolCall("c1", "read", "{}")
    session.append(AssistantMessage(1, 1, (call,), Usage(1, 1)), surface="append")
    session.append(ToolCallEvent(1, 1, "c1", "read", "{}"))
    session.append(
        ToolResultEvent(1, 1, "c1", _c("data"), is_error=True),
        surface="append",
        source_event_seqs=(4,),
    )
    session.append(ContextMessage(_c("after")), surface="append")
    session.append(StepEnd(1, 1))
    session.append(StepStart(1, 2))
    session.append(AssistantMessage(1, 2, (), Usage(1, 0)), surface="append")
    assert list(session.derive_messages()) == [
        Message("user", (Text("q"),)),
        Message("assistant", (call,)),
        Message("user", (ToolResultBlock("c1", (Text("data"),), True),)),
        Message("user", (Text('<context source="user">'), Text("after"), Text("</context>"))),
    ]


def test_derived_history_is_an_immutable_snapshot() -> None:
    """R5.5: a snapshot never sees later appends and its messages cannot be mutated."""
    session = _open()
    session.append(UserMessage(_c("one")), surface="append")
    snapshot = session.derive_messages()
    session.append(ContextMessage(_c("two")), surface="append")
    assert len(snapshot) == 1
    assert len(session.derive_messages()) == 2
    with pytest.raises(AttributeError):
        snapshot.append(Message("user", ()))  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        snapshot[0].content = ()  # type: ignore[misc]
