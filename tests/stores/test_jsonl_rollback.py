"""The JSONL store undoes a failed group commit exactly, however many fail in a row."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue._errors import StoreError
from retinue.session import Session
from retinue.stores import JSONLStore
from retinue.testing import check_session_invariants
from tests.stores._kit import lines, run_turn


async def test_jsonl_failed_syncs_in_a_row_leave_a_loadable_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R11.5, R11.6: each failed group is cut back to the file's real length, so a second
    failure cannot leave part of a batch behind; every retry then commits exactly once.
    """
    store = JSONLStore(tmp_path)
    backend = store._backend
    real_sync = backend._sync  # type: ignore[attr-defined]
    failing = [False]

    def sync(fds: list[int]) -> None:
        if failing[0]:
            raise OSError(5, "Input/output error")
        real_sync(fds)

    monkeypatch.setattr(backend, "_sync", sync)
    session = Session.create("s1", cwd="/srv")
    async with store:
        store.attach_new(session)
        run_turn(session, "one")
        await store.flush(session)
        for text in ("two", "three is a much longer text " * 20):
            run_turn(session, text)
            failing[0] = True
            with pytest.raises(StoreError):
                await store.flush(session)
            failing[0] = False
            await store.flush(session)
        await store.detach(session)
    async with JSONLStore(tmp_path) as fresh:
        loaded = await fresh.load("s1")
    check_session_invariants(loaded.events)
    assert lines(loaded.events) == lines(session.events)
