"""The registry of live agents."""

from __future__ import annotations

from collections.abc import Iterator
from typing import final

import attrs

from retinue._fresh_ids import label_of
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
    # Live ids by the name that labels them (``<name>-session-<uuid4>``), so that a
    # name passed where an id belongs is told apart at once, however many agents live.
    _labelled: dict[str, dict[str, None]] = attrs.field(factory=dict, init=False)

    def __repr__(self) -> str:
        # A count, not every agent: a registry may hold thousands.
        return f"<AgentRegistry live={len(self._agents)}>"

    def get(self, agent_id: str) -> Agent | None:
        """The live agent with *agent_id*, or ``None``."""
        return self._agents.get(agent_id)

    def list(self) -> list[Agent]:
        """Every live agent, in creation order."""
        return list(self._agents.values())

    def id_labelled(self, name: str) -> str | None:
        """A live agent's id that *name* labels, when *name* is no live agent's id itself.

        The name given to ``create_agent`` labels a fresh id, ``<name>-session-<uuid4>``:
        what takes an agent id uses this to tell a name passed for one.
        """
        if name in self._agents:
            return None
        ids = self._labelled.get(name)
        return None if not ids else next(iter(ids))

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
        label = label_of(agent.id)
        if label is not None:
            self._labelled.setdefault(label, {})[agent.id] = None

    def _remove(self, agent_id: str) -> None:
        """Forget *agent_id*, as its runtime tears it down."""
        if self._agents.pop(agent_id, None) is None:
            return
        label = label_of(agent_id)
        if label is None or label not in self._labelled:
            return
        ids = self._labelled[label]
        ids.pop(agent_id, None)
        if not ids:
            del self._labelled[label]
