"""The one cattrs converter between session values and their JSON shape (SPEC 4.3, 11.4)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs
import cattrs

from .._content import (
    ContentBlock,
    Message,
    MessageSource,
    OpaqueBlock,
    Reasoning,
    RedactedReasoning,
    Text,
    ToolCall,
    ToolResultBlock,
)
from .._errors import CorruptSessionError
from .._lossless import FrozenDict, JsonValue, freeze_json
from .._request import LlmCallConfig, ToolSchema
from .._stream import (
    ABORTED,
    MAX_TOKENS,
    STOP,
    TOOL_CALLS,
    BlockEnd,
    BlockStart,
    Errored,
    Finish,
    FinishReason,
    OtherFinish,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from ._events import (
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
    SessionHeader,
    SteeringMessage,
    StepEnd,
    StepStart,
    SurfaceOp,
    SystemEdit,
    ToolCallEvent,
    ToolErrorInfo,
    ToolsDelta,
    TurnEndReason,
    TurnTrigger,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessage,
)

__all__ = ["converter", "dump_event", "dump_header", "load_event", "load_header"]

T = TypeVar("T")

BLOCK_TYPES: dict[str, type[Any]] = {
    cls.type: cls for cls in (Text, Reasoning, RedactedReasoning, ToolCall, ToolResultBlock)
}
CHUNK_TYPES: dict[str, type[Any]] = {
    cls.type: cls
    for cls in (BlockStart, TextDelta, ReasoningDelta, ToolCallDelta, BlockEnd, UsageChunk, Finish)
}
EVENT_TYPES: dict[str, type[Any]] = {
    cls.type: cls
    for cls in (
        TurnStart,
        TurnEnd,
        StepStart,
        StepEnd,
        UserMessage,
        PromptBlocked,
        ContextMessage,
        SteeringMessage,
        AssistantChunk,
        AssistantMessage,
        ToolCallEvent,
        ToolResultEvent,
        RequestHeader,
        RequestHeaderDelta,
    )
}
FINISH_SINGLETONS: dict[str, FinishReason] = {
    reason.kind: reason for reason in (STOP, TOOL_CALLS, MAX_TOKENS, ABORTED)
}

converter = cattrs.Converter()


def _plain_unstructure(cls: type[Any]) -> Callable[[Any], dict[str, Any]]:
    """Unstructure an attrs value to a dict: its tag first, ``None`` fields omitted."""
    names = [field.name for field in attrs.fields(cls)]
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
converter.register_unstructure_hook(
    OpaqueBlock, lambda block: {**block.data, "type": block.kind}
)
converter.register_unstructure_hook(
    CustomEvent, lambda event: event.data
)
for _finish in (*FINISH_SINGLETONS.values(),):
    converter.register_unstructure_hook(type(_finish), lambda reason: {"kind": reason.kind})
converter.register_unstructure_hook(
    Errored,
    lambda reason: {"kind": "error", "message": reason.message}
    | ({"code": reason.code} if reason.code is not None else {}),
)
converter.register_unstructure_hook(OtherFinish, lambda reason: {"kind": reason.name})
converter.register_unstructure_hook(
    Replace, lambda op: {"op": "replace", "start": op.start, "end": op.end}
)


def _tagged(table: Mapping[str, type[Any]], what: str) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, Mapping) or not isinstance(value.get("type"), str):
            raise ValueError(f"{what} must be an object with a string 'type'")
        cls = table.get(value["type"])
        if cls is None:
            if what == "content block":
                rest = {key: item for key, item in value.items() if key != "type"}
                return OpaqueBlock(value["type"], rest)
            raise ValueError(f"unknown {what} type {value['type']!r}")
        return converter.structure(value, cls)

    return structure


def _structure_finish(value: Any, _: Any) -> FinishReason:
    kind = value["kind"]
    if kind in FINISH_SINGLETONS:
        return FINISH_SINGLETONS[kind]
    if kind == "error":
        return Errored(value["message"], value.get("code"))
    return OtherFinish(str(kind))


def _structure_surface(value: Any, _: Any) -> SurfaceOp:
    if value == "append":
        return "append"
    if isinstance(value, Mapping) and value.get("op") == "replace":
        return Replace(int(value["start"]), int(value["end"]))
    raise ValueError(f"invalid surface op {value!r}")


converter.register_structure_hook(ContentBlock, _tagged(BLOCK_TYPES, "content block"))
converter.register_structure_hook(StreamChunk, _tagged(CHUNK_TYPES, "stream chunk"))
converter.register_structure_hook(FinishReason, _structure_finish)
converter.register_structure_hook(SurfaceOp, _structure_surface)
converter.register_structure_hook(JsonValue, lambda value, _: freeze_json(value))
converter.register_structure_hook(FrozenDict, lambda value, _: freeze_json(value))


def dump_event(event: Event) -> dict[str, Any]:
    """Return the JSON-ready envelope of one event."""
    data = converter.unstructure(event.data)
    if not isinstance(event.data, CustomEvent):
        data.pop("type", None)
    out: dict[str, Any] = {"seq": event.seq, "type": event.type, "time": event.time, "data": data}
    if event.source_event_seqs is not None:
        out["source_event_seqs"] = list(event.source_event_seqs)
    if event.surface_op is not None:
        out["surface_op"] = converter.unstructure(event.surface_op)
    return out


def load_event(raw: Mapping[str, Any], *, session_id: str = "?") -> Event:
    """Rebuild an event from its JSON envelope; raises :class:`CorruptSessionError`."""
    try:
        kind = raw["type"]
        cls = EVENT_TYPES.get(kind)
        data: EventData
        if cls is None:
            data = CustomEvent(str(kind), raw.get("data", {}))
        else:
            data = converter.structure(raw["data"], cls)
        sources = raw.get("source_event_seqs")
        surface = raw.get("surface_op")
        return Event(
            seq=int(raw["seq"]),
            time=int(raw["time"]),
            data=data,
            source_event_seqs=None if sources is None else tuple(int(s) for s in sources),
            surface_op=None if surface is None else _structure_surface(surface, None),
        )
    except (KeyError, TypeError, ValueError, cattrs.BaseValidationError) as exc:
        where = raw.get("seq", "?") if isinstance(raw, Mapping) else "?"
        raise CorruptSessionError(
            f"session {session_id!r}: event seq {where} is malformed: {exc}"
        ) from exc


def dump_header(header: SessionHeader) -> dict[str, Any]:
    """Return the session header line (R11.13) as a JSON-ready dict."""
    out: dict[str, Any] = {"type": "session"}
    out.update(converter.unstructure(header))
    return out


def load_header(raw: Mapping[str, Any]) -> SessionHeader:
    """Rebuild a session header; raises :class:`CorruptSessionError`."""
    try:
        fields = {key: value for key, value in raw.items() if key != "type"}
        return converter.structure(fields, SessionHeader)
    except (KeyError, TypeError, ValueError, cattrs.BaseValidationError) as exc:
        raise CorruptSessionError(f"session header is malformed: {exc}") from exc
