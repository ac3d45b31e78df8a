"""Observers hear a session's events in seq order, even those appended while notified."""

from __future__ import annotations

import logging

import pytest

from retinue import SessionError
from retinue.session import Event, Session


def test_an_event_appended_by_an_observer_reaches_every_observer_after_the_one_it_hears() -> None:
    """R4.8, R4.10: every observer hears each append once, in seq order."""
    session = Session.create("agent")
    first_heard: list[int] = []
    later_heard: list[int] = []

    def replying(event: Event) -> None:
        first_heard.append(event.seq)
        if event.type == "plugin/ask":
            session.append_custom("plugin/answer", {"to": event.seq})

    session.observe(replying)
    session.observe(lambda event: later_heard.append(event.seq))

    session.append_custom("plugin/ask", 1)

    assert [event.seq for event in session.events] == [0, 1]
    assert first_heard == [0, 1]
    assert later_heard == [0, 1]


def test_an_observer_failure_on_an_event_appended_while_notified_fails_the_outer_append() -> None:
    """R4.8: the failure propagates once every observer heard both events, both logged."""
    session = Session.create("agent")
    heard: list[int] = []

    def replying(event: Event) -> None:
        if event.type == "plugin/ask":
            session.append_custom("plugin/answer", 2)

    def refusing(event: Event) -> None:
        heard.append(event.seq)
        if event.type == "plugin/answer":
            raise SessionError("refused", code="REFUSED")

    session.observe(replying)
    session.observe(refusing)

    with pytest.raises(SessionError, match="refused"):
        session.append_custom("plugin/ask", 1)

    assert heard == [0, 1]
    assert len(session.events) == 2
    session.append_custom("plugin/later", 3)
    assert heard == [0, 1, 2]


def test_an_event_appended_while_notified_reaches_the_observers_registered_when_it_was() -> None:
    """R4.10: an observer registered after an append does not hear it; one removed after does."""
    session = Session.create("agent")
    late_heard: list[int] = []
    leaving_heard: list[int] = []

    def late(event: Event) -> None:
        late_heard.append(event.seq)

    def reshuffling(event: Event) -> None:
        if event.type == "plugin/ask":
            session.append_custom("plugin/answer", 2)
            session.observe(late)
            unsubscribe_leaving()

    session.observe(reshuffling)
    unsubscribe_leaving = session.observe(lambda event: leaving_heard.append(event.seq))

    session.append_custom("plugin/ask", 1)
    session.append_custom("plugin/later", 3)

    assert late_heard == [2]
    assert leaving_heard == [0, 1]


def test_an_observer_whose_repr_fails_still_lets_every_observer_hear_the_deferred_events() -> None:
    """R4.8: an observer that appends and raises, its repr failing too, does not leave the
    event it appended unheard: the other observers hear both, then its error is raised,
    naming it by its code (never by its repr)."""
    session = Session.create("agent")
    heard: list[int] = []

    class Unshowable:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

        def __call__(self, event: Event) -> None:
            if event.seq == 0:
                session.append_custom("plugin/answer", 2)
                raise SystemExit(3)

    session.observe(Unshowable())
    session.observe(lambda event: heard.append(event.seq))

    with pytest.raises(SessionError, match=r"Unshowable\.__call__ raised SystemExit: 3"):
        session.append_custom("plugin/ask", 1)

    assert heard == [0, 1]


def test_a_failure_hidden_by_ctrl_c_is_logged_with_the_seq_it_failed_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R4.8: Ctrl-C on a deferred event is raised; an earlier observer's failure on the outer
    event is logged under that event's seq, not the last one announced."""
    session = Session.create("agent")

    def failing(event: Event) -> None:
        if event.seq == 0:
            session.append_custom("plugin/answer", 2)
            raise ValueError("failed on the ask")

    def interrupted(event: Event) -> None:
        if event.seq == 1:
            raise KeyboardInterrupt

    session.observe(failing)
    session.observe(interrupted)

    with pytest.raises(KeyboardInterrupt):
        session.append_custom("plugin/ask", 1)

    [record] = [r for r in caplog.records if "Ctrl-C is raised instead" in r.getMessage()]
    assert "seq 0 (plugin/ask)" in record.getMessage()
    assert len(session.events) == 2


class _CtrlCOnce(logging.Handler):
    """A log handler that raises Ctrl-C the first time it writes: one landing mid-line."""

    def __init__(self) -> None:
        super().__init__()
        self.fired = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.fired:
            self.fired = True
            raise KeyboardInterrupt


def test_an_announcement_cut_short_twice_still_lets_later_appends_be_heard() -> None:
    """R4.8: Ctrl-C escaping while a failure is logged, then an observer raising SystemExit on
    an event left to announce, end that append; every event is heard and later appends are
    announced, the announcer not left marked busy to queue them ever after."""
    session = Session.create("agent")
    heard: list[int] = []

    def appending(event: Event) -> None:
        heard.append(event.seq)
        if event.seq == 0:
            session.append_custom("plugin/a", 1)
            session.append_custom("plugin/b", 2)
            raise ValueError("fails on seq 0")
        if event.seq == 1:
            raise ValueError("fails on seq 1")
        if event.seq == 2:
            raise SystemExit(3)

    session.observe(appending)
    handler = _CtrlCOnce()
    logger = logging.getLogger("retinue.session")
    logger.addHandler(handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            session.append_custom("plugin/ask", 0)
    finally:
        logger.removeHandler(handler)
    assert handler.fired
    session.append_custom("plugin/later", 3)
    assert heard == [0, 1, 2, 3]


def test_a_list_left_the_lone_observer_during_an_announcement_hears_in_seq_order() -> None:
    """R4.8, R4.10: a list's append, left alone by an observer unsubscribing itself while
    notified, hears the event that observer then appends after the one being announced."""
    session = Session.create("agent")
    stored: list[Event] = []

    def leaving(event: Event) -> None:
        unsubscribe()
        session.append_custom("plugin/after", event.seq)

    unsubscribe = session.observe(leaving)
    session.observe(stored.append)

    session.append_custom("plugin/first", 0)
    session.append_custom("plugin/later", 2)

    assert [event.seq for event in stored] == [0, 1, 2]


def test_a_list_subclass_whose_append_appends_hears_in_seq_order() -> None:
    """R4.8, R4.10: a lone observer that is a list subclass's append is announced like any
    other: what its append appends is heard after the event it is hearing."""
    session = Session.create("agent")

    class Replying(list[Event]):
        def append(self, event: Event) -> None:
            if event.type == "plugin/ask":
                session.append_custom("plugin/answer", event.seq)
            super().append(event)

    heard = Replying()
    session.observe(heard.append)

    session.append_custom("plugin/ask", 0)

    assert [event.seq for event in heard] == [0, 1]


def test_a_wrapper_posing_as_a_lists_append_is_announced_like_any_observer() -> None:
    """R4.8, R4.10: a lone observer that passes its attributes and ``==`` on to a list's
    append runs code of its own: what it appends is heard after the event it is hearing,
    and its ``StopIteration`` fails the append as a ``SessionError``."""
    session = Session.create("agent")
    heard: list[Event] = []

    class Wrapping:
        def __call__(self, event: Event) -> None:
            if event.type == "plugin/ask":
                session.append_custom("plugin/answer", event.seq)
            if event.type == "plugin/stop":
                raise StopIteration
            heard.append(event)

        def __getattr__(self, name: str) -> object:
            return getattr(heard.append, name)

        def __eq__(self, other: object) -> bool:
            return heard.append == other

        __hash__ = object.__hash__

    session.observe(Wrapping())

    session.append_custom("plugin/ask", 0)
    with pytest.raises(SessionError) as refused:
        session.append_custom("plugin/stop", 2)

    assert [event.seq for event in heard] == [0, 1]
    assert refused.value.code == "UNKNOWN"
    assert len(session.events) == 3
