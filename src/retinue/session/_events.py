"""The session event catalogue (SPEC 4.3): one frozen class per event type.

The turn's events live in ``_turn_events`` and the request-header events in
``_header_events``; this module gathers them into the event union, with the
envelope, plugin events, surface ops and the stored header line.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, TypeAlias, final, get_args

import attrs

from retinue._lossless import FrozenDict, JsonValue, freeze_json, shown

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
]

FORMAT_VERSION = 0


def _frozen_data(value: object) -> JsonValue:
    # Named by the path its errors start with (``data.stats[1]``).
    return freeze_json(value, "data")


@final
@attrs.frozen
class CustomEvent:
    """An event type retinue does not model (plugins, newer versions); kept verbatim.

    Its type may not be empty nor the name of a built-in event type (or of the
    stored header line, ``session``): loaded back, such a record would be read
    as that type, not as this event.
    """

    type: str = attrs.field(validator=lambda _event, _field, value: _check_custom_type(value))
    data: JsonValue = attrs.field(factory=FrozenDict, converter=_frozen_data)


def _check_custom_type(value: object) -> None:
    if not isinstance(value, str) or not value or value in RESERVED_TYPES:
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

RESERVED_TYPES = frozenset(
    {"session", *(kind.type for kind in get_args(EventData) if kind is not CustomEvent)}
)
"""Names no :class:`CustomEvent` may take: the built-in event types and the header line's."""

SURFACE_TYPES = frozenset(
    {"user/message", "assistant/message", "tool/result", "context/message", "steering/message"}
)


@final
@attrs.frozen
class Replace:
    """Surface op: replace the surface nodes from ``start`` through ``end`` with this event."""

    start: int = attrs.field(validator=integer)
    end: int = attrs.field(validator=integer)


SurfaceOp: TypeAlias = Literal["append"] | Replace


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


@final
@attrs.frozen
class SessionHeader:
    """Out-of-log session metadata (R4.1); never part of history."""

    id: str
    created_at: int
    version: int = FORMAT_VERSION
    cwd: str | None = None
    parent_session: str | None = None
    seed_length: int | None = None
