"""The one cattrs converter between session values and their JSON shape (SPEC 4.3, 11.4)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import homogenous_tuple_structure_factory
from cattrs.errors import ForbiddenExtraKeysError

from retinue._content import (
    ContentBlock,
    Message,
    MessageSource,
    OpaqueBlock,
)
from retinue._errors import CorruptSessionError, InvalidJsonError
from retinue._lossless import FrozenDict, JsonValue, freeze_json
from retinue._request import LlmCallConfig, ToolSchema
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

from ._chunkcheck import BLOCK_TYPES, CHUNK_TYPES, chunk_problem
from ._events import (
    AssistantChunk,
    CustomEvent,
    EpochHeader,
    Event,
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
from ._fastline import fast_line

__all__ = [
    "UNKNOWN_FIELD",
    "converter",
    "decode_event",
    "dump_event",
    "dump_header",
    "encode_event",
    "encode_header",
    "load_event",
    "load_header",
]

T = TypeVar("T")

# The built-in types, read off the EventData union so neither list can drift.
EVENT_TYPES: dict[str, type[Any]] = {
    cls.type: cls for cls in get_args(EventData) if cls is not CustomEvent
}
FINISH_SINGLETONS: dict[str, FinishReason] = {
    reason.kind: reason for reason in (STOP, TOOL_CALLS, MAX_TOKENS, ABORTED)
}

converter = cattrs.Converter()


def _exact_int(value: Any) -> int:
    """*value* if it is a JSON integer; a stored row is never coerced (``1.9`` is not ``1``)."""
    if type(value) is not int:
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _exact(kind: type[Any]) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        if type(value) is not kind:
            raise TypeError(f"expected {kind.__name__}, got {value!r}")
        return value

    return structure


def _number(value: Any, _: Any) -> float:
    # An integer stays one, so a stored ``1`` is written back as ``1``.
    if type(value) is not int and type(value) is not float:
        raise TypeError(f"expected a number, got {value!r}")
    return value


_exact_str = _exact(str)


def _optional_str(value: Any) -> str | None:
    return None if value is None else _exact_str(value, None)


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


def _unknown_keys(value: Mapping[str, Any], keys: frozenset[str], cls: type[Any]) -> Exception:
    return ForbiddenExtraKeysError("", cls, set(value) - keys)


def _refuse_unknown(value: Any, keys: frozenset[str], cls: type[Any]) -> None:
    # Written out inline where every loaded record passes, sparing a call per record.
    if isinstance(value, dict) and not keys.issuperset(value):
        raise _unknown_keys(value, keys, cls)


def _is_closed_record(cls: Any) -> bool:
    # A tagged record is checked by its union's hook. The header is read leniently:
    # its version must be checked before the rest of a newer format is judged (R4.3).
    return attrs.has(cls) and cls not in _TAGGED and cls is not SessionHeader


def _closed_record(cls: type[Any], conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """cattrs' own generated hook for *cls*, refusing a record with a key it has no field for."""
    structure_fields = conv.gen_structure_attrs_fromdict(cls)
    keys = _record_keys(cls)

    def structure(value: Any, type_: Any) -> Any:
        if isinstance(value, dict) and not keys.issuperset(value):
            raise _unknown_keys(value, keys, cls)
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


def _is_mapping(value: object) -> bool:
    # A parsed record is a dict: tested first, as the ABC check costs several times more.
    return type(value) is dict or isinstance(value, Mapping)


def _tagged(table: Mapping[str, type[Any]], what: str) -> Callable[[Any, Any], Any]:
    keys = {tag: _record_keys(cls) for tag, cls in table.items()}
    hooks: dict[str, Callable[[Any, Any], Any]] = {}  # looked up on first use, once all exist

    def structure(value: Any, _: Any) -> Any:
        if not _is_mapping(value) or not isinstance(value.get("type"), str):
            raise ValueError(f"{what} must be an object with a string 'type'")
        tag = value["type"]
        cls = table.get(tag)
        if cls is None:
            if what == "content block":
                rest = {key: item for key, item in value.items() if key != "type"}
                return OpaqueBlock(tag, rest)
            raise ValueError(f"unknown {what} type {tag!r}")
        if not keys[tag].issuperset(value):
            raise _unknown_keys(value, keys[tag], cls)
        hook = hooks.get(tag)
        if hook is None:
            hook = hooks[tag] = converter.get_structure_hook(cls)
        return hook(value, cls)

    return structure


_KIND_KEYS = frozenset({"kind"})
_ERRORED_KEYS = _KIND_KEYS | _record_keys(Errored)
_REPLACE_KEYS = frozenset({"op", "start", "end"})


def _structure_finish(value: Any, _: Any) -> FinishReason:
    kind = _exact_str(value["kind"], None)
    if kind == "error":
        _refuse_unknown(value, _ERRORED_KEYS, Errored)
        return Errored(_exact_str(value["message"], None), _optional_str(value.get("code")))
    reason = FINISH_SINGLETONS[kind] if kind in FINISH_SINGLETONS else OtherFinish(kind)
    _refuse_unknown(value, _KIND_KEYS, type(reason))
    return reason


def _structure_surface(value: Any, _: Any) -> SurfaceOp:
    if value == "append":
        return "append"
    if isinstance(value, Mapping) and value.get("op") == "replace":
        _refuse_unknown(value, _REPLACE_KEYS, Replace)
        return Replace(_exact_int(value["start"]), _exact_int(value["end"]))
    raise ValueError(f"invalid surface op {value!r}")


converter.register_structure_hook(ContentBlock, _tagged(BLOCK_TYPES, "content block"))
_structure_chunk = _tagged(CHUNK_TYPES, "stream chunk")
converter.register_structure_hook(StreamChunk, _structure_chunk)
converter.register_structure_hook(FinishReason, _structure_finish)
converter.register_structure_hook(SurfaceOp, _structure_surface)
converter.register_structure_hook(
    ToolCallDelta,
    lambda value, _: ToolCallDelta(
        _exact_int(value["index"]),
        _optional_str(value.get("id")),
        _exact_str(value["arguments_delta"], None),
        _optional_str(value.get("name")),
    ),
)
_ASSISTANT_CHUNK_KEYS = _record_keys(AssistantChunk)


def _structure_assistant_chunk(value: Any, _: Any) -> AssistantChunk:
    if isinstance(value, dict) and not _ASSISTANT_CHUNK_KEYS.issuperset(value):
        raise _unknown_keys(value, _ASSISTANT_CHUNK_KEYS, AssistantChunk)
    return AssistantChunk(
        _exact_int(value["turn"]), _exact_int(value["step"]), _structure_chunk(value["chunk"], None)
    )


converter.register_structure_hook(AssistantChunk, _structure_assistant_chunk)
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


# What a malformed record raises while it is rebuilt; a record nested past the
# interpreter's recursion limit raises RecursionError before any field is read.
_MALFORMED = (
    KeyError,
    TypeError,
    ValueError,
    RecursionError,
    cattrs.BaseValidationError,
    ForbiddenExtraKeysError,
)
_ENVELOPE_KEYS = frozenset({"seq", "type", "time", "data", "source_event_seqs", "surface_op"})
UNKNOWN_FIELD = "UNKNOWN_FIELD"
"""The code of a stored event refused for a key no field holds: a whole record, never a torn one."""


def load_event(raw: Mapping[str, Any], *, session_id: str = "?") -> Event:
    """Rebuild an event from its JSON envelope; raises :class:`CorruptSessionError`.

    A key that no field of the event holds is refused (code ``UNKNOWN_FIELD``),
    not dropped; an unknown event type keeps its whole ``data``.
    """
    if not _is_mapping(raw):
        raise CorruptSessionError(f"session {session_id!r}: an event is not a JSON object")
    return _load_record(raw, session_id)


def _load_record(raw: Mapping[str, Any], session_id: str) -> Event:
    at = "$"  # the envelope field being read, named when it is refused
    try:
        if not _ENVELOPE_KEYS.issuperset(raw):
            raise _unknown_keys(raw, _ENVELOPE_KEYS, Event)
        at = "$.type"
        kind = _exact_str(raw["type"], None)
        cls = EVENT_TYPES.get(kind)
        at = "$.data"
        data: EventData
        if cls is None:
            data = CustomEvent(kind, raw.get("data", {}))
        else:
            fields = raw["data"]
            if type(fields) is not dict:
                raise TypeError(f"expected an object, got {fields!r:.80}")
            data = converter.structure(fields, cls)
        at = "$.seq"
        seq = _exact_int(raw["seq"])
        at = "$.time"
        time = _exact_int(raw["time"])
        at = "$.source_event_seqs"
        sources = raw.get("source_event_seqs")
        if sources is not None:
            sources = _structure_sources(sources)
        at = "$.surface_op"
        surface = raw.get("surface_op")
        if surface is not None:
            surface = _structure_surface(surface, None)
        # Positional: a named tuple built from keywords takes twice as long.
        return Event(seq, time, data, sources, surface)
    except _MALFORMED as exc:
        where = raw.get("seq", "?")
        raise CorruptSessionError(
            f"session {session_id!r}: event seq {where} is malformed: {_problem(exc, at)}",
            code=UNKNOWN_FIELD if _names_unknown_field(exc) else None,
        ) from exc


def _structure_sources(value: Any) -> tuple[int, ...]:
    if type(value) is not list:
        raise TypeError(f"expected a list of integers, got {value!r:.80}")
    return tuple([_exact_int(seq) for seq in value])


def _names_unknown_field(exc: Exception) -> bool:
    if isinstance(exc, ExceptionGroup):
        return exc.subgroup(ForbiddenExtraKeysError) is not None
    return isinstance(exc, ForbiddenExtraKeysError)


# Where a record whose hook is not cattrs' generated one sits (no path notes reach it).
_RECORD_PATHS: dict[type[Any], str] = {
    Event: "$",
    Replace: "$.surface_op",
    **dict.fromkeys(CHUNK_TYPES.values(), "$.data.chunk"),
}


def _problem(exc: Exception, at: str) -> str:
    """What is wrong, naming the field (``... @ $.data.turn``).

    cattrs knows the path inside ``data``; *at* is the envelope field that was
    being read, for an error raised outside cattrs' generated hooks.
    """
    if isinstance(exc, ForbiddenExtraKeysError):
        return "; ".join(cattrs.transform_error(exc, path=_RECORD_PATHS.get(exc.cl, "$.data")))
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(exc, path="$.data"))
    if isinstance(exc, RecursionError):
        return f"it is nested too deeply @ {at}"
    if isinstance(exc, KeyError):
        return f"required field {exc.args[0]!r} missing @ {at}"
    return f"{exc} @ {at}"


def dump_header(header: SessionHeader) -> dict[str, Any]:
    """Return the session header line (R11.13) as a JSON-ready dict."""
    out: dict[str, Any] = {"type": "session"}
    out.update(converter.unstructure(header))
    return out


def load_header(raw: Mapping[str, Any]) -> SessionHeader:
    """Rebuild a session header; raises :class:`CorruptSessionError`."""
    if not isinstance(raw, Mapping):
        raise CorruptSessionError("session header is not a JSON object")
    try:
        fields = {key: value for key, value in raw.items() if key != "type"}
        return converter.structure(fields, SessionHeader)
    except _MALFORMED as exc:
        raise CorruptSessionError(f"session header is malformed: {exc}") from exc


def _strict_encoder(*, ascii_only: bool) -> Callable[[dict[str, Any]], str]:
    """A compact encoder that refuses ``NaN`` and infinities: a stored line is strict JSON."""
    encode = json.JSONEncoder(
        ensure_ascii=ascii_only, separators=(",", ":"), allow_nan=False
    ).encode

    def strict(value: dict[str, Any]) -> str:
        try:
            return encode(value)
        except ValueError as exc:  # a non-finite float that slipped past validation
            raise InvalidJsonError(f"{value.get('type')} is not JSON: {exc}") from exc

    return strict


_compact = _strict_encoder(ascii_only=False)
_compact_ascii = _strict_encoder(ascii_only=True)


def encode_event(event: Event) -> str:
    """Return the canonical one-line JSON text of *event* (the JSONL line, no newline).

    The text is compact ``json`` of :func:`dump_event` (non-ASCII kept as is),
    produced by a fast path for the common event types. It is always valid
    UTF-8: text with lone surrogates falls back to ``\\u`` escapes.
    """
    line = fast_line(event)
    if line is None:
        if type(event.data) is AssistantChunk:
            _refuse_malformed_chunk(event)
        line = _compact(dump_event(event))
    if not line.isascii():
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            line = _compact_ascii(dump_event(event))
    return line


def _refuse_malformed_chunk(event: Event) -> None:
    """Refuse a chunk that would be written as a line the loader refuses (or as no JSON).

    Checked here, off the common path: :func:`fast_line` writes only exact values
    and leaves every other chunk to this path, and ``Session.append_chunk`` (run
    per stream chunk) stays free of checks. The loop refuses such a chunk before
    logging it; this catches one appended directly.
    """
    turn, step, chunk = event.data  # type: ignore[misc]
    if type(turn) is not int or type(step) is not int:
        problem: str | None = f"turn and step must be integers, got {turn!r} and {step!r}"
    else:
        problem = chunk_problem(chunk)
    if problem is not None:
        raise InvalidJsonError(f"assistant/chunk event seq {event.seq} is not storable: {problem}")


def encode_header(header: SessionHeader) -> str:
    """Return the canonical one-line JSON text of a session header (R11.13)."""
    return _compact_ascii(dump_header(header))


def decode_event(line: str | bytes, *, session_id: str = "?") -> Event:
    """Parse one canonical event line; raises :class:`CorruptSessionError`."""
    try:
        # Strictly UTF-8, as written: json.loads would guess at bytes (UTF-16, surrogates).
        raw = json.loads(line.decode() if isinstance(line, bytes) else line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptSessionError(
            f"session {session_id!r}: an event line is not valid UTF-8 JSON: {exc}"
        ) from exc
    except RecursionError as exc:
        raise CorruptSessionError(
            f"session {session_id!r}: an event line is nested too deeply to load"
        ) from exc
    if not isinstance(raw, dict):
        raise CorruptSessionError(f"session {session_id!r}: an event line is not a JSON object")
    return _load_record(raw, session_id)
