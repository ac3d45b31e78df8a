"""A failed or cancelled creation gives its claim on the new id back within ``flush_timeout``,
however long the store takes (SPEC R12.4, R12.7, R12.10)."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

import retinue
from retinue.stores import MemoryStore
from retinue.testing import DelegatingStore, Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime

STORE_ANSWERS_AFTER = 10_000.0
UNRELEASED = "the store did not answer within 5s"


class _HangingRelease(DelegatingStore):
    """A store whose release of a new id's claim answers only after a long while."""

    async def release_new(self, session_id: str) -> None:
        await trio.sleep(STORE_ANSWERS_AFTER)
        await super().release_new(session_id)


def failing_setup(_agent: retinue.Agent) -> None:
    raise ValueError("the setup failed")


async def test_a_failed_creation_behind_a_hanging_store_ends_within_flush_timeout(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R12.7: the setup's failure is raised once ``flush_timeout`` has passed and the release
    given up is logged: the shielded release does not wait for the store however long it
    takes (for good, for a store that never answers)."""
    store = _HangingRelease(MemoryStore())
    async with runtime(ScriptedModel([Reply("hi")]), store=store, flush_timeout=5.0) as rt:
        began = trio.current_time()
        with (
            caplog.at_level(logging.ERROR, logger="retinue.supervisors"),
            pytest.raises(ValueError, match="the setup failed"),
        ):
            await rt.create_agent("a", OPTIONS, setup=failing_setup)
        assert trio.current_time() - began == 5.0
        assert UNRELEASED in caplog.text


async def test_a_creation_the_close_aborts_behind_a_hanging_store_ends_within_flush_timeout(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R12.10: the runtime's close aborts a creation whose setup waits, and waits for it to
    unwind no longer than ``flush_timeout``, however long the store takes to give its claim
    up."""
    setup_began = trio.Event()

    async def waiting_setup(_agent: retinue.Agent) -> None:
        setup_began.set()
        await trio.sleep_forever()

    async def create(rt: retinue.Runtime) -> None:
        with pytest.raises(RuntimeError, match="was not started"):
            await rt.create_agent("a", OPTIONS, setup=waiting_setup)

    store = _HangingRelease(MemoryStore())
    async with (
        runtime(ScriptedModel([Reply("hi")]), store=store, flush_timeout=5.0) as rt,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(create, rt)
        await setup_began.wait()
        began = trio.current_time()
        with caplog.at_level(logging.ERROR, logger="retinue.supervisors"):
            await rt.aclose()
        assert trio.current_time() - began == 5.0
    assert UNRELEASED in caplog.text
