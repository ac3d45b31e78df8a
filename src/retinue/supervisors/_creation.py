"""Agent creations in flight, each reserving its id, and the end of an agent its creation
never published."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import final

import attrs
import trio

from retinue._errors import AgentDisposedError
from retinue.actors import Agent
from retinue.loop import AgentCore
from retinue.loop._marks import setting_up_agents

__all__ = [
    "Creation",
    "Setup",
    "core_of",
    "end_subscriptions",
    "end_unpublished",
    "let_go_of_handle",
    "reserved",
    "run_setup",
    "wait_for_creations",
]

# What a setup returns is awaited when awaitable and otherwise ignored: a one-line
# lambda hands back whatever its expression does (an unregister function, say).
Setup = Callable[[Agent], Awaitable[object] | object]


@final
@attrs.define(eq=False)
class Creation:
    """One creation in flight: the scope that aborts it and, once made, its agent's core."""

    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    agent: Agent | None = None
    ended: trio.Event = attrs.field(factory=trio.Event)
    # Whether the agent had been disposed (during its setup) when the creation retired it.
    _disposed_before: bool | None = None

    @property
    def core(self) -> AgentCore | None:
        return None if self.agent is None else core_of(self.agent)

    @property
    def disposed(self) -> bool:
        """Whether its agent was disposed by someone else than its creation."""
        if self._disposed_before is not None:
            return self._disposed_before
        return self.agent is not None and core_of(self.agent).disposed

    def end_unpublished(self) -> None:
        """Retire the agent this creation made, unless it was published (or is retired)."""
        if self.agent is None or self._disposed_before is not None:
            return
        core = core_of(self.agent)
        if not core.published:
            self._disposed_before = core.disposed
            end_unpublished(self.agent)


@contextmanager
def reserved(creations: dict[str, Creation], agent_id: str) -> Iterator[None]:
    """*agent_id* in *creations* for one creation in flight, which cancelling its scope aborts.

    Raises:
        AgentDisposedError: the creation was aborted by disposing its agent (in its setup).
        RuntimeError: it was aborted otherwise (the runtime's close).
    """
    creation = creations[agent_id] = Creation()
    try:
        with creation.scope:
            yield
    finally:
        del creations[agent_id]
        creation.end_unpublished()
        disposed = creation.disposed
        creation.ended.set()
    if not creation.scope.cancelled_caught:
        return
    if disposed:
        raise AgentDisposedError(f"agent {agent_id!r} was disposed during its setup")
    raise RuntimeError(f"agent loop is not active: {agent_id!r} was not started")


async def wait_for_creations(creations: dict[str, Creation]) -> None:
    """Wait until every creation of *creations* has ended, but the caller's own: called from
    an agent's setup (shielded, say), that creation ends only once the call returns."""
    own = setting_up_agents()
    while True:
        others = [c for c in creations.values() if c.core is None or c.core not in own]
        if not others:
            return  # noqa: ASYNC910 - aclose checkpoints before it waits here
        await others[0].ended.wait()


def end_unpublished(agent: Agent) -> None:
    """Retire the handle of an agent never published (its setup may have kept it).

    It reads ``disposed``, refuses scoped listeners, tools and cleanups, and ends
    its subscriptions. Never announced (R12.5), so its end is not either.
    """
    core = core_of(agent)
    core.disposal_started = True  # a later dispose returns at once
    core.mark_disposed(announce=False)
    end_subscriptions(agent)
    core.torn_down.set()
    let_go_of_handle(core)


def let_go_of_handle(core: AgentCore) -> None:
    """Drop *core*'s pointer back to its handle once the agent is torn down.

    Nothing announces the agent any more, and the handle keeps its core for
    its reads and refusals: the pointer back would only make a cycle, and
    leave the agent, its session and its events to the cyclic collector.
    """
    core.agent = None


def core_of(agent: Agent) -> AgentCore:
    return agent._core


def end_subscriptions(agent: Agent) -> None:
    """End *agent*'s live subscriptions, and any it gives later, after its last event."""
    agent._end_subscriptions()


async def run_setup(agent: Agent, setup: Setup | None) -> None:
    """Call *setup*, awaiting what it returns when awaitable; always a checkpoint."""
    result = None if setup is None else setup(agent)
    if inspect.isawaitable(result):
        await result
    else:
        await trio.lowlevel.checkpoint()
