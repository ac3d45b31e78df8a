"""A resume or create of an id whose agent's dispose has begun waits for its teardown (R12.9)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import retinue
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import Reply, ScriptedModel, check_session_invariants
from tests.helpers import runtime, user_texts
from tests.scenarios._dispose_race_kit import HeldDetach, race_held_create, race_until_in_flight

HELD = 5.0
"""Virtual seconds the teardown's detach is held, well within the default ``flush_timeout``."""


def _model() -> ScriptedModel:
    return ScriptedModel([Reply("ok")], repeat_last=True)


class _FailingDetach(HeldDetach):
    """A held detach that fails, as a full disk does, the next times :attr:`failing` says."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.failing: dict[str, int] = {}

    async def detach(self, session: Session) -> None:
        await self.hold.wait()
        if self.failing.get(session.id, 0) > 0:
            self.failing[session.id] -= 1
            raise retinue.StoreError("no space left on device", code="STORAGE_ERROR")
        await super().detach(session)


async def test_a_resume_called_as_a_dispose_begins_waits_for_the_teardown_and_continues_the_log(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9, R11.16: the resume is not refused as live; it returns once the teardown has
    detached the session, with a fresh agent whose log continues the stored one."""
    store = HeldDetach(MemoryStore())
    async with runtime(_model(), store=store) as rt, trio.open_nursery() as nursery:
        first, raced = await race_until_in_flight(nursery, rt, rt.resume_agent)
        stored = len(first.session.events)
        await trio.sleep(HELD)
        assert raced.result is None, "the resume ended while the teardown was held"
        store.hold.set()
        await raced.ended.wait()
        assert raced.ended_at is not None
        assert raced.ended_at >= HELD
        second = raced.agent
        assert second is not first
        assert rt.agents.get(first.id) is second
        await second.ask("two")
        await second.dispose()
    events = second.session.events
    assert events[:stored] == first.session.events
    assert user_texts(events) == ["one", "two"]
    check_session_invariants(events)


async def test_a_resume_cancelled_while_it_waits_for_the_teardown_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A deadline around the resume ends its wait: no agent is made, the teardown ends
    as it would have, and a later resume loads the log as stored."""
    store = HeldDetach(MemoryStore())

    async with runtime(_model(), store=store) as rt:

        async def resume_within_a_second(agent_id: str) -> retinue.Agent:
            with trio.move_on_after(1):
                return await rt.resume_agent(agent_id)
            raise trio.TooSlowError

        async with trio.open_nursery() as nursery:
            first, raced = await race_until_in_flight(nursery, rt, resume_within_a_second)
            await trio.sleep(HELD)
            assert raced.result is not None, "the resume outlived its deadline"
            store.hold.set()
        with pytest.raises(trio.TooSlowError):
            raced.agent  # noqa: B018 - raises what the call raised
        assert rt.agents.get(first.id) is None
        again = await rt.resume_agent(first.id)
        assert again.session.events[: len(first.session.events)] == first.session.events
        await again.ask("two")
        assert user_texts(again.session.events) == ["one", "two"]


async def test_a_create_called_as_a_dispose_begins_is_refused_as_for_a_stored_id(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The create waits for the teardown as a resume does, then meets the id as the memory
    store keeps it, stored: refused ``SESSION_ALREADY_EXISTS``, not as a live agent."""
    store = HeldDetach(MemoryStore())

    async with runtime(_model(), store=store) as rt:
        first = await race_held_create(rt, store, HELD)
        assert rt.agents.get(first.id) is None
        assert user_texts((await rt.store.load(first.id)).events) == ["one"]


async def test_a_resume_waiting_for_a_teardown_whose_final_flush_fails_meets_that_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: the teardown leaves the session released with its events buffered, as after
    any failed final flush; the resume that waited then tries to commit them first, and
    raises the store's error while it still fails. A later resume takes the session."""
    store = _FailingDetach()
    async with runtime(_model(), store=store) as rt:
        async with trio.open_nursery() as nursery:
            first, raced = await race_until_in_flight(nursery, rt, rt.resume_agent)
            store.failing[first.id] = 2  # the teardown's final flush, then the resume's try
            await trio.sleep(HELD)
            assert raced.result is None, "the resume ended while the teardown was held"
            store.hold.set()
        with pytest.raises(retinue.StoreError) as failed:
            raced.agent  # noqa: B018 - raises what the call raised
        assert failed.value.code == "STORAGE_ERROR"
        assert rt.agents.get(first.id) is None
        again = await rt.resume_agent(first.id)
        assert again.session.events[: len(first.session.events)] == first.session.events
        await again.ask("two")
        assert user_texts(again.session.events) == ["one", "two"]
