"""What the session log accepts: only values it can store, reload and fold the same (SPEC 4.2, 8, 11.4)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from retinue import Message, SessionError, Text
from retinue._content import snapshot_messages
from retinue._errors import CorruptSessionError, InvalidJsonError
from retinue._request import LlmCallConfig, ToolSchema
from retinue.session import (
    AssistantMessage,
    EpochHeader,
    Event,
    Replace,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    SteeringMessage,
    StepEnd,
    StepStart,
    SystemEdit,
    ToolCallEvent,
    ToolResultEvent,
    ToolsDelta,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
    load_event,
    load_header,
)
from retinue.session._codec import decode_event, encode_event

TOOL = ToolSchema("t", "d", {"type": "object"})


def _open() -> Session:
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    return session


def _reloaded(session: Session) -> Session:
    """The session as a store would load it: every event through its JSONL line."""
    lines = [encode_event(event) for event in session.events]
    return Session.from_events(session.header, [decode_event(line) for line in lines])


# -- R4.5, R4.8: a header delta is folded before it is logged ----------------------------------------


def test_a_header_delta_that_cannot_fold_is_refused_before_logging() -> None:
    """R4.5, R8.5: a delta the fold refuses is never logged, never notified, and the log still reloads."""
    session = _open()
    header = EpochHeader(LlmCallConfig("m"), "one line")
    session.append(RequestHeader(header, "initial"))
    seen: list[int] = []
    session.observe(lambda event: seen.append(event.seq))
    with pytest.raises(SessionError) as caught:
        session.append(RequestHeaderDelta(system=SystemEdit(keep_start=3, keep_end=0)))
    assert caught.value.code == "CORRUPT_HEADER"
    assert [e.type for e in session.events] == ["turn/start", "request/header"]
    assert seen == []
    assert session.current_header == header
    assert _reloaded(session).current_header == header


@pytest.mark.parametrize(
    ("keep_start", "keep_end"), [(1.0, 0), (True, 0), (0, -1), (0, "1")], ids=repr
)
def test_system_edit_line_counts_are_non_negative_integers(keep_start: Any, keep_end: Any) -> None:
    """R8.5: a system edit counts whole lines; anything else is refused when the edit is built."""
    with pytest.raises(InvalidJsonError):
        SystemEdit(keep_start, keep_end)


# -- R4.22, R4.5: sources, surface ops and event fields are exact integers ---------------------------


@pytest.mark.parametrize("sources", [[1.0], [True], "01", ["1"], 1], ids=repr)
def test_source_event_seqs_must_be_integers(sources: Any) -> None:
    """R4.22: source seqs that are not integers are refused like any invalid source; nothing is logged."""
    session = _open()
    session.append(UserMessage((Text("u"),)), surface="append")
    with pytest.raises(SessionError) as caught:
        session.append(
            AssistantMessage(1, 1, (Text("hi"),)), surface="append", source_event_seqs=sources
        )
    assert caught.value.code == "INVALID_SOURCES"
    assert len(session.events) == 2


@pytest.mark.parametrize(("start", "end"), [(1.0, 1), (1, True), ("1", 1)], ids=repr)
def test_replace_bounds_must_be_integers(start: Any, end: Any) -> None:
    """R4.19: a replace names its range by seqs, which are integers."""
    with pytest.raises(InvalidJsonError):
        Replace(start, end)


def test_append_refuses_data_that_is_not_an_event() -> None:
    """R4.5: only the event classes (or a custom event) can be appended; nothing is logged."""
    session = _open()
    with pytest.raises(SessionError) as caught:
        session.append({"x": 1})  # type: ignore[arg-type]
    assert caught.value.code == "INVALID_EVENT_DATA"
    assert len(session.events) == 1


_LOOSE_NUMBERS: list[Callable[[], object]] = [
    lambda: TurnStart(True, TurnTrigger("message")),  # type: ignore[arg-type]
    lambda: TurnEnd(1.0, TurnEndReason.completed()),  # type: ignore[arg-type]
    lambda: TurnEndReason.error(1.0, "boom"),  # type: ignore[arg-type]
    lambda: SteeringMessage("1", "x"),  # type: ignore[arg-type]
    lambda: AssistantMessage(1, 1.0, "x"),  # type: ignore[arg-type]
    lambda: ToolResultEvent(1, 1.5, "c", "x"),  # type: ignore[arg-type]
    lambda: ToolResultEvent(1, 1, "c", "x", is_error=1),  # type: ignore[arg-type]
    lambda: StepStart(1, True),  # type: ignore[arg-type]
    lambda: StepStart(1, 1.0),  # type: ignore[arg-type]
    lambda: StepEnd(True, 1),  # type: ignore[arg-type]
    lambda: StepEnd(1, 2.0),  # type: ignore[arg-type]
    lambda: ToolCallEvent(1.0, 1, "c", "n", "{}"),  # type: ignore[arg-type]
    lambda: ToolCallEvent(1, 1, "c", "n", {"city": "Paris"}),  # type: ignore[arg-type]
    lambda: ToolCallEvent(1, 1, 7, "n", "{}"),  # type: ignore[arg-type]
    lambda: ToolCallEvent(1, 1, "c", None, "{}"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("build", _LOOSE_NUMBERS)
def test_event_numbers_must_have_their_json_type(build: Callable[[], object]) -> None:
    """R4.5: a bool or float where the log stores an integer (or an int for a bool) would not reload."""
    with pytest.raises(InvalidJsonError):
        build()


_OUTSIDE_LITERALS: list[Callable[[], object]] = [
    lambda: TurnTrigger("bogus"),  # type: ignore[arg-type]
    lambda: TurnTrigger(None),  # type: ignore[arg-type]
    lambda: RequestHeader(EpochHeader(LlmCallConfig("m")), "bogus"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("build", _OUTSIDE_LITERALS)
def test_event_fields_of_a_fixed_set_refuse_other_values(build: Callable[[], object]) -> None:
    """R4.5: a trigger kind or header reason outside its set would be logged but not reload."""
    with pytest.raises(ValueError, match="must be one of"):
        build()


# -- R4.5, R1.6: no non-finite number reaches a header -----------------------------------------------


@pytest.mark.parametrize("temperature", [math.nan, math.inf, -math.inf, True, "0.5"], ids=repr)
def test_call_config_refuses_a_temperature_that_is_not_a_finite_number(temperature: Any) -> None:
    """R4.5, R1.6, R8.2: the config is logged in headers, so it must be lossless JSON."""
    with pytest.raises(InvalidJsonError):
        LlmCallConfig("m", temperature=temperature)


@pytest.mark.parametrize("max_tokens", [1.0, True, "9"], ids=repr)
def test_call_config_refuses_a_max_tokens_that_is_not_an_integer(max_tokens: Any) -> None:
    """R4.5, R8.2: ``max_tokens`` is stored as a JSON integer."""
    with pytest.raises(InvalidJsonError):
        LlmCallConfig("m", max_tokens=max_tokens)


def test_encoding_refuses_a_non_finite_number_that_slipped_past_validation() -> None:
    """R1.6, R11.13: the encoder itself never writes ``NaN``, whatever the value holds."""
    config = LlmCallConfig("m", temperature=0.5)
    object.__setattr__(config, "temperature", math.nan)
    event = Event(0, 1, RequestHeader(EpochHeader(config), "initial"))
    with pytest.raises(InvalidJsonError):
        encode_event(event)


# -- R4.7, R8.9: header values are deep snapshots that reload equal ----------------------------------


def test_header_values_are_snapshots_that_reload_equal() -> None:
    """R4.7, R8.9: lists given to a header are copied to tuples; the reloaded fold equals it."""
    content = [Text("be brief")]
    tools = [TOOL]
    header = EpochHeader(LlmCallConfig("m"), "sys", tools, [Message("user", content)])  # type: ignore[arg-type]
    session = _open()
    session.append(RequestHeader(header, "initial"))
    content.append(Text("injected later"))
    tools.clear()
    logged = session.events[-1].data
    assert isinstance(logged, RequestHeader)
    assert logged.header.tools == (TOOL,)
    assert logged.header.message_prefix == (Message("user", (Text("be brief"),)),)
    hash(session.events[-1])
    assert _reloaded(session).current_header == header


def test_delta_values_are_snapshots_that_reload_equal() -> None:
    """R4.7, R8.9: a delta's lists are copied to tuples, so the reloaded fold equals the live one."""
    session = _open()
    session.append(RequestHeader(EpochHeader(LlmCallConfig("m"), "a", (TOOL,)), "initial"))
    delta = RequestHeaderDelta(
        system=SystemEdit(1, 0, ["b"]),  # type: ignore[arg-type]
        tools=ToolsDelta(added=[], removed=["t"], changed=[]),  # type: ignore[arg-type]
        message_prefix=[Message("user", (Text("p"),))],  # type: ignore[arg-type]
    )
    session.append(delta)
    hash(session.events[-1])
    assert session.current_header == EpochHeader(
        LlmCallConfig("m"), "a\nb", (), (Message("user", (Text("p"),)),)
    )
    assert _reloaded(session).current_header == session.current_header


def test_logged_messages_are_snapshots_with_tuple_content() -> None:
    """R1.2, R4.7: a message logged in a header keeps a tuple of blocks, however it was given."""
    prefix = snapshot_messages([Message("user", [Text("x")]), Message("user", "y")])  # type: ignore[arg-type]
    assert prefix == (Message("user", (Text("x"),)), Message("user", (Text("y"),)))
    with pytest.raises(TypeError):
        snapshot_messages([Message("user", [object()])])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        snapshot_messages(["not a message"])  # type: ignore[list-item]


def test_an_empty_system_prompt_is_absent() -> None:
    """R8.2: the canonical header has no empty system, so it reloads equal."""
    header = EpochHeader(LlmCallConfig("m"), "")
    assert header.system is None
    session = _open()
    session.append(RequestHeader(header, "initial"))
    assert _reloaded(session).current_header == header


# -- R11.13: loading refuses malformed input with the typed error ------------------------------------


@pytest.mark.parametrize("raw", [["x"], "x", 5, None], ids=repr)
def test_loading_an_event_or_header_that_is_not_an_object_is_corrupt(raw: Any) -> None:
    """R11.13: every stored line is a JSON object; anything else is a corrupt log."""
    with pytest.raises(CorruptSessionError):
        load_event(raw)
    with pytest.raises(CorruptSessionError):
        load_header(raw)


@pytest.mark.parametrize(
    ("kind", "data", "field"),
    [
        ("request/header", {"header": {"config": {"stop": "END"}}, "reason": "initial"}, "stop"),
        ("request/header-delta", {"system": {"keep_start": 0, "insert": "abc"}}, "insert"),
        ("request/header-delta", {"tools": {"removed": "read"}}, "removed"),
    ],
)
def test_loading_a_string_where_the_log_holds_a_list_is_corrupt(
    kind: str, data: dict[str, Any], field: str
) -> None:
    """R11.13: a stored array never arrives as a string split into its characters, which
    would change the folded request header without a word; the error names the field.
    """
    with pytest.raises(CorruptSessionError, match=rf"@ \$\.data\.[a-z_.]*{field}$"):
        load_event({"seq": 0, "type": kind, "time": 1, "data": data})


@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_decoding_a_too_deeply_nested_line_is_corrupt(depth: int) -> None:
    """R11.13: a line nested past what the loader can walk is reported as corrupt, not a crash."""
    line = json.dumps({"seq": 0, "type": "x/deep", "time": 1, "data": 0}, separators=(",", ":"))
    deep = line.replace('"data":0', '"data":' + "[" * depth + "]" * depth)
    with pytest.raises(CorruptSessionError, match="nested"):
        decode_event(deep)


def test_loading_a_too_deeply_nested_event_is_corrupt() -> None:
    """R11.13: the same holds for a parsed record handed to ``load_event``."""
    nested: object = 0
    for _ in range(5_000):
        nested = [nested]
    with pytest.raises(CorruptSessionError, match="nested"):
        load_event({"seq": 0, "type": "x/deep", "time": 1, "data": {"v": nested}})
