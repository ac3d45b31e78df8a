"""A resume or create racing the dispose of its id on every store (R12.9, R11.16)."""

from __future__ import annotations

import trio

import retinue
from retinue.testing import Reply, ScriptedModel, check_session_invariants
from tests.helpers import user_texts
from tests.scenarios._dispose_race_kit import HeldDetach, race_held_create, race_held_teardown
from tests.stores.conftest import StoreKit

HELD = 0.2
"""Real seconds the teardown's detach is held: the store's own work runs in worker threads."""


def _model() -> ScriptedModel:
    return ScriptedModel([Reply("ok")], repeat_last=True)


async def test_a_resume_called_as_a_dispose_begins_waits_and_continues_the_stored_log(
    kit: StoreKit,
) -> None:
    """The resume returns once the teardown has detached the session, not refused as
    live, and its agent continues the log the store holds."""
    store = HeldDetach(kit.open())
    with trio.fail_after(60):
        async with retinue.open_runtime(models=_model(), store=store) as rt:
            first, raced = await race_held_teardown(rt, store, rt.resume_agent, HELD)
            second = raced.agent
            assert rt.agents.get(first.id) is second
            await second.ask("two")
            await second.dispose()
        async with kit.open() as reopened:
            events = (await reopened.load(first.id)).events
    assert events[: len(first.session.events)] == first.session.events
    assert user_texts(events) == ["one", "two"]
    check_session_invariants(events)


async def test_a_create_called_as_a_dispose_begins_is_refused_as_for_a_stored_id(
    kit: StoreKit,
) -> None:
    """Every store keeps a disposed agent's session: the create, once the teardown has
    ended, is refused ``SESSION_ALREADY_EXISTS`` as for any stored id."""
    store = HeldDetach(kit.open())
    with trio.fail_after(60):
        async with retinue.open_runtime(models=_model(), store=store) as rt:
            first = await race_held_create(rt, store, HELD)
            assert user_texts((await rt.resume_agent(first.id)).session.events) == ["one"]
