"""A teardown step that fails is contained: the rest of the teardown runs, and so does
the runtime (SPEC R12.9; DESIGN 4: supervisors contain failures).

No public input makes a teardown step fail, so the test breaks the one that ends
the agent's subscriptions, as the supervision tests break a status change.
"""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from retinue.actors import Agent
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime


class TeardownBugError(RuntimeError):
    """The simulated bug."""


def break_teardown_of(monkeypatch: pytest.MonkeyPatch, agent_id: str) -> None:
    """Make the teardown of *agent_id* fail as it ends the agent's subscriptions."""
    real = Agent._end_subscriptions

    def end_subscriptions(self: Agent) -> None:
        if self.id == agent_id:
            raise TeardownBugError(f"teardown bug in {agent_id}")
        real(self)

    monkeypatch.setattr(Agent, "_end_subscriptions", end_subscriptions)


async def test_a_failing_teardown_step_is_contained_and_the_rest_runs(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R12.9: the failure is logged, the agent still leaves the registry and its session
    the store, and the other agents serve on, where the failure ended the runtime's
    nursery, every agent in it, and left the session attached."""
    break_teardown_of(monkeypatch, "victim")
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True)) as rt:
        other = await rt.create_agent("other", OPTIONS)
        victim = await rt.create_agent("victim", OPTIONS, session_id="victim")
        await victim.ask("hello")
        disposed: list[str] = []
        rt.hooks.on("agent/disposed", lambda agent: disposed.append(agent.id))
        with caplog.at_level(logging.ERROR, logger="retinue.supervisors"):
            await victim.dispose()
        assert "teardown of agent victim failed (contained)" in caplog.text
        assert disposed == ["victim"]
        assert rt.agents.list() == [other]
        assert (await other.ask("still there?")).reason.kind == "completed"
        again = await rt.resume_agent("victim", OPTIONS)  # let go by the store
        assert again.session.events[-1].seq == victim.session.events[-1].seq
