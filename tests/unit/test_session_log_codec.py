"""The session log's codec as a unit: every event type round trips, dumps are plain JSON and
unknown types are kept (SPEC 4).
"""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest

from retinue import Message, MessageSource, Reasoning, Text, ToolCall, ToolResultBlock
from retinue._content import OpaqueBlock
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
from tests.unit._session_log_kit import PLUGIN, _c, _open

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
    session.append(StepStart(1, 1))
    session.append(AssistantMessage(1, 1, (ToolCall("c1", "t", "{}"),)), surface="append")
    call = session.append(ToolCallEvent(1, 1, "c1", "t", "{}"))
    session.append(
        ToolResultEvent(1, 1, "c1", _c("ok"), meta={"n": [1, {"m": []}]}),
        surface="append",
        source_event_seqs=(call.seq,),
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


class _Kind(enum.StrEnum):
    PLUGIN = "plugin"
    MODEL = "m1"


def test_a_str_enum_in_a_field_dumps_as_the_plain_str_that_loads_back() -> None:
    """R1.6, R4.5: a str field given a StrEnum member (a source kind, a model name, a text) is
    dumped as the plain str its stored line holds, so ``load_event`` takes every dumped event."""
    session = _open()
    session.append(
        UserMessage((Text(_Kind.PLUGIN),), MessageSource(_Kind.PLUGIN, _Kind.MODEL)),
        surface="append",
    )
    session.append(RequestHeader(EpochHeader(LlmCallConfig(_Kind.MODEL)), "initial"))
    dumped = session.dump()
    kinds = {type(value) for value in _leaves(dumped)}
    assert kinds <= {str, int, float, bool, type(None)}
    assert [load_event(line) for line in dumped] == list(session.events)


def _leaves(value: object) -> list[object]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]
