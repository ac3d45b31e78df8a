"""Opening sessions and closing or refusing their events, for the session log unit tests."""

from __future__ import annotations

from typing import Any

import pytest

from retinue import MessageSource, SessionError, Text
from retinue.session import (
    AssistantMessage,
    EventData,
    Session,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)

PLUGIN = MessageSource("plugin", "memory")


def _c(text: str) -> tuple[Text]:
    """One text block as content."""
    return (Text(text),)


def _open(session_id: str = "s", **kwargs: Any) -> Session:
    session = Session.create(session_id, **kwargs)
    session.append(TurnStart(1, TurnTrigger("message")))
    return session


def _closed_turn(session: Session, turn: int, text: str) -> None:
    session.append(TurnStart(turn, TurnTrigger("message")))
    session.append(UserMessage(_c(text)), surface="append")
    session.append(StepStart(turn, 1))
    session.append(AssistantMessage(turn, 1, (Text(f"re: {text}"),)), surface="append")
    session.append(StepEnd(turn, 1))
    session.append(TurnEnd(turn, TurnEndReason.completed()))


def _refused(session: Session, code: str, data: EventData, **kwargs: Any) -> SessionError:
    before = list(session.events)
    with pytest.raises(SessionError) as caught:
        session.append(data, **kwargs)
    assert caught.value.code == code
    assert list(session.events) == before
    return caught.value


def _history_session() -> Session:
    session = Session.create("s")
    _closed_turn(session, 1, "one")  # surface seqs 1, 3
    _closed_turn(session, 2, "two")  # surface seqs 7, 9
    session.append(TurnStart(3, TurnTrigger("message")))  # seq 12
    return session
