"""The registry of live agents."""

from __future__ import annotations

from collections.abc import Iterator
from typing import final

import attrs

from retinue.actors import Agent

__all__ = ["AgentRegistry"]


@final
@attrs.define(eq=False, repr=False)
class AgentRegistry:
    """Live agents by id. Read-only to its users.

    A lookup returns the agent's one handle, the one ``create_agent`` returned,
    ``dispose`` included: SPEC R12.1 keeps teardown to the creator's handle, but
    an agent here is the handle (DESIGN 3), and any task that may reach it may
    stop it, as any task holding a nursery may cancel it.
    """

    _agents: dict[str, Agent] = attrs.field(factory=dict, init=False)

    def __repr__(self) -> str:
        # A count, not every agent: a registry may hold thousands.
        return f"<AgentRegistry live={len(self._agents)}>"

    def get(self, agent_id: str) -> Agent | None:
        """The live agent with *agent_id*, or ``None``."""
        return self._agents.get(agent_id)

    def list(self) -> list[Agent]:
        """Every live agent, in creation order."""
        return list(self._agents.values())

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._agents

    def __len__(self) -> int:
        return len(self._agents)

    def __iter__(self) -> Iterator[Agent]:
        return iter(list(self._agents.values()))

    # Private, as the runtime alone keeps the registry: an agent taken out by hand is
    # never disposed by the runtime's close, whose exit then waits for its driver for good.
    def _add(self, agent: Agent) -> None:
        """Register *agent*, as its runtime publishes it."""
        self._agents[agent.id] = agent

    def _remove(self, agent_id: str) -> None:
        """Forget *agent_id*, as its runtime tears it down."""
        self._agents.pop(agent_id, None)
