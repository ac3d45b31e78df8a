"""The sets of event data classes a session's appends dispatch on, each one lookup by type."""

from __future__ import annotations

from typing import get_args

from ._events import (
    SURFACE_TYPES,
    EventData,
    PromptBlocked,
    RequestHeader,
    RequestHeaderDelta,
    StepEnd,
    StepStart,
    ToolCallEvent,
    TurnEnd,
    TurnStart,
)

__all__ = ["BOUNDARY_TYPES", "EVENT_TYPES", "HEADER_TYPES", "PLAIN_TYPES", "SURFACE_DATA"]

# Event types whose append changes no fold and needs no validation beyond their
# own constructor's. Not AssistantChunk: a named tuple, built unchecked.
PLAIN_TYPES = frozenset({StepStart, StepEnd, ToolCallEvent, PromptBlocked})
# Event types that open or close a turn.
BOUNDARY_TYPES = frozenset({TurnStart, TurnEnd})
# Every event data class; all are final, so an exact type check suffices.
EVENT_TYPES = frozenset(get_args(EventData))
# The classes of SURFACE_TYPES: one set lookup per append instead of reading the type tag.
SURFACE_DATA = frozenset(
    kind for kind in EVENT_TYPES if getattr(kind, "type", None) in SURFACE_TYPES
)
# Event types that change the header fold.
HEADER_TYPES = frozenset({RequestHeader, RequestHeaderDelta})
