"""Header events and rebuilding requests from the log, for the request log tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from retinue import Message
from retinue._request import ModelRequest
from retinue.session import EpochHeader, Event, RequestHeader, Session, SessionHeader, dump_event


def header_events(events: Sequence[Event]) -> list[Event]:
    """The request/header and request/header-delta events, in order."""
    return [e for e in events if e.type in ("request/header", "request/header-delta")]


def rebuild_requests(events: Sequence[Event]) -> list[tuple[list[Message], EpochHeader]]:
    """Rebuild every step's request from the log alone (R8.8).

    Messages fold the surface over ``events[:seq(step/start)]`` in a fresh
    session; the header folds every header event up to and including the
    step's own (which sits after ``step/start``, before the first chunk).
    """
    rebuilt: list[tuple[list[Message], EpochHeader]] = []
    for index, event in enumerate(events):
        if event.type != "step/start":
            continue
        history = Session.from_events(SessionHeader("rebuild", 0), events[:index]).derive_messages()
        end = index + 1
        while end < len(events) and events[end].type not in (
            "assistant/chunk",
            "assistant/message",
            "step/end",
        ):
            end += 1
        fold = Session.from_events(SessionHeader("rebuild", 0), events[:end]).current_header
        assert fold is not None, f"step at seq {event.seq} has no header"
        rebuilt.append(([*fold.message_prefix, *history], fold))
    return rebuilt


def wire(config: Any, system: str | None, tools: Any, messages: Sequence[Message]) -> str:
    """A canonical JSON text of a request's model-visible parts, through the session codec."""
    header = EpochHeader(config, system, tuple(tools), tuple(messages))
    return json.dumps(dump_event(Event(0, 0, RequestHeader(header, "initial"))), sort_keys=True)


def assert_requests_rebuild(events: Sequence[Event], requests: Sequence[ModelRequest]) -> None:
    """Every recorded request equals, byte for byte, its rebuild from the log (R8.9)."""
    rebuilt = rebuild_requests(events)
    assert len(rebuilt) == len(requests)
    for (messages, header), request in zip(rebuilt, requests, strict=True):
        assert list(request.messages) == messages
        assert request.system == header.system
        assert request.tools == header.tools
        assert request.config == header.config
        assert wire(request.config, request.system, request.tools, request.messages) == wire(
            header.config, header.system, header.tools, messages
        )
