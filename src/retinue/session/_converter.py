"""The one cattrs converter between session values and their JSON shape (SPEC 4.3, 11.4).

Its hook tables, both ways: how each value is unstructured to JSON and
structured back, exactly (no coercion) and refusing keys no field holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import homogenous_tuple_structure_factory
from cattrs.errors import ForbiddenExtraKeysError

from retinue._content import ContentBlock, Message, OpaqueBlock, ToolResultBlock
from retinue._lossless import FrozenDict, JsonValue, freeze_json, shown_short, too_deep
from retinue._request import LlmCallConfig, ToolSchema
from retinue._sources import MessageSource
from retinue._stream import (
    ABORTED,
    MAX_TOKENS,
    STOP,
    TOOL_CALLS,
    Errored,
    FinishReason,
    OtherFinish,
    StreamChunk,
    ToolCallDelta,
    Usage,
)

from ._chunkcheck import BLOCK_TYPES, CHUNK_TYPES
from ._events import (
    AssistantChunk,
    CustomEvent,
    EpochHeader,
    EventData,
    Replace,
    SessionHeader,
    SurfaceOp,
    SystemEdit,
    ToolErrorInfo,
    ToolsDelta,
    TurnEndReason,
    TurnTrigger,
)
from ._nesting import deeper_than_json

__all__ = [
    "EVENT_TYPES",
    "MALFORMED",
    "FieldError",
    "converter",
    "exact_int",
    "exact_str",
    "is_mapping",
    "structure_surface",
    "unknown_keys",
]


# The built-in types, read off the EventData union so neither list can drift.
EVENT_TYPES: dict[str, type[Any]] = {
    cls.type: cls for cls in get_args(EventData) if cls is not CustomEvent
}
FINISH_SINGLETONS: dict[str, FinishReason] = {
    reason.kind: reason for reason in (STOP, TOOL_CALLS, MAX_TOKENS, ABORTED)
}

converter = cattrs.Converter()


def exact_int(value: Any) -> int:
    """*value* if it is a JSON integer; a stored row is never coerced (``1.9`` is not ``1``)."""
    if type(value) is not int:
        raise TypeError(f"expected an integer, got {shown_short(value)}")
    return value


def _exact(kind: type[Any]) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        if type(value) is not kind:
            raise TypeError(f"expected {kind.__name__}, got {shown_short(value)}")
        return value

    return structure


def _number(value: Any, _: Any) -> float:
    # An integer stays one, so a stored ``1`` is written back as ``1``.
    if type(value) is not int and type(value) is not float:
        raise TypeError(f"expected a number, got {shown_short(value)}")
    return value


exact_str = _exact(str)


def _optional_str(value: Any) -> str | None:
    return None if value is None else exact_str(value, None)


for _primitive in (str, int, bool):
    converter.register_structure_hook(_primitive, _exact(_primitive))
converter.register_structure_hook(float, _number)


def _is_homogeneous_tuple(cls: Any) -> bool:
    args = get_args(cls)
    return get_origin(cls) is tuple and len(args) == 2 and args[1] is Ellipsis


def _homogeneous_tuple(cls: Any, conv: Any) -> Callable[[Any, Any], tuple[Any, ...]]:
    """cattrs' own tuple hook (its errors name the item's path), for JSON lists only."""
    structure_tuple = homogenous_tuple_structure_factory(cls, conv)

    def structure(value: Any, type_: Any) -> tuple[Any, ...]:
        # A stored array is a JSON list; a string would otherwise split into characters.
        if type(value) is not list:
            raise TypeError(f"expected a list, got {value!r}")
        structured: tuple[Any, ...] = structure_tuple(value, type_)
        return structured

    return structure


converter.register_structure_hook_factory(_is_homogeneous_tuple, _homogeneous_tuple)


# The stored format is closed and versioned (R4.3, R11.2): a key that no field of
# its record holds cannot be kept, so it is refused rather than silently dropped.
# Open parts stay open: unknown event types, content blocks and finish kinds, and
# JSON payloads (``meta``) keep every key.
_TAGGED = frozenset({*BLOCK_TYPES.values(), *CHUNK_TYPES.values()})


def _record_keys(cls: type[Any]) -> frozenset[str]:
    """The keys a stored record of *cls* may hold: its fields, and its tag in a tagged union."""
    names = getattr(cls, "_fields", None) or [field.name for field in attrs.fields(cls)]
    return frozenset([*names, "type"] if cls in _TAGGED else names)


def unknown_keys(value: Mapping[str, Any], keys: frozenset[str], cls: type[Any]) -> Exception:
    # A key that is no str (a mapping built in Python) is named by its repr: the
    # refusal's message joins and sorts the names, which only strs allow.
    extra = {key if type(key) is str else shown_short(key) for key in set(value) - keys}
    return ForbiddenExtraKeysError("", cls, extra)


def _refuse_unknown(value: Any, keys: frozenset[str], cls: type[Any]) -> None:
    # Written out inline where every loaded record passes, sparing a call per record.
    if isinstance(value, dict) and not keys.issuperset(value):
        raise unknown_keys(value, keys, cls)


def _is_closed_record(cls: Any) -> bool:
    # A tagged record is checked by its union's hook. The header is read leniently:
    # its version must be checked before the rest of a newer format is judged (R4.3).
    return attrs.has(cls) and cls not in _TAGGED and cls is not SessionHeader


def _closed_record(cls: type[Any], conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """cattrs' own generated hook for *cls*, refusing a record with a key it has no field for.

    A value that is no object is refused too: the generated hook tests each field's
    key with ``in``, which a str or a list answers, so a record whose fields all have
    defaults (a message source, a usage) would load from ``"x"`` or ``[]`` as its defaults.
    """
    structure_fields = conv.gen_structure_attrs_fromdict(cls)
    keys = _record_keys(cls)

    def structure(value: Any, type_: Any) -> Any:
        if type(value) is not dict and not isinstance(value, Mapping):
            raise TypeError(f"expected an object, got {value!r:.80}")
        if not keys.issuperset(value):
            raise unknown_keys(value, keys, cls)
        return structure_fields(value, type_)

    return structure


converter.register_structure_hook_factory(_is_closed_record, _closed_record)


def _plain_unstructure(cls: type[Any]) -> Callable[[Any], dict[str, Any]]:
    """Unstructure an attrs value or named tuple to a dict: its tag first, ``None`` fields omitted."""
    tuple_fields = getattr(cls, "_fields", None)  # a named tuple's field names
    names = list(tuple_fields or ()) or [field.name for field in attrs.fields(cls)]
    tag = cls.__dict__.get("type")
    unstructure = converter.unstructure

    def to_dict(value: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"type": tag} if isinstance(tag, str) else {}
        for name in names:
            item = getattr(value, name)
            if item is not None:
                out[name] = unstructure(item)
        return out

    return to_dict


def _json_unstructure(value: Any) -> Any:
    return value


for _cls in (
    *BLOCK_TYPES.values(),
    *CHUNK_TYPES.values(),
    *EVENT_TYPES.values(),
    Message,
    MessageSource,
    Usage,
    LlmCallConfig,
    ToolSchema,
    EpochHeader,
    Errored,
    SessionHeader,
    TurnEndReason,
    TurnTrigger,
    ToolErrorInfo,
    SystemEdit,
    ToolsDelta,
):
    converter.register_unstructure_hook(_cls, _plain_unstructure(_cls))
converter.register_unstructure_hook(FrozenDict, _json_unstructure)


def _unstructure_header(header: EpochHeader) -> dict[str, Any]:
    """The canonical header (R8.2): empty system, tools and prefix are absent."""
    out: dict[str, Any] = {"config": converter.unstructure(header.config)}
    if header.system:
        out["system"] = header.system
    if header.tools:
        out["tools"] = converter.unstructure(header.tools)
    if header.message_prefix:
        out["message_prefix"] = converter.unstructure(header.message_prefix)
    return out


converter.register_unstructure_hook(EpochHeader, _unstructure_header)
converter.register_unstructure_hook(OpaqueBlock, lambda block: {**block.data, "type": block.kind})
converter.register_unstructure_hook(CustomEvent, lambda event: event.data)
for _finish in (*FINISH_SINGLETONS.values(),):
    converter.register_unstructure_hook(type(_finish), lambda reason: {"kind": reason.kind})
converter.register_unstructure_hook(
    Errored,
    lambda reason: (
        {"kind": "error", "message": reason.message}
        | ({"code": reason.code} if reason.code is not None else {})
    ),
)
converter.register_unstructure_hook(OtherFinish, lambda reason: {"kind": reason.name})
converter.register_unstructure_hook(
    Replace, lambda op: {"op": "replace", "start": op.start, "end": op.end}
)


def is_mapping(value: object) -> bool:
    # A parsed record is a dict: tested first, as the ABC check costs several times more.
    return type(value) is dict or isinstance(value, Mapping)


def _tagged(table: Mapping[str, type[Any]], what: str) -> Callable[[Any, Any], Any]:
    keys = {tag: _record_keys(cls) for tag, cls in table.items()}
    hooks: dict[str, Callable[[Any, Any], Any]] = {}  # looked up on first use, once all exist

    def structure(value: Any, _: Any) -> Any:
        if not is_mapping(value) or not isinstance(value.get("type"), str):
            raise ValueError(f"{what} must be an object with a string 'type'")
        tag = value["type"]
        cls = table.get(tag)
        if cls is None:
            if what == "content block":
                rest = {key: item for key, item in value.items() if key != "type"}
                # Frozen here, so that a refusal names the path inside the stored block.
                return OpaqueBlock(tag, freeze_json(rest))
            raise ValueError(f"unknown {what} type {shown_short(tag)}")
        if not keys[tag].issuperset(value):
            raise unknown_keys(value, keys[tag], cls)
        if cls is ToolResultBlock and deeper_than_json(value):
            # Refused before cattrs recurses into it, by the rule the event's constructor applies.
            raise too_deep("the block")
        hook = hooks.get(tag)
        if hook is None:
            hook = hooks[tag] = converter.get_structure_hook(cls)
        return hook(value, cls)

    return structure


_KIND_KEYS = frozenset({"kind"})
_ERRORED_KEYS = _KIND_KEYS | _record_keys(Errored)
_REPLACE_KEYS = frozenset({"op", "start", "end"})


def _structure_finish(value: Any, _: Any) -> FinishReason:
    kind = exact_str(value["kind"], None)
    if kind == "error":
        _refuse_unknown(value, _ERRORED_KEYS, Errored)
        return Errored(exact_str(value["message"], None), _optional_str(value.get("code")))
    reason = FINISH_SINGLETONS[kind] if kind in FINISH_SINGLETONS else OtherFinish(kind)
    _refuse_unknown(value, _KIND_KEYS, type(reason))
    return reason


def structure_surface(value: Any, _: Any) -> SurfaceOp:
    if value == "append":
        return "append"
    if isinstance(value, Mapping) and value.get("op") == "replace":
        _refuse_unknown(value, _REPLACE_KEYS, Replace)
        return Replace(exact_int(value["start"]), exact_int(value["end"]))
    raise ValueError(f"invalid surface op {value!r}")


converter.register_structure_hook(ContentBlock, _tagged(BLOCK_TYPES, "content block"))
_structure_chunk = _tagged(CHUNK_TYPES, "stream chunk")
converter.register_structure_hook(StreamChunk, _structure_chunk)
converter.register_structure_hook(FinishReason, _structure_finish)
converter.register_structure_hook(SurfaceOp, structure_surface)


class FieldError(Exception):
    """A refusal from inside one field of a record whose structure hook is hand-written.

    cattrs' generated hooks note the field each error came from; this carries
    it for the others, so that the refusal names the field's stored path.
    """

    def __init__(self, name: str, error: Exception) -> None:
        super().__init__(f"{error} @ {name}")
        self.name = name
        self.error = error


MALFORMED = (
    KeyError,
    TypeError,
    ValueError,
    RecursionError,
    cattrs.BaseValidationError,
    ForbiddenExtraKeysError,
    FieldError,
)
"""What a malformed record raises while it is rebuilt (a record nested past the
interpreter's recursion limit raises RecursionError before any field is read)."""


def _structure_tool_call_delta(value: Any, _: Any) -> ToolCallDelta:
    """A stored tool-call delta; a refusal names the field, as cattrs' hooks name theirs.

    Written by hand: its ``id`` is stored absent when it is ``None``, where the
    generated hook would require the key of a field without a default.
    """
    name = "index"
    try:
        index = exact_int(value["index"])
        name = "id"
        call_id = _optional_str(value.get("id"))
        name = "arguments_delta"
        arguments = exact_str(value["arguments_delta"], None)
        name = "name"
        tool = _optional_str(value.get("name"))
    except MALFORMED as exc:
        raise FieldError(name, exc) from exc
    return ToolCallDelta(index, call_id, arguments, tool)


converter.register_structure_hook(ToolCallDelta, _structure_tool_call_delta)
_ASSISTANT_CHUNK_KEYS = _record_keys(AssistantChunk)


def _structure_assistant_chunk(value: Any, _: Any) -> AssistantChunk:
    if isinstance(value, dict) and not _ASSISTANT_CHUNK_KEYS.issuperset(value):
        raise unknown_keys(value, _ASSISTANT_CHUNK_KEYS, AssistantChunk)
    turn, step, chunk = value["turn"], value["step"], value["chunk"]
    try:
        return AssistantChunk(exact_int(turn), exact_int(step), _structure_chunk(chunk, None))
    except MALFORMED as exc:
        # Which field failed is worked out on this rare path only: the first one that is wrong.
        name = "turn" if type(turn) is not int else "step" if type(step) is not int else "chunk"
        raise FieldError(name, exc) from exc


converter.register_structure_hook(AssistantChunk, _structure_assistant_chunk)
converter.register_structure_hook(JsonValue, lambda value, _: freeze_json(value))
converter.register_structure_hook(FrozenDict, lambda value, _: freeze_json(value))
