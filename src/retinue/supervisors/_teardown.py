"""The teardown of published agents (R12.9): started once, shielded, and waited for."""

from __future__ import annotations

import contextlib
import logging
from functools import partial
from typing import final

import attrs
import trio

from retinue._errors import AgentError
from retinue.actors import Agent
from retinue.loop import AgentCore, LoopServices
from retinue.loop._core import waiting_agent
from retinue.loop._marks import (
    SETTING_UP,
    TEARING_DOWN,
    enter_teardown,
    setting_up_agents,
    tearing_down_agent,
)
from retinue.loop._waitgraph import circle_error, wait_cycle, waiting_on
from retinue.session import TurnEndReason

from ._cleanups import Cleanups, run_each, unwind
from ._creation import Creation, core_of, end_subscriptions, end_unpublished, let_go_of_handle
from ._driven import mark_undriven
from ._registry import AgentRegistry
from ._stranded import StrandedSessions

__all__ = ["Teardowns"]

log = logging.getLogger("retinue.supervisors")


@final
@attrs.define(eq=False)
class Teardowns:
    """A runtime's teardowns under way, each run in its nursery, and the waits for them."""

    # The runtime's own, shown in its repr.
    _nursery: trio.Nursery = attrs.field(repr=False)
    _services: LoopServices = attrs.field(repr=False)
    _agents: AgentRegistry = attrs.field(repr=False)
    _cleanups: Cleanups = attrs.field(repr=False)
    # The runtime's creations in flight: an agent one of them made is not published yet.
    _creations: dict[str, Creation] = attrs.field(repr=False)
    _stranded: StrandedSessions = attrs.field(repr=False)
    # Ids whose teardown is under way: reserved until their final flush has ended (R12.9).
    _running: dict[str, AgentCore] = attrs.field(factory=dict, init=False)

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._running

    def __len__(self) -> int:
        return len(self._running)

    def of(self, agent_id: str) -> AgentCore | None:
        """The core of the agent *agent_id* whose teardown is under way, if any."""
        return self._running.get(agent_id)

    async def released(self, agent_id: str) -> None:
        """Wait until no teardown of *agent_id* is under way or due; always a checkpoint.

        One is due for an agent its supervisor gave up: disposed, it is torn
        down once its driver has exited. Looked for again after each wait, the
        last time with no checkpoint before the caller takes the id: a dispose
        begun while the call yielded is waited for too, not met as a live agent.
        """
        tearing_down = self._due(agent_id)
        if tearing_down is None:
            await trio.lowlevel.checkpoint()
            tearing_down = self._due(agent_id)
            if tearing_down is None:
                return
        while True:
            if tearing_down.in_own_driver() or tearing_down_agent() is tearing_down:
                # From that agent's own tool, listener or teardown: the teardown waits for it.
                raise AgentError(
                    f"agent {agent_id!r} is being torn down, which waits for this call from "
                    "its own turn or teardown: its id would never be free",
                    code="WAITS_FOR_ITSELF",
                )
            # Its teardown frees the id as it ends; a creation racing for it then
            # finds the id taken again, which is what it would have found anyway.
            await _wait_for_teardown(tearing_down, agent_id)
            tearing_down = self._due(agent_id)
            if tearing_down is None:
                return

    def _due(self, agent_id: str) -> AgentCore | None:
        """The core of the agent *agent_id* whose teardown is under way or due, if any."""
        tearing_down = self._running.get(agent_id)
        live = self._agents.get(agent_id)
        if tearing_down is None and live is not None and core_of(live).disposed:
            tearing_down = core_of(live)
        # One whose teardown was cut short (by a Ctrl-C) stays registered: not waited for again.
        if tearing_down is None or tearing_down.torn_down.is_set():
            return None
        return tearing_down

    async def dispose(self, agent: Agent) -> None:
        """Start the agent's teardown (R12.9) and wait for it; memoized (R12.8).

        The teardown runs in the runtime's nursery, shielded: a cancelled caller
        stops waiting, the teardown still completes, and the runtime's close waits for it.
        """
        core = core_of(agent)
        creation = self._creation_of(core)
        # Its own tool, listener, setup or teardown cannot wait for the driver, creation
        # or teardown it runs under: the agent stops, and its teardown ends once that has unwound.
        waits_for_itself = (
            core.in_own_driver()
            or (creation is not None and core in setting_up_agents())
            or tearing_down_agent() is core  # its store's detach, say
        )
        self.start(agent)
        if waits_for_itself:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        if creation is not None:
            creation.scope.cancel()  # its setup is aborted and rolled back (R12.4)
        caller = waiting_agent()
        if caller is None:
            await core.torn_down.wait()
            return
        if wait_cycle(caller, core) is not None:  # marked disposed above: firm waits only
            # The agent being disposed waits for the caller, directly or through
            # others, in a wait its disposal does not cancel (its final flush's
            # listener disposing the caller, say): its teardown needs the caller to
            # finish first, so this one stops it and returns, as from its own turn.
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        # Recorded like a wait_idle, so a wait that would close a circle through
        # this one (the teardown's own listeners waiting on the caller) is refused.
        with waiting_on(caller, core):
            await core.torn_down.wait()

    def _creation_of(self, core: AgentCore) -> Creation | None:
        """The creation in flight that made *core*, if it has not ended yet."""
        creation = self._creations.get(core.id)
        return creation if creation is not None and creation.core is core else None

    def start(self, agent: Agent) -> None:
        """Stop *agent* and start its teardown once; never blocks."""
        core = core_of(agent)
        if core.disposal_started:
            return
        if not core.published:
            if self._creation_of(core) is None:
                end_unpublished(agent)  # its creation is over: nothing to stop or flush
            else:
                # Aborts its setup; the creation refuses to publish it, unwinds the
                # setup and then ends it, unannounced like every unpublished agent.
                core.disposal_started = True
                core.mark_disposed(announce=False)
            return
        core.disposal_started = True
        # Started before the agent is marked: a listener of its status raising a
        # BaseException (Ctrl-C) must not leave it disposed with no teardown to come.
        self._running[agent.id] = core
        self._nursery.start_soon(self._teardown, agent, name=f"teardown {agent.id}")
        core.mark_disposed()

    async def _teardown(self, agent: Agent) -> None:
        """Wait for the published agent to stop, then unwind it (R12.9); shielded, never raises."""
        SETTING_UP.set(())
        core = core_of(agent)
        token = enter_teardown(core)
        with trio.CancelScope(shield=True):
            try:
                await self._retire(agent)
            finally:
                core.torn_down.set()
                if self._running.get(agent.id) is core:
                    del self._running[agent.id]
                let_go_of_handle(core)
                # The mark holds this task, which holds its context: a cycle otherwise
                # left to the cyclic collector.
                TEARING_DOWN.reset(token)

    async def _retire(self, agent: Agent) -> None:
        """Teardown order of a published agent once stopped (R12.9).

        Quiescence, the final flush included, comes before all of it, as R12.9
        pins. Then the registry entry and ``agent/disposed`` come before the
        agent's scope is unwound (SPEC's era C unwinds first): a listener scoped
        to the agent hears its disposal, and the session is detached last.
        """
        core = core_of(agent)
        await core.driver_exited.wait()
        interrupt = run_each(
            (
                # A driver cancelled with the runtime never reached its own discard.
                partial(core.discard_pending, TurnEndReason.disposed()),
                partial(self._agents._remove, agent.id),
                partial(core.emit, "agent/disposed"),
                partial(unwind, self._services, self._cleanups, agent.id),
                partial(end_subscriptions, agent),
            ),
            agent.id,
            "teardown",
        )
        try:
            await self._stranded.detach(core.session)
        finally:
            # Its store let go of it (or released it, its flush failing), or a Ctrl-C cut
            # the detach short and the runtime ends: either way no agent drives it.
            mark_undriven(core.session)
        if interrupt is not None:
            raise interrupt

    async def wait_all(self) -> None:  # noqa: ASYNC910 - the runtime's close checkpoints before
        """Wait until no teardown is under way, those begun meanwhile too."""
        while self._running:
            await next(iter(self._running.values())).torn_down.wait()

    async def wait_all_as(self, caller: AgentCore) -> None:  # noqa: ASYNC910 - as wait_all
        """:meth:`wait_all`, recorded as the *caller* agent's waits on each teardown.

        Raises ``AgentError(WAIT_CYCLE)`` where one of them waits on *caller*.
        """
        while self._running:
            await _wait_for_teardowns(caller, tuple(self._running.values()))


async def _wait_for_teardown(tearing_down: AgentCore, agent_id: str) -> None:
    """Wait for *tearing_down*'s teardown to end, recorded as the calling agent's wait like
    a ``wait_idle``: that teardown may wait on the caller (its store's detach disposing
    the caller, say), and a flush listener of the caller waiting here would then wait in
    a circle, which raises ``AgentError(WAIT_CYCLE)`` instead."""
    caller = waiting_agent()
    if caller is None:
        await tearing_down.torn_down.wait()
        return
    cycle = wait_cycle(caller, tearing_down)
    if cycle is not None:
        raise circle_error(caller, cycle, f"waiting for the teardown of {agent_id!r}")
    with waiting_on(caller, tearing_down):
        await tearing_down.torn_down.wait()


async def _wait_for_teardowns(caller: AgentCore, teardowns: tuple[AgentCore, ...]) -> None:  # noqa: ASYNC910 - called with at least one teardown, each awaited
    """Wait for all of *teardowns* to end, recorded as the *caller* agent's waits on each.

    Recorded all at once, as the wait is for all of them: a teardown that comes to wait
    on the caller (its store's detach asking it, say) then finds the circle, whichever
    teardown the caller is waiting for at that moment. One that already waits on the
    caller raises ``AgentError(WAIT_CYCLE)`` before anything is recorded.
    """
    for tearing_down in teardowns:
        cycle = wait_cycle(caller, tearing_down)
        if cycle is not None:
            waiting = f"closing the runtime (which waits for the teardown of {tearing_down.id!r})"
            raise circle_error(caller, cycle, waiting)
    with contextlib.ExitStack() as waits:
        for tearing_down in teardowns:
            waits.enter_context(waiting_on(caller, tearing_down))
        for tearing_down in teardowns:
            await tearing_down.torn_down.wait()
