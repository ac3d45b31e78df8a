"""The session event catalogue (SPEC 4.3): one frozen class per event type.

The turn's events live in ``_turn_events`` and the request-header events in
``_header_events``; this module gathers them into the event union, with the
envelope, plugin events, surface ops and the stored header line.
"""

from __future__ import annotations

import ntpath
import posixpath
from typing import Any, Literal, NamedTuple, TypeAlias, final, get_args

import attrs

from retinue._content import whole
from retinue._errors import InvalidJsonError, SessionError
from retinue._lossless import FrozenDict, JsonValue, freeze_json, shown, writable_int

from ._fields import integer
from ._header_events import (
    EpochHeader,
    HeaderReason,
    RequestHeader,
    RequestHeaderDelta,
    SystemEdit,
    ToolsDelta,
)
from ._turn_events import (
    AssistantChunk,
    AssistantMessage,
    ContextMessage,
    PromptBlocked,
    SteeringMessage,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolErrorInfo,
    ToolResultEvent,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)

__all__ = [
    "RESERVED_TYPES",
    "SURFACE_TYPES",
    "AssistantChunk",
    "AssistantMessage",
    "ContextMessage",
    "CustomEvent",
    "EpochHeader",
    "Event",
    "EventData",
    "HeaderReason",
    "PromptBlocked",
    "Replace",
    "RequestHeader",
    "RequestHeaderDelta",
    "SessionHeader",
    "SteeringMessage",
    "StepEnd",
    "StepStart",
    "SurfaceOp",
    "SystemEdit",
    "ToolCallEvent",
    "ToolErrorInfo",
    "ToolResultEvent",
    "ToolsDelta",
    "TurnEnd",
    "TurnEndReason",
    "TurnStart",
    "TurnTrigger",
    "UserMessage",
    "check_custom_type",
]

FORMAT_VERSION = 0
"""The version of the stored format, which every session header records."""


def _frozen_data(value: object, event: Any) -> JsonValue:
    """*value* frozen, a refusal naming the event's type (set first), then the path inside
    ``data`` (``plugin/probe event: data.stats[1] ...``): a plugin logs several types."""
    # The type first: its refusal, not the data's, for a record wrong in both, and a
    # data refusal then names a type that can be one.
    check_custom_type(event.type)
    try:
        return freeze_json(value, "data")
    except InvalidJsonError as exc:
        raise InvalidJsonError(f"{event.type} event: {exc}") from exc


def _data_field() -> JsonValue:
    # Made here: attrs' mypy plugin reads no Converter written in the class body.
    field: JsonValue = attrs.field(
        factory=FrozenDict, converter=attrs.Converter(_frozen_data, takes_self=True)
    )
    return field


@final
@attrs.frozen
class CustomEvent:
    """An event type retinue does not model (plugins, newer versions); kept verbatim.

    Its type may not be empty nor the name of a built-in event type (or of the
    stored header line, ``session``): loaded back, such a record would be read
    as that type, not as this event. Data that is no lossless JSON is refused with
    ``InvalidJsonError`` naming the type first (``plugin/probe event: data.stats[1] ...``).
    """

    # Checked by the data's converter, which attrs runs on a default too: first, so a
    # record wrong in both is refused for its type.
    type: str = attrs.field(converter=whole)
    data: JsonValue = _data_field()


def check_custom_type(value: object) -> None:
    """Refuse *value* as a :class:`CustomEvent` type: no str, empty, or a reserved name."""
    if not isinstance(value, str):
        raise ValueError(f"{shown(value)} cannot be a custom event type: it is no str")
    if not value or value in RESERVED_TYPES:
        raise ValueError(f"{shown(value)} cannot be a custom event type (empty or reserved)")


EventData: TypeAlias = (
    TurnStart
    | TurnEnd
    | StepStart
    | StepEnd
    | UserMessage
    | PromptBlocked
    | ContextMessage
    | SteeringMessage
    | AssistantChunk
    | AssistantMessage
    | ToolCallEvent
    | ToolResultEvent
    | RequestHeader
    | RequestHeaderDelta
    | CustomEvent
)
"""What an event records: one class per built-in event type, or a plugin's :class:`CustomEvent`."""

RESERVED_TYPES = frozenset(
    {"session", *(kind.type for kind in get_args(EventData) if kind is not CustomEvent)}
)
"""Names no :class:`CustomEvent` may take: the built-in event types and the header line's."""

SURFACE_TYPES = frozenset(
    {"user/message", "assistant/message", "tool/result", "context/message", "steering/message"}
)
"""The event types that can change the model-visible history (each carries a surface op)."""


@final
@attrs.frozen
class Replace:
    """Surface op: replace the surface nodes from ``start`` through ``end`` with this event."""

    start: int = attrs.field(validator=integer)
    end: int = attrs.field(validator=integer)


SurfaceOp: TypeAlias = Literal["append"] | Replace
"""How an event changes the model-visible history: appended, or replacing earlier messages."""


@final
class Event(NamedTuple):
    """One logged event: ``seq`` equals its index in the log, ``time`` is epoch ms.

    An immutable record like every value here, but a named tuple rather than
    an attrs class: a session creates one per stream chunk, and a tuple is
    built in a third of the time of a frozen attrs instance. Copy with
    changes through ``event._replace(...)``.
    """

    seq: int
    time: int
    data: EventData
    source_event_seqs: tuple[int, ...] | None = None
    surface_op: SurfaceOp | None = None

    @property
    def type(self) -> str:
        """The wire type tag, e.g. ``"turn/start"``."""
        return self.data.type


def _stored_as(kind: type[Any], *, optional: bool = False) -> Any:
    """An attrs validator: the field holds what the stored header line loads back as.

    ``load_header`` reads each field as its exact type, so a bool or float
    where an integer belongs, or bytes or a path where a string does, would be
    written as a line no store loads again, or fail every write.
    """
    expected = ("an integer JSON can write" if kind is int else "a str") + (
        " or None" if optional else ""
    )

    def check(_header: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if optional and value is None:
            return
        if type(value) is not kind or (kind is int and not writable_int(value)):  # type: ignore[arg-type]
            raise SessionError(
                f"session header {attribute.name} must be {expected}, got {shown(value)}",
                code="INVALID_HEADER",
            )

    return check


def _plain_text(value: object) -> object:
    """A str subclass as the plain str of its text, which the stored line loads back;
    anything else as it is, for the validator to refuse. A pair is kept as given: a
    session is named by its id as its caller wrote it."""
    return str.__str__(value) if type(value) is not str and isinstance(value, str) else value


def _absolute(_header: object, _attribute: object, cwd: str | None) -> None:
    # R4.3: a relative cwd would name a different directory from each process reading it.
    # Absolute by either system's rules: a store or an export may cross from one to the other.
    if cwd is not None and not (posixpath.isabs(cwd) or ntpath.isabs(cwd)):
        raise SessionError(
            f"session header cwd must be an absolute path, got {shown(cwd)}",
            code="INVALID_HEADER",
        )


def _sixty_four_bits(_header: object, _attribute: object, created_at: int) -> None:
    # SQLite's INTEGER and PostgreSQL's BIGINT columns hold it: one contract for every store.
    if not -(2**63) <= created_at < 2**63:
        raise SessionError(
            f"session header created_at must be a signed 64-bit integer, got {shown(created_at)}",
            code="INVALID_HEADER",
        )


def _a_count(_header: object, _attribute: object, seed_length: int | None) -> None:
    if seed_length is not None and seed_length < 0:
        raise SessionError(
            f"session header seed_length must be a count of events, got {seed_length}",
            code="INVALID_HEADER",
        )


@final
@attrs.frozen
class SessionHeader:
    """Out-of-log session metadata (R4.1); never part of history.

    Raises:
        SessionError: ``INVALID_HEADER``, naming a field a store could not
            write or load back as it was given, a ``created_at`` beyond 64 bits,
            a relative ``cwd`` (R4.3) or a negative ``seed_length``.
    """

    id: str = attrs.field(converter=_plain_text, validator=_stored_as(str))
    created_at: int = attrs.field(validator=[_stored_as(int), _sixty_four_bits])
    version: int = attrs.field(default=FORMAT_VERSION, validator=_stored_as(int))
    cwd: str | None = attrs.field(
        default=None, converter=whole, validator=[_stored_as(str, optional=True), _absolute]
    )
    parent_session: str | None = attrs.field(
        default=None, converter=_plain_text, validator=_stored_as(str, optional=True)
    )
    seed_length: int | None = attrs.field(
        default=None, validator=[_stored_as(int, optional=True), _a_count]
    )
