"""JSONLStore closing while a load's claim or an append is still on its way to a worker thread."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore
from retinue.stores._backend import AppendBatch
from retinue.stores._jsonl import JSONLBackend
from tests.stores._kit import (
    flush_refusals_as_the_exit_is_cancelled,
    lines,
    load_refusals_as_the_store_closes,
    run_turn,
    store_one_turn,
)


async def _assert_free(root: Path, session_id: str, stored: list[str]) -> None:
    """Another store can load the session (*stored* first): the closed store holds no claim."""
    async with JSONLStore(root) as other:
        loaded = await other.load(session_id)
        assert lines(loaded.events[: len(stored)]) == stored
        await other.detach(loaded)


def _close_then_set(monkeypatch: pytest.MonkeyPatch, closed: threading.Event) -> None:
    """Make every JSONL backend set *closed* once its close is over."""
    close = JSONLBackend.close

    def close_and_set(self: JSONLBackend) -> None:
        close(self)
        closed.set()

    monkeypatch.setattr(JSONLBackend, "close", close_and_set)


def _write_after_close(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Make every JSONL backend's write wait for its close; set the event returned as it waits."""
    writing, closed = threading.Event(), threading.Event()
    write = JSONLBackend.write

    def write_after_close(
        self: JSONLBackend, batches: Sequence[AppendBatch]
    ) -> list[StoreError | None]:
        writing.set()
        closed.wait()
        return write(self, batches)

    monkeypatch.setattr(JSONLBackend, "write", write_after_close)
    _close_then_set(monkeypatch, closed)
    return writing


async def test_jsonl_load_racing_the_close_is_refused_and_claims_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7: a load whose claim reaches the backend only once its store has closed fails
    with ``STORE_CLOSED``; it neither returns the session nor leaves the closed store
    holding its file locked, which would refuse every other store until the process exits."""
    root = tmp_path / "sessions"
    session = await store_one_turn(JSONLStore(root), "raced")
    claiming, closed = threading.Event(), threading.Event()
    claim = JSONLBackend.claim

    def claim_after_close(self: JSONLBackend, session_id: str) -> None:
        claiming.set()
        closed.wait()
        claim(self, session_id)

    monkeypatch.setattr(JSONLBackend, "claim", claim_after_close)
    _close_then_set(monkeypatch, closed)
    refusals = await load_refusals_as_the_store_closes(JSONLStore(root), "raced", claiming)
    assert refusals == ["STORE_CLOSED"]
    monkeypatch.undo()
    await _assert_free(root, "raced", lines(session.events[:]))


async def test_jsonl_append_racing_the_close_is_refused_and_claims_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7: a stored session appended to without a load has its file opened and locked by
    the commit; a commit that reaches the backend only once its store has closed (an exit
    cancelled) writes nothing and opens nothing for the closed store."""
    root = tmp_path / "sessions"
    session = await store_one_turn(JSONLStore(root), "raced")
    stored = lines(session.events[:])
    writing = _write_after_close(monkeypatch)
    refusals = await flush_refusals_as_the_exit_is_cancelled(JSONLStore(root), session, writing)
    assert refusals == ["STORE_CLOSED"]
    monkeypatch.undo()
    await _assert_free(root, "raced", stored)
    async with JSONLStore(root) as other:
        assert lines((await other.inspect("raced")).events[:]) == stored


async def test_jsonl_create_racing_the_close_is_refused_and_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.3: a new session's first commit that reaches the backend only once its store has
    closed stores nothing: the id stays free, with no file left open or locked for it."""
    root = tmp_path / "sessions"
    writing = _write_after_close(monkeypatch)
    session = Session.create("late")
    run_turn(session)
    refusals = await flush_refusals_as_the_exit_is_cancelled(
        JSONLStore(root), session, writing, attach=False
    )
    assert refusals == ["STORE_CLOSED"]
    monkeypatch.undo()
    async with JSONLStore(root) as other:
        assert not await other.exists("late")
