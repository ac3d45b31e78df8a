"""Whatever the session log accepts stores and loads again; the rest is refused when built (R4.5)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from retinue import Message, Text, ToolCall
from retinue._errors import CorruptSessionError, InvalidJsonError
from retinue._lossless import MAX_JSON_DEPTH, freeze_json, loads_frozen
from retinue._request import LlmCallConfig, ToolSchema
from retinue._stream import BlockStart, Usage
from retinue.session import (
    AssistantMessage,
    CustomEvent,
    EpochHeader,
    PromptBlocked,
    Replace,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    StepEnd,
    StepStart,
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
)
from retinue.session._chunkcheck import chunk_problem
from retinue.session._codec import decode_event, encode_event

BIG = 10**5000  # more digits than sys.get_int_max_str_digits() allows by default
CONFIG = LlmCallConfig("m")


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def _deeper(frames: int, call: Callable[[], Any]) -> Any:
    """*call* from *frames* Python frames further down the stack."""
    return call() if frames == 0 else _deeper(frames - 1, call)


# -- R4.5: a message role outside the Role literal ---------------------------------------------------


@pytest.mark.parametrize("role", ["system", "user", "assistant"])
def test_a_prefix_message_of_every_role_stores_and_loads(role: Any) -> None:
    """R4.5, R8.2: a header's message prefix reloads as itself, whatever its role."""
    prefix = (Message(role, (Text("be brief"),)),)
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    event = session.append(RequestHeader(EpochHeader(CONFIG, None, (), prefix), "initial"))
    assert decode_event(encode_event(event)) == event


def test_a_message_with_a_role_outside_the_literal_is_refused_when_built() -> None:
    """R4.5: ``developer`` would be logged in a header prefix and then refused on load."""
    with pytest.raises(ValueError, match=r"Message\.role must be one of .*'developer'"):
        Message("developer", (Text("x"),))  # type: ignore[arg-type]


def test_a_message_role_that_is_not_a_string_is_a_type_error() -> None:
    """R4.5: a role of the wrong type is refused with a TypeError naming the field."""
    with pytest.raises(TypeError, match=r"Message\.role"):
        Message(["user"], (Text("x"),))  # type: ignore[arg-type]


# -- R4.5, R11.2: fields the stored format writes as strings or records ------------------------------

WRONG_TYPES: dict[str, tuple[Callable[[], object], str]] = {
    "error info name": (lambda: ToolErrorInfo(1, "c"), r"ToolErrorInfo\.name"),  # type: ignore[arg-type]
    "error info code": (lambda: ToolErrorInfo("n", 2), r"ToolErrorInfo\.code"),  # type: ignore[arg-type]
    "turn end kind": (lambda: TurnEndReason(5), r"TurnEndReason\.kind"),  # type: ignore[arg-type]
    "turn end message": (
        lambda: TurnEndReason("error", step=1, message=5),  # type: ignore[arg-type]
        r"TurnEndReason\.message",
    ),
    "turn end reason": (lambda: TurnEnd(1, "completed"), r"TurnEnd\.reason"),  # type: ignore[arg-type]
    "turn start trigger": (lambda: TurnStart(1, "message"), r"TurnStart\.trigger"),  # type: ignore[arg-type]
    "tool name": (lambda: ToolSchema(3, "d", {}), r"ToolSchema\.name"),  # type: ignore[arg-type]
    "tool description": (lambda: ToolSchema("t", None, {}), r"ToolSchema\.description"),  # type: ignore[arg-type]
    "config model": (lambda: LlmCallConfig(None), r"LlmCallConfig\.model"),  # type: ignore[arg-type]
    "config provider": (lambda: LlmCallConfig("m", provider=5), r"LlmCallConfig\.provider"),  # type: ignore[arg-type]
    "assistant usage": (
        lambda: AssistantMessage(1, 1, (Text("x"),), {"input_tokens": 1}),  # type: ignore[arg-type]
        r"AssistantMessage\.usage",
    ),
    "tool result error": (
        lambda: ToolResultEvent(1, 1, "c", (Text("x"),), True, "boom"),  # type: ignore[arg-type]
        r"ToolResultEvent\.error",
    ),
    "tool result call id": (
        lambda: ToolResultEvent(1, 1, 7, (Text("x"),)),  # type: ignore[arg-type]
        r"ToolResultEvent\.call_id",
    ),
    "user source": (lambda: UserMessage((Text("x"),), "user"), r"UserMessage\.source"),  # type: ignore[arg-type]
    "blocked reason": (
        lambda: PromptBlocked((Text("x"),), reason=None),  # type: ignore[arg-type]
        r"PromptBlocked\.reason",
    ),
    "header config": (lambda: EpochHeader("m"), r"EpochHeader\.config"),  # type: ignore[arg-type]
    "header system": (lambda: EpochHeader(CONFIG, 5), r"EpochHeader\.system"),  # type: ignore[arg-type]
    "header tools": (lambda: EpochHeader(CONFIG, None, ("t",)), r"EpochHeader\.tools"),  # type: ignore[arg-type]
    "request header": (lambda: RequestHeader(CONFIG, "initial"), r"RequestHeader\.header"),  # type: ignore[arg-type]
    "delta added": (lambda: ToolsDelta(added=("t",)), r"ToolsDelta\.added"),  # type: ignore[arg-type]
    "delta changed": (lambda: ToolsDelta(changed=["t"]), r"ToolsDelta\.changed"),  # type: ignore[list-item]
    "delta config": (lambda: RequestHeaderDelta(config="m"), r"RequestHeaderDelta\.config"),  # type: ignore[arg-type]
    "delta system": (lambda: RequestHeaderDelta(system="x"), r"RequestHeaderDelta\.system"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("build", list(WRONG_TYPES.values()), ids=list(WRONG_TYPES))
def test_a_field_the_stored_format_could_not_reload_is_refused_when_built(
    build: tuple[Callable[[], object], str],
) -> None:
    """R4.5, R11.2: a value of the wrong type is refused before it can be logged, naming its field."""
    make, field = build
    with pytest.raises(TypeError, match=field):
        make()


def test_a_removed_tool_name_that_is_not_a_string_is_refused_when_built() -> None:
    """R4.5: a delta's removed names are stored as strings."""
    with pytest.raises(InvalidJsonError, match="removed"):
        ToolsDelta(removed=(5,))  # type: ignore[arg-type]


def test_events_holding_every_record_field_store_and_load_as_themselves() -> None:
    """R4.5, R11.2: the validated fields still accept every value the stored format holds."""
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    session.append(StepStart(1, 1))
    tool = ToolSchema("t", "d", {"type": "object"})
    header = EpochHeader(LlmCallConfig("m", provider="p", max_tokens=5), "sys", (tool,))
    events = [
        session.append(RequestHeader(header, "initial")),
        session.append(RequestHeaderDelta(SystemEdit(0, 1), ToolsDelta((), ("t",)), CONFIG)),
        session.append(
            AssistantMessage(1, 1, (Text("x"), ToolCall("c", "t", "{}")), Usage(1, 2, 3)),
            surface="append",
        ),
        session.append(ToolCallEvent(1, 1, "c", "t", "{}")),
    ]
    events += [
        session.append(
            ToolResultEvent(1, 1, "c", (Text("x"),), True, ToolErrorInfo("E", "CODE")),
            surface="append",
            source_event_seqs=(events[-1].seq,),
        ),
        session.append(StepEnd(1, 1)),
        session.append(PromptBlocked((Text("x"),), reason="no")),
        session.append(TurnEnd(1, TurnEndReason.error(1, "m", "CODE"))),
    ]
    assert [decode_event(encode_event(event)) for event in events] == events


# -- R4.5, R1.6: integers too long for JSON to write --------------------------------------------------

LONG_INTS: dict[str, tuple[Callable[[], object], str]] = {
    "usage count": (lambda: Usage(BIG), "usage.input_tokens"),
    "turn end turn": (lambda: TurnEnd(BIG, TurnEndReason.completed()), "turn"),
    "turn start turn": (lambda: TurnStart(BIG, TurnTrigger("message")), "turn"),
    "turn end reason step": (lambda: TurnEndReason.error(BIG, "m"), "step"),
    "config max tokens": (lambda: LlmCallConfig("m", max_tokens=BIG), "max_tokens"),
    "config temperature": (lambda: LlmCallConfig("m", temperature=BIG), "temperature"),
    "step start step": (lambda: StepStart(1, -BIG), "step/start: step"),
    "tool call turn": (lambda: ToolCallEvent(BIG, 1, "c", "t", "{}"), "tool/call: turn"),
    "assistant step": (lambda: AssistantMessage(1, BIG, (Text("x"),)), "assistant/message: step"),
    "tool result turn": (lambda: ToolResultEvent(BIG, 1, "c", (Text("x"),)), "tool/result: turn"),
    "replace start": (lambda: Replace(BIG, 1), "start"),
    "system edit": (lambda: SystemEdit(0, BIG), "keep_end"),
}


@pytest.mark.parametrize("build", list(LONG_INTS.values()), ids=list(LONG_INTS))
def test_an_integer_too_long_to_write_is_refused_when_built(
    build: tuple[Callable[[], object], str],
) -> None:
    """R4.5, R1.6: an int with more digits than JSON can write is an InvalidJsonError naming the field."""
    make, field = build
    with pytest.raises(InvalidJsonError, match=field):
        make()


def test_a_turn_end_with_a_long_turn_never_reaches_the_session() -> None:
    """R4.5: refused when built, so the session's own messages never format the number."""
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    with pytest.raises(InvalidJsonError, match="turn"):
        session.append(TurnEnd(BIG, TurnEndReason.completed()))
    assert len(session.events) == 1


def test_a_chunk_with_a_long_index_is_not_storable() -> None:
    """R4.5: the check run before a chunk is logged names an index JSON cannot write."""
    assert chunk_problem(BlockStart(BIG, "text")) == (
        "block-start.index must be an integer JSON can write, "
        f"got an integer of {BIG.bit_length()} bits"
    )


def test_a_logged_chunk_with_a_long_index_is_refused_typed_when_encoded() -> None:
    """R4.5: a chunk appended directly with such an index fails to encode typed, not a ValueError."""
    session = Session.create("s")
    seq = session.append_chunk(1, 1, BlockStart(BIG, "text"))
    with pytest.raises(InvalidJsonError, match=r"block-start\.index"):
        encode_event(session.events[seq])


# -- R4.5, R1.6: one fixed nesting limit at append and at load ---------------------------------------


def test_the_deepest_value_append_accepts_loads_again_from_a_deep_stack() -> None:
    """R4.5: a value at the depth limit is accepted and decodes even far down the stack."""
    event = Session.create("s").append_custom("x/y", _nested(MAX_JSON_DEPTH))
    line = encode_event(event)
    assert _deeper(500, lambda: decode_event(line)) == event
    assert _deeper(500, lambda: loads_frozen(json.dumps(_nested(MAX_JSON_DEPTH)))) == freeze_json(
        _nested(MAX_JSON_DEPTH)
    )


def test_a_value_one_level_deeper_is_refused_at_append_and_at_load() -> None:
    """R4.5: append refuses exactly the depth load refuses, with a typed error naming the limit."""
    too_deep = _nested(MAX_JSON_DEPTH + 1)
    limit = f"more than {MAX_JSON_DEPTH} levels"
    with pytest.raises(InvalidJsonError, match=limit):
        Session.create("s").append_custom("x/y", too_deep)
    with pytest.raises(InvalidJsonError, match=limit):
        loads_frozen(json.dumps(too_deep))
    line = json.dumps({"seq": 0, "type": "x/y", "time": 1, "data": too_deep})
    with pytest.raises(CorruptSessionError, match=limit):
        decode_event(line)


def test_a_frozen_object_put_inside_another_value_counts_its_own_depth() -> None:
    """R4.5: an already-frozen object is not re-copied, but its depth still counts."""
    inner = freeze_json(_nested(MAX_JSON_DEPTH - 1))
    assert freeze_json([inner]) == (inner,)
    with pytest.raises(InvalidJsonError, match=f"more than {MAX_JSON_DEPTH} levels"):
        freeze_json({"a": [inner]})


def test_many_sibling_objects_are_not_mistaken_for_nesting() -> None:
    """R1.6: the depth is how deeply objects nest, not how many there are."""
    text = json.dumps({f"k{i}": {"v": i} for i in range(MAX_JSON_DEPTH * 2)})
    assert loads_frozen(text) == json.loads(text)


# -- R1.6: object keys are written as the str they hold ------------------------------------------------


class _Key(str):
    """A str subclass whose ``==`` and hash tell it apart from the str it holds."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


def test_a_str_subclass_key_is_frozen_as_the_exact_str_it_holds() -> None:
    """R1.6: a key is stored as a plain str, as a str value is, and logs as it decodes."""
    event = Session.create("s").append_custom("x/y", {"o": {_Key("a"): 1}})
    frozen = freeze_json({"o": {_Key("a"): 1}})
    assert isinstance(frozen, dict)
    inner = frozen["o"]
    assert isinstance(inner, dict)
    assert [type(key) for key in inner] == [str]
    assert inner == {"a": 1}
    assert event.data == CustomEvent("x/y", frozen)
    assert decode_event(encode_event(event)) == event


@pytest.mark.parametrize(
    "value",
    [{_Key("a"): 1, "a": 2}, {"a": 2, _Key("a"): 1}, {_Key("a"): 1, _Key("a"): 2}],
    ids=["subclass-first", "exact-first", "two-subclasses"],
)
def test_two_keys_written_as_the_same_str_are_refused_naming_the_path(value: Any) -> None:
    """R1.6: keys the JSON text would write twice (so load as one) are an InvalidJsonError."""
    with pytest.raises(InvalidJsonError) as caught:
        freeze_json({"outer": [value]})
    assert str(caught.value) == "outer[0] has the key 'a' twice"
    with pytest.raises(InvalidJsonError, match="x/y event: data has the key 'a' twice"):
        Session.create("s").append_custom("x/y", value)


# -- R11.2: a load refusal names the envelope field ----------------------------------------------------

GOOD = {
    "seq": 3,
    "type": "tool/result",
    "time": 1,
    "data": {"turn": 1, "step": 1, "call_id": "c", "content": [], "is_error": False},
    "source_event_seqs": [2],
    "surface_op": "append",
}


@pytest.mark.parametrize(
    ("patch", "where"),
    [
        ({"time": 1.5}, "$.time"),
        ({"seq": "3"}, "$.seq"),
        ({"source_event_seqs": 5}, "$.source_event_seqs"),
        ({"source_event_seqs": ["2"]}, "$.source_event_seqs"),
        ({"surface_op": "prepend"}, "$.surface_op"),
        ({"surface_op": {"op": "replace", "start": "1", "end": 2}}, "$.surface_op"),
        ({"data": None}, "$.data"),
    ],
    ids=repr,
)
def test_a_malformed_envelope_field_is_named_in_the_refusal(
    patch: dict[str, Any], where: str
) -> None:
    """R11.2: the refusal says which field of the stored event is wrong."""
    with pytest.raises(
        CorruptSessionError,
        match=f"event seq .* is malformed: .* @ {where}$".replace("$.", r"\$\."),
    ):
        decode_event(json.dumps({**GOOD, **patch}))


def test_a_missing_envelope_field_is_named_in_the_refusal() -> None:
    """R11.2: a missing ``time`` is named as missing, with its path."""
    line = json.dumps({key: value for key, value in GOOD.items() if key != "time"})
    with pytest.raises(CorruptSessionError, match=r"required field 'time' missing @ \$\.time"):
        decode_event(line)
