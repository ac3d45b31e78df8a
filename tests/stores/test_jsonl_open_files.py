"""The JSONL store keeps one open, locked file per live session, and fails clearly without one.

The file-limit scenarios run in a child (``_open_files_child``) because
``RLIMIT_NOFILE`` is process-wide; the in-process tests make ``os.open`` fail
for one session instead.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore
from retinue.testing import check_session_invariants
from tests.stores._kit import flush_together, run_turn
from tests.stores._open_files_child import digest

ROOT = Path(__file__).resolve().parents[2]
OUT_OF_FILES = ("ran out of open files", "one open file per live session", "ulimit -n")
CHILD_DEADLINE = 100
"""Real seconds a child may run (it takes 1-10 s): inside the store tests' own bound
(``STORE_TEST_TIMEOUT`` in conftest.py), so a hung child fails here, naming the child."""


async def _run_child(root: Path, limit: int, count: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "tests.stores._open_files_child", str(root), str(limit)]
    with trio.fail_after(CHILD_DEADLINE):
        result = await trio.run_process(
            [*command, str(count)], cwd=ROOT, capture_stdout=True, capture_stderr=True, check=False
        )
    assert result.returncode == 0, result.stderr.decode()
    summary: dict[str, Any] = json.loads(result.stdout)
    return summary


def _temporary_files(root: Path) -> list[Path]:
    return list(root.rglob("*.tmp"))


async def _check_stored(root: Path, summary: dict[str, Any]) -> None:
    """Every session loads intact; the child held every session it had not released."""
    assert summary["retry_errors"] == {}
    released = set(summary["released"])
    for session_id, outcome in summary["claims"].items():
        assert outcome == ("loaded" if session_id in released else "SESSION_LOCKED"), session_id
    async with JSONLStore(root) as store:
        for session_id, expected in summary["digests"].items():
            session = await store.load(session_id)
            check_session_invariants(session.events)
            assert digest(session) == expected, session_id
            store.attach(session)
            await store.detach(session)
    assert _temporary_files(root) == []


def _assert_out_of_files(error: StoreError, session_id: str) -> None:
    assert error.code == "STORAGE_ERROR"
    assert repr(session_id) in error.message
    for phrase in OUT_OF_FILES:
        assert phrase in error.message
    assert "PostgresStore" in error.message


async def test_jsonl_sessions_beyond_the_file_limit_fail_alone_and_lose_nothing(
    tmp_path: Path,
) -> None:
    """R11.5, R11.6, R12.7: under a 64-file limit, a group of 80 new sessions commits those
    that fit; each other one gets a clear STORAGE_ERROR and keeps its events buffered, and
    commits once sessions are released. Committed sessions stay claimed; no file is corrupt.
    """
    root = tmp_path / "sessions"
    summary = await _run_child(root, 64, 80)
    errors = summary["errors"]
    assert 0 < len(errors) < 80
    assert summary["largest_group"] == 80 - len(errors)  # one group: the sessions it committed
    for session_id, (code, message) in errors.items():
        _assert_out_of_files(StoreError(message, code=code), session_id)
    assert summary["buffered_after_group"] == sum(summary["lengths"][key] for key in errors)
    await _check_stored(root, summary)


@pytest.fixture
def two_thousand_files() -> None:
    """Skip (fail under CI) unless the hard ``RLIMIT_NOFILE`` allows 2048 open files.

    ``.ci/run`` does not raise the limit, so a CI host may have a lower one: there the
    test must not go silently untested. (A sync fixture, so the skip keeps its reason.)
    """
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] >= 2048:
        return
    reason = "the hard RLIMIT_NOFILE is below 2048; raise it (as root: ulimit -Hn 4096)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.mark.usefixtures("two_thousand_files")
async def test_jsonl_keeps_every_live_session_claimed_past_a_thousand_files(
    tmp_path: Path,
) -> None:
    """R12.7: with 1100 live sessions in one group, none loses its lock to an open-file cap."""
    root = tmp_path / "sessions"
    summary = await _run_child(root, 2048, 1100)
    assert summary["errors"] == {}
    await _check_stored(root, summary)


def _fail_open_for(monkeypatch: pytest.MonkeyPatch, victim: str) -> None:
    """Make ``os.open`` (which the JSONL backend calls) run out of descriptors for *victim*."""
    real = os.open

    def fake_open(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        if victim in os.fspath(path):
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real(path, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)


async def _stored_sessions(root: Path, ids: list[str]) -> list[Session]:
    """Sessions written and released, then read back unclaimed (attached later they open lazily)."""
    async with JSONLStore(root) as store:
        for session_id in ids:
            session = Session.create(session_id)
            store.attach_new(session)
            run_turn(session)
            await store.detach(session)
        return [await store.inspect(session_id) for session_id in ids]


@pytest.mark.parametrize("stored", [False, True], ids=["new", "stored"])
async def test_jsonl_a_session_whose_file_cannot_be_opened_fails_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored: bool
) -> None:
    """R11.5, R11.6: when one session's file cannot be opened, only its flush fails, clearly;
    the rest of the group commits and its events stay buffered for the next flush.
    """
    root = tmp_path / "sessions"
    ids = ["alpha", "victim", "omega"]
    sessions = await _stored_sessions(root, ids) if stored else [Session.create(i) for i in ids]
    before = {session.id: len(session.events) for session in sessions}
    async with JSONLStore(root) as store:
        for session in sessions:
            if stored:
                store.attach(session)
            else:
                store.attach_new(session)
            run_turn(session, "again")
        _fail_open_for(monkeypatch, "victim")
        errors = await flush_together(store, sessions)
        assert list(errors) == ["victim"]
        _assert_out_of_files(errors["victim"], "victim")
        assert store.statistics().buffered_events == len(sessions[1].events) - before["victim"]
        assert _temporary_files(root) == []
        for session in (sessions[0], sessions[2]):
            assert digest(await store.inspect(session.id)) == digest(session)
        monkeypatch.undo()
        await store.flush(sessions[1])
        assert digest(await store.inspect("victim")) == digest(sessions[1])


async def test_jsonl_claim_reports_running_out_of_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.7, R11.5: a load that cannot open the file to claim it raises the clear error and
    holds nothing, so a later load succeeds.
    """
    root = tmp_path / "sessions"
    [stored] = await _stored_sessions(root, ["victim"])
    async with JSONLStore(root) as store:
        _fail_open_for(monkeypatch, "victim")
        with pytest.raises(StoreError) as caught:
            await store.load("victim")
        _assert_out_of_files(caught.value, "victim")
        monkeypatch.undo()
        loaded = await store.load("victim")
        assert digest(loaded) == digest(stored)


async def _stored(store: JSONLStore, session_id: str) -> Session:
    """A session of one turn, stored and let go."""
    session = Session.create(session_id)
    store.attach_new(session)
    run_turn(session, "hi")
    await store.detach(session)
    return session


async def test_jsonl_keeps_no_path_for_a_session_it_let_go(tmp_path: Path) -> None:
    """A long-running store remembers the files of its live sessions only (each path with its open
    file), not the path of every session it has created, looked up or loaded, for as long as it
    runs."""
    async with JSONLStore(tmp_path) as store:
        for number in range(20):
            await _stored(store, f"s{number}")
        assert all([await store.exists(f"s{number}") for number in range(20)])
        loaded = await store.load("s3")
        backend: Any = store._backend  # what the store holds per session
        assert [handle.path.name for handle in backend._open.values()] == ["s3.jsonl"]
        store.attach(loaded)
        await store.detach(loaded)
        held = [name for name, value in vars(backend).items() if isinstance(value, dict) and value]
        assert held == []  # nothing kept per session


async def test_a_session_loaded_and_let_go_unattached_gives_up_its_claim(tmp_path: Path) -> None:
    """``detach`` gives up the claim ``load`` took, attached or not: let go unattached, the file
    does not stay open and locked, keeping every other store from loading it until this one
    closes."""
    async with JSONLStore(tmp_path) as store:
        session = await _stored(store, "s")
        loaded = await store.load("s")
        await store.detach(loaded)
        async with JSONLStore(tmp_path) as other:
            again = await other.load("s")
            assert [event.type for event in again.events] == [e.type for e in session.events]
            await other.detach(again)


async def test_a_detach_of_a_loaded_session_cancelled_in_its_flush_can_be_done_again(
    tmp_path: Path,
) -> None:
    """The claim of a session loaded and let go unattached is given up by the detach that
    completes: one cancelled before it forgot the session, and the file stayed locked."""
    async with JSONLStore(tmp_path) as store:
        await _stored(store, "s")
        loaded = await store.load("s")
        with trio.CancelScope() as scope:
            scope.cancel()
            await store.detach(loaded)
        assert scope.cancelled_caught
        await store.detach(loaded)
        async with JSONLStore(tmp_path) as other:
            await other.detach(await other.load("s"))


async def test_a_session_loaded_and_not_yet_let_go_is_not_loaded_again(tmp_path: Path) -> None:
    """One writer per session, within a store too: a session loaded and not yet let go is refused to
    a second load (``SESSION_TRACKED``), since a second copy sharing the first's claim would release
    the other's with its detach, and events the other logged would never be stored."""
    async with JSONLStore(tmp_path) as store:
        await _stored(store, "s")
        first = await store.load("s")
        with pytest.raises(StoreError) as refused:
            await store.load("s")
        assert refused.value.code == "SESSION_TRACKED"
        await store.detach(first)
        second = await store.load("s")
        run_turn(second, "more")
        store.attach(second)
        await store.detach(second)
        assert len((await store.inspect("s")).events) == len(second.events)
