"""A seed event's envelope is checked like an append's (R4.24): nothing is logged that cannot be stored (R1.6, R4.5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue._errors import SessionError
from retinue.session import Event, Session, TurnEnd, TurnEndReason, TurnStart, TurnTrigger
from retinue.stores import JSONLStore

BIG = 10**5000  # too many digits for str() to write
START = TurnStart(1, TurnTrigger("message"))
END = TurnEnd(1, TurnEndReason.completed())


@pytest.mark.parametrize("seq", [True, 1.0], ids=["bool", "float"])
def test_a_seed_seq_equal_to_its_index_but_not_an_int_is_refused(seq: object) -> None:
    """R4.24: ``True`` and ``1.0`` equal index 1 but would be stored as no JSON integer."""
    seed = [Event(0, 1, START), Event(seq, 2, END)]  # type: ignore[arg-type]
    with pytest.raises(SessionError) as caught:
        Session.create("s", seed=seed, created_at=1)
    assert caught.value.code == "SEQ_GAP"
    assert f"seq {seq!r}" in str(caught.value)


@pytest.mark.parametrize(
    "time", [None, "now", 2.5, -1.5, True, BIG], ids=["none", "str", "float", "neg", "bool", "big"]
)
def test_a_seed_time_a_store_cannot_write_is_refused(time: object) -> None:
    """R4.24, R1.6: a seed event's time must be an int the codec writes and reads back."""
    seed = [Event(0, time, START), Event(1, 2, END)]  # type: ignore[arg-type]
    with pytest.raises(SessionError) as caught:
        Session.create("s", seed=seed, created_at=1)
    assert caught.value.code == "INVALID_TIME"
    assert "seq 0" in str(caught.value)


@pytest.mark.parametrize(
    "item", [{"seq": 0}, (0, 1, START), None, START], ids=["dict", "tuple", "none", "data"]
)
def test_a_seed_item_that_is_not_an_event_is_refused_typed(item: object) -> None:
    """R4.24: a non-Event seed item is a SessionError naming its index, not a bare AttributeError."""
    seed = [Event(0, 1, START), item]
    with pytest.raises(SessionError) as caught:
        Session.create("s", seed=seed, created_at=1)  # type: ignore[arg-type]
    assert caught.value.code == "INVALID_EVENT"
    assert "seed item 1" in str(caught.value)


@pytest.mark.parametrize("seed", [5, None], ids=["int", "none"])
def test_a_seed_that_is_not_an_iterable_of_events_is_refused_typed(seed: object) -> None:
    """R4.24: a seed that is no iterable is a SessionError naming the session, not a bare
    TypeError from deep inside."""
    with pytest.raises(SessionError) as caught:
        Session.create("s", seed=seed, created_at=1)  # type: ignore[arg-type]
    assert caught.value.code == "INVALID_EVENT"
    assert str(caught.value).startswith("session 's': ")


@pytest.mark.parametrize("header", ["s", None], ids=["id", "none"])
def test_from_events_refuses_a_header_that_is_not_a_session_header(header: object) -> None:
    """R4.1: ``from_events`` is given the header a store loaded; anything else is a SessionError
    coded ``INVALID_HEADER`` naming it, not an AttributeError of the first seq check."""
    with pytest.raises(SessionError, match="header must be a SessionHeader, got ") as caught:
        Session.from_events(header, [Event(0, 1, START)])  # type: ignore[arg-type]
    assert caught.value.code == "INVALID_HEADER"


def test_from_events_refuses_a_bool_seq_before_anything_is_logged() -> None:
    """R4.24: from_events (every load and resume) holds the same rule as create."""
    header = Session.create("s", created_at=1).header
    with pytest.raises(SessionError) as caught:
        Session.from_events(header, [Event(False, 1, START)])  # type: ignore[arg-type]
    assert caught.value.code == "SEQ_GAP"


async def test_an_accepted_seed_with_a_large_epoch_time_reloads_whole(tmp_path: Path) -> None:
    """R4.5: epoch-ms times (past the one-digit int range) are kept, stored and loaded back."""
    now = 1_700_000_000_000
    session = Session.create("s", seed=[Event(0, now, START), Event(1, now + 1, END)], created_at=1)
    async with JSONLStore(tmp_path) as store:
        store.attach_new(session)
        await store.flush(session)
        await store.detach(session)
    async with JSONLStore(tmp_path) as store:
        loaded = await store.load("s")
    assert [(e.seq, e.time, e.type) for e in loaded.events] == [
        (0, now, "turn/start"),
        (1, now + 1, "turn/end"),
    ]
