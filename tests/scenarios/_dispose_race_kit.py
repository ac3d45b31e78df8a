"""A runtime call made as an agent's dispose begins, and a store whose detach can be held."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import attrs
import outcome
import pytest
import trio

import retinue
from retinue.session import Session
from retinue.stores._writebehind import BufferedStore
from retinue.testing import DelegatingStore
from tests.helpers import OPTIONS

__all__ = [
    "HeldDetach",
    "RacedCall",
    "race_held_create",
    "race_held_teardown",
    "race_until_in_flight",
]

ATTEMPTS = 64
"""Races run before giving up: each is won about one time in two."""


class HeldDetach(DelegatingStore):
    """Passes every operation through, but a detach waits until :attr:`hold` is set."""

    def __init__(self, store: BufferedStore) -> None:
        super().__init__(store)
        self.hold = trio.Event()

    async def detach(self, session: Session) -> None:
        await self.hold.wait()
        await super().detach(session)


@attrs.define(eq=False)
class RacedCall:
    """A call started as an agent's dispose: whether the dispose began while it was under
    way, having yielded at its first checkpoint, and how the call ended."""

    began: bool = False
    disposed_in_flight: bool | None = None
    result: outcome.Outcome[retinue.Agent] | None = None
    ended_at: float | None = None
    ended: trio.Event = attrs.field(factory=trio.Event)

    @property
    def agent(self) -> retinue.Agent:
        """The agent the call returned (raising what it raised)."""
        assert self.result is not None, "the call has not ended"
        return self.result.unwrap()

    async def run(self, call: Callable[[], Awaitable[retinue.Agent]]) -> None:
        # Set in the step that runs the call up to its first checkpoint.
        self.began = True
        self.result = await outcome.acapture(call)
        self.ended_at = trio.current_time()
        self.ended.set()

    async def dispose_once_begun(self, agent: retinue.Agent) -> None:
        while not self.began:
            await trio.lowlevel.checkpoint()
        # Not ended yet, the call has yielded at its first checkpoint and not gone on:
        # the step after it would have refused the agent, still live, at once.
        self.disposed_in_flight = self.result is None
        await agent.dispose()


async def race_until_in_flight(
    nursery: trio.Nursery, rt: retinue.Runtime, call: Callable[[str], Awaitable[retinue.Agent]]
) -> tuple[retinue.Agent, RacedCall]:
    """Start ``call(id)`` in *nursery* alongside the dispose of an agent of that id with one
    turn stored, until the dispose begins while the call is under way: the order of a
    service that disposes an agent in the background as its next request arrives. Trio
    orders the two tasks' steps at random; each miss takes a fresh id, the call refused
    as the agent was still live. Returns the agent and the call, both left running.
    """
    for attempt in range(ATTEMPTS):
        agent = await rt.create_agent("a", OPTIONS, session_id=f"s{attempt}")
        await agent.ask("one")
        raced = RacedCall()
        nursery.start_soon(raced.run, partial(call, agent.id))
        nursery.start_soon(raced.dispose_once_begun, agent)
        while raced.disposed_in_flight is None:
            await trio.lowlevel.checkpoint()
        if raced.disposed_in_flight:
            return agent, raced
        with pytest.raises(retinue.SessionError, match="already live"):
            raced.agent  # noqa: B018 - raises what the call raised
    raise AssertionError(f"no dispose began while its call was under way in {ATTEMPTS} tries")


async def race_held_teardown(
    rt: retinue.Runtime,
    store: HeldDetach,
    call: Callable[[str], Awaitable[retinue.Agent]],
    held: float,
) -> tuple[retinue.Agent, RacedCall]:
    """Race ``call(id)`` with a dispose as :func:`race_until_in_flight` does, hold the
    teardown's detach *held* seconds, the call still waiting, then let it go; returns once
    both have ended."""
    async with trio.open_nursery() as nursery:
        first, raced = await race_until_in_flight(nursery, rt, call)
        await trio.sleep(held)
        assert raced.result is None, "the call ended while the teardown was held"
        store.hold.set()
    return first, raced


async def race_held_create(rt: retinue.Runtime, store: HeldDetach, held: float) -> retinue.Agent:
    """Race a ``create_agent`` of the id with its dispose, the teardown held *held* seconds:
    the create must wait, then be refused ``SESSION_ALREADY_EXISTS`` as for any stored id,
    not as a live agent. Returns the disposed agent."""

    async def create(agent_id: str) -> retinue.Agent:
        return await rt.create_agent("b", OPTIONS, session_id=agent_id)

    first, raced = await race_held_teardown(rt, store, create, held)
    with pytest.raises(retinue.SessionError) as refused:
        raced.agent  # noqa: B018 - raises what the call raised
    assert refused.value.code == "SESSION_ALREADY_EXISTS"
    assert "already live" not in str(refused.value)
    return first
