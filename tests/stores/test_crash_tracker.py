"""The crash suite's checker: a load keeps what earlier loads verified, and every acknowledged line."""

from __future__ import annotations

import pytest

from retinue.session import Session
from tests.stores._kit import lines, run_turn
from tests.stores.test_crash import Tracker


def _log(*texts: str, seed: Session | None = None) -> Session:
    """A session of one complete turn per text, after *seed*'s events."""
    header = Session.create("crash-0").header
    session = Session.from_events(header, seed.events if seed else [])
    for text in texts:
        run_turn(session, text)
    return session


def test_tracker_passes_a_log_grown_past_what_it_verified() -> None:
    tracker = Tracker()
    first = _log("one", "two")
    tracker.check(first, lines(first.events))
    grown = _log("three", seed=first)
    tracker.check(grown, lines(grown.events))
    assert tracker.lengths == {"crash-0": len(grown.events)}
    assert tracker.resumed_turns == 1


def test_tracker_refuses_a_changed_event_acknowledged_in_an_earlier_run() -> None:
    tracker = Tracker()
    first = _log("one", "two")
    tracker.check(first, lines(first.events))
    rewritten = _log("one", "other", "three")
    with pytest.raises(AssertionError, match="changed"):
        tracker.check(rewritten, lines(first.events))


def test_tracker_refuses_a_log_shorter_than_what_it_verified() -> None:
    tracker = Tracker()
    first = _log("one", "two")
    tracker.check(first, [])
    with pytest.raises(AssertionError, match="a verified event changed"):
        tracker.check(_log("one"), [])


def test_tracker_refuses_an_acknowledged_event_the_load_lacks() -> None:
    tracker = Tracker()
    first = _log("one")
    acknowledged = lines(_log("two", seed=first).events)
    with pytest.raises(AssertionError, match="is missing"):
        tracker.check(first, acknowledged)
