"""Session events to and from their stored JSON lines (SPEC 4.3, 11.4, 11.13).

The entry points over the one converter (``_converter``): dump and load a
record, encode and decode its canonical line, and name what a refusal found.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any, get_args

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.v import format_exception

from retinue._errors import CorruptSessionError, InvalidJsonError, SessionError
from retinue._lossless import shown, shown_short, thaw_json

from ._chunkcheck import chunk_event_problem
from ._converter import (
    EVENT_TYPES,
    MALFORMED,
    FieldError,
    converter,
    exact_int,
    exact_str,
    is_mapping,
    structure_surface,
    unknown_keys,
)
from ._events import (
    FORMAT_VERSION,
    AssistantChunk,
    CustomEvent,
    Event,
    EventData,
    SessionHeader,
    check_custom_type,
)
from ._fastline import fast_line

__all__ = [
    "INTEGER_TOO_LONG",
    "UNKNOWN_FIELD",
    "LongIntError",
    "converter",
    "decode_event",
    "dump_event",
    "dump_header",
    "encode_event",
    "encode_header",
    "load_event",
    "load_header",
    "loads_line",
]


def dump_event(event: Event) -> dict[str, Any]:
    """Return the JSON-ready envelope of one event: plain dicts, lists and scalars.

    Equal to its stored line parsed back, and the caller's to change: the
    event's frozen JSON payloads (plugin data, meta, schemas) are copied thawed.

    Raises:
        TypeError: *event* is not an :class:`Event` holding event data.
        InvalidJsonError: the event is an ``assistant/chunk`` whose line the
            loader would refuse (every other event refuses such values when built).
    """
    given: object = event  # a caller without a type checker may pass anything
    if type(given) is not Event or type(event.data) not in _EVENT_DATA:
        raise TypeError(f"dump_event takes an Event of event data, got {shown(given)}")
    envelope: dict[str, Any] = thaw_json(_envelope(event))  # type: ignore[assignment]
    return envelope


_EVENT_DATA = frozenset(get_args(EventData))


def _envelope(event: Event) -> dict[str, Any]:
    """The envelope of *event* for the encoder, which writes frozen values as they are."""
    if type(event.data) is AssistantChunk:
        _refuse_malformed_chunk(event)
    data = converter.unstructure(event.data)
    if not isinstance(event.data, CustomEvent):
        data.pop("type", None)
    out: dict[str, Any] = {"seq": event.seq, "type": event.type, "time": event.time, "data": data}
    if event.source_event_seqs is not None:
        out["source_event_seqs"] = list(event.source_event_seqs)
    if event.surface_op is not None:
        out["surface_op"] = converter.unstructure(event.surface_op)
    return out


_ENVELOPE_KEYS = frozenset({"seq", "type", "time", "data", "source_event_seqs", "surface_op"})
UNKNOWN_FIELD = "UNKNOWN_FIELD"
"""The code of a stored event refused for a key no field holds: a whole record, never a torn one."""

INTEGER_TOO_LONG = "INTEGER_TOO_LONG"
"""The code of a stored line that is whole JSON but holds an integer of more digits than
this process reads (``sys.set_int_max_str_digits``): a whole record, never a torn one."""


def load_event(raw: Mapping[str, Any], *, session_id: str = "?") -> Event:
    """Rebuild an event from its JSON envelope; raises :class:`CorruptSessionError`.

    A key that no field of the event holds is refused (code ``UNKNOWN_FIELD``),
    not dropped; an unknown event type keeps its whole ``data``.
    """
    if not is_mapping(raw):
        raise CorruptSessionError(f"session {session_id!r}: an event is not a JSON object")
    return _load_record(raw, session_id)


def _load_record(raw: Mapping[str, Any], session_id: str) -> Event:
    at = "$"  # the envelope field being read, named when it is refused
    try:
        if not _ENVELOPE_KEYS.issuperset(raw):
            raise unknown_keys(raw, _ENVELOPE_KEYS, Event)
        at = "$.type"
        kind = exact_str(raw["type"], None)
        cls = EVENT_TYPES.get(kind)
        if cls is None:
            # Refused as the type it is, before its data is read as a plugin's.
            check_custom_type(kind)
        at = "$.data"
        data: EventData
        if cls is None:
            # Every event is stored with its data, a plugin's ``null`` included:
            # one without is refused, not loaded as data it never held.
            data = CustomEvent(kind, raw["data"])
        else:
            fields = raw["data"]
            if type(fields) is not dict:
                raise TypeError(f"expected an object, got {fields!r:.80}")
            data = converter.structure(fields, cls)
        at = "$.seq"
        seq = exact_int(raw["seq"])
        at = "$.time"
        time = exact_int(raw["time"])
        at = "$.source_event_seqs"
        sources = raw.get("source_event_seqs")
        if sources is not None:
            sources = _structure_sources(sources)
        at = "$.surface_op"
        surface = raw.get("surface_op")
        if surface is not None:
            surface = structure_surface(surface, None)
        # Positional: a named tuple built from keywords takes twice as long.
        return Event(seq, time, data, sources, surface)
    except MALFORMED as exc:
        # Cut short: a seq may be any value, a long string or an integer too long to show.
        where = shown_short(raw["seq"]) if "seq" in raw else "?"
        raise CorruptSessionError(
            f"session {session_id!r}: event seq {where} is malformed: {_problem(exc, at)}",
            code=UNKNOWN_FIELD if _names_unknown_field(exc) else None,
        ) from exc


def _structure_sources(value: Any) -> tuple[int, ...]:
    if type(value) is not list:
        raise TypeError(f"expected a list of integers, got {value!r:.80}")
    return tuple([exact_int(seq) for seq in value])


def _names_unknown_field(exc: Exception) -> bool:
    while isinstance(exc, FieldError):
        exc = exc.error
    if isinstance(exc, ExceptionGroup):
        return exc.subgroup(ForbiddenExtraKeysError) is not None
    return isinstance(exc, ForbiddenExtraKeysError)


def _problem(exc: Exception, at: str) -> str:
    """What is wrong, naming the field (``... @ $.data.turn``).

    *at* is the field that was being read; cattrs knows the path inside it, and
    a hand-written hook the field of its record the error came from.
    """
    if isinstance(exc, FieldError):
        return _problem(exc.error, f"{at}.{exc.name}")
    if isinstance(exc, ForbiddenExtraKeysError):
        return "; ".join(map(_cut, cattrs.transform_error(exc, path=at)))
    if isinstance(exc, cattrs.BaseValidationError):
        found = cattrs.transform_error(exc, path=at, format_exception=_reason)
        return "; ".join(map(_cut, found))
    if isinstance(exc, RecursionError):
        return f"it is nested too deeply @ {at}"
    if isinstance(exc, KeyError):
        return f"required field {shown_short(exc.args[0])} missing @ {at}"
    return _cut(f"{exc} @ {at}")


_LONGEST_PROBLEM = 300


def _cut(problem: str) -> str:
    """*problem* cut short before the field it names, if a value it shows (a stored key, a
    type tag, a literal) made it longer than a one-line refusal should be."""
    if len(problem) <= _LONGEST_PROBLEM:
        return problem
    what, at, field = problem.rpartition(" @ ")
    if not at:
        what, field = problem, ""
    return f"{what[:160]}... ({len(what)} characters){at}{field}"


def _reason(exc: BaseException, type_: Any) -> str:
    """What cattrs found wrong at one path; a refusal of retinue's own says why (a depth, a number)."""
    if isinstance(exc, (InvalidJsonError, SessionError)):
        return str(exc)
    return format_exception(exc, type_)


def dump_header(header: SessionHeader) -> dict[str, Any]:
    """Return the session header line (R11.13) as a JSON-ready dict."""
    out: dict[str, Any] = {"type": "session"}
    out.update(converter.unstructure(header))
    return out


_HEADER_KEYS = frozenset({"type", *(field.name for field in attrs.fields(SessionHeader))})


def load_header(raw: Mapping[str, Any]) -> SessionHeader:
    """Rebuild a session header; raises :class:`CorruptSessionError`.

    A header of this format version with a key no field holds is refused (code
    ``UNKNOWN_FIELD``), as an event record is; one of another version is read
    leniently, so that its version can be refused as such (R4.3).
    """
    if not isinstance(raw, Mapping):
        raise CorruptSessionError("session header is not a JSON object")
    try:
        fields = {key: value for key, value in raw.items() if key != "type"}
        header = converter.structure(fields, SessionHeader)
    except MALFORMED as exc:
        raise CorruptSessionError(f"session header is malformed: {_problem(exc, '$')}") from exc
    if "version" not in raw:
        # Every header is written with its format version (R11.13); the field's
        # default would read one without it as this version, whatever wrote it.
        raise CorruptSessionError("session header is malformed: $.version is missing")
    if header.version == FORMAT_VERSION and not _HEADER_KEYS.issuperset(raw):
        problem = _problem(unknown_keys(raw, _HEADER_KEYS, SessionHeader), "$")
        raise CorruptSessionError(f"session header is malformed: {problem}", code=UNKNOWN_FIELD)
    return header


class _LongInt:
    """Stands in, while a line is parsed again, for an integer too long to read."""


_LONG_INT = _LongInt()


def _int_or_marker(digits: str) -> int | _LongInt:
    try:
        return int(digits)
    except ValueError:
        return _LONG_INT


class LongIntError(Exception):
    """A stored line that is JSON but holds an integer too long to read, at ``path``.

    ``parsed`` is the line's value, each such integer a marker in it.
    """

    def __init__(self, parsed: Any, path: str) -> None:
        super().__init__(f"an integer of more than {sys.get_int_max_str_digits()} digits @ {path}")
        self.parsed = parsed


def _long_int_error(text: str) -> LongIntError:
    """The refusal of JSON *text* whose parse ``int()`` refused, naming the integer's path.

    Parsed again, on this rare path only, with the integer marked: the first
    parse stopped at it, so the rest of the text may still be torn or too deep.

    Raises:
        json.JSONDecodeError: the text is not JSON after all.
        RecursionError: it nests too deeply to parse.
    """
    parsed = json.loads(text, parse_int=_int_or_marker)
    return LongIntError(parsed, _path_to_long_int(parsed))


def loads_line(line: str | bytes) -> Any:
    """Parse one stored JSON line, strictly UTF-8 as it was written.

    Raises:
        UnicodeDecodeError: the bytes are not UTF-8 (json.loads would guess at them).
        json.JSONDecodeError: the line is not JSON.
        RecursionError: it nests too deeply to parse.
        LongIntError: it holds an integer too long to read, which the error names.
    """
    text = line.decode() if isinstance(line, bytes) else line
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        # The one other ValueError a decode raises: int() refusing a long digit string.
        raise _long_int_error(text) from exc


def _path_to_long_int(raw: Any) -> str:
    """The path of the first marked integer in *raw*, in document order (a loop: any depth)."""
    pending: list[tuple[Any, str]] = [(raw, "$")]
    while pending:
        value, path = pending.pop()
        if value is _LONG_INT:
            return path
        if type(value) is dict:
            items = [(item, f"{path}.{key}") for key, item in value.items()]
        elif type(value) is list:
            items = [(item, f"{path}[{index}]") for index, item in enumerate(value)]
        else:
            continue
        pending.extend(reversed(items))
    return "$"


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
        line = _compact(_envelope(event))
    if not line.isascii():
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            line = _compact_ascii(_envelope(event))
    return line


def _refuse_malformed_chunk(event: Event) -> None:
    """Refuse a chunk that would be written as a line the loader refuses (or as no JSON).

    Checked here, off the common path: :func:`fast_line` writes only exact values
    and leaves every other chunk to :func:`dump_event`, and ``Session.append_chunk``
    (run per stream chunk) stays free of checks. The loop refuses such a chunk
    before logging it, and ``Session.append`` does; this catches one another
    caller gave ``append_chunk``, before a block nested too deeply overflows the
    stack in cattrs.
    """
    problem = chunk_event_problem(*event.data)  # type: ignore[misc]
    if problem is not None:
        raise InvalidJsonError(f"assistant/chunk event seq {event.seq} is not storable: {problem}")


def encode_header(header: SessionHeader) -> str:
    """Return the canonical one-line JSON text of a session header (R11.13)."""
    return _compact_ascii(dump_header(header))


def decode_event(line: str | bytes, *, session_id: str = "?") -> Event:
    """Parse one canonical event line; raises :class:`CorruptSessionError`."""
    try:
        raw = loads_line(line)
    except LongIntError as found:
        seq = found.parsed.get("seq") if isinstance(found.parsed, dict) else None
        raise CorruptSessionError(
            f"session {session_id!r}: event seq {seq if type(seq) is int else '?'} "
            f"is malformed: {found}",
            code=INTEGER_TOO_LONG,
        ) from found
    except ValueError as exc:  # not UTF-8, or not JSON
        raise _not_json(exc, session_id) from exc
    except RecursionError as exc:
        raise _too_deep_line(session_id) from exc
    if not isinstance(raw, dict):
        raise CorruptSessionError(f"session {session_id!r}: an event line is not a JSON object")
    return _load_record(raw, session_id)


def _not_json(exc: ValueError, session_id: str) -> CorruptSessionError:
    return CorruptSessionError(
        f"session {session_id!r}: an event line is not valid UTF-8 JSON: {exc}"
    )


def _too_deep_line(session_id: str) -> CorruptSessionError:
    return CorruptSessionError(
        f"session {session_id!r}: an event line is nested too deeply to load"
    )
