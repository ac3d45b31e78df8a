"""A teardown step that fails is contained: the rest of the teardown runs, and so does
the runtime (SPEC R12.9; DESIGN 4: supervisors contain failures).

No public input makes a teardown step fail, so the test breaks one, as the
supervision tests break a status change.
"""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

import retinue
from retinue.actors import Agent
from retinue.loop import AgentCore
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime


class TeardownBugError(RuntimeError):
    """The simulated bug."""


# A step early in the teardown and the last one: every step after a failing one runs.
STEPS = [(AgentCore, "emit"), (Agent, "_end_subscriptions")]


def break_teardown_of(
    monkeypatch: pytest.MonkeyPatch, agent_id: str, owner: type[object], step: str
) -> None:
    """Make the teardown of *agent_id* fail at *owner*'s method *step* (its emit of
    ``agent/disposed``, for ``emit``)."""
    real = getattr(owner, step)

    def broken(self: Agent | AgentCore, *args: object) -> None:
        if self.id == agent_id and args[:1] in ((), ("agent/disposed",)):
            raise TeardownBugError(f"teardown bug in {agent_id}")
        real(self, *args)

    monkeypatch.setattr(owner, step, broken)


@pytest.mark.parametrize(("owner", "step"), STEPS, ids=[step for _, step in STEPS])
async def test_a_failing_teardown_step_is_contained_and_the_rest_runs(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    owner: type[object],
    step: str,
) -> None:
    """R12.9: the failure is logged, the agent still leaves the registry and its session the store,
    and the other agents serve on: the failure does not end the runtime's nursery and every agent in
    it, nor leave the session attached."""
    break_teardown_of(monkeypatch, "victim", owner, step)
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True)) as rt:
        other = await rt.create_agent("other", OPTIONS)
        victim = await rt.create_agent("victim", OPTIONS, session_id="victim")
        await victim.ask("hello")
        disposed: list[str] = []
        rt.hooks.on("agent/disposed", lambda agent: disposed.append(agent.id))
        cleaned: list[str] = []
        rt.scoped(victim, lambda: cleaned.append("victim"))
        feed = victim.subscribe()
        with caplog.at_level(logging.ERROR, logger="retinue.supervisors"):
            await victim.dispose()
        assert "teardown of agent victim failed (contained)" in caplog.text
        assert disposed == ([] if step == "emit" else ["victim"])
        assert cleaned == ["victim"]
        if step != "_end_subscriptions":
            with trio.fail_after(5):
                _ = [event async for event in feed]  # ends, not left waiting
        assert rt.agents.list() == [other]
        assert (await other.ask("still there?")).reason.kind == "completed"
        again = await rt.resume_agent("victim", OPTIONS)  # let go by the store
        assert again.session.events[-1].seq == victim.session.events[-1].seq


@retinue.tool(name="private")
async def private_tool() -> str:
    """A tool of one agent."""
    return "private"


async def test_ctrl_c_from_a_hook_watcher_in_a_teardown_leaves_nothing_of_the_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: a watcher raising Ctrl-C as the agent's scoped listener is dropped does not keep its
    scoped tool registered or its cleanups from running; Ctrl-C is raised after both."""
    cleaned: list[str] = []
    left: list[object] = []

    async def dispose_with_a_watcher_interrupting() -> None:
        async with runtime(ScriptedModel([Reply("ok")], repeat_last=True)) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            rt.hooks.on("agent/retry", lambda *_args: None, agent=agent)
            rt.tools.add(private_tool, agent=agent)
            rt.scoped(agent, lambda: cleaned.append("a"))

            def watcher() -> None:
                if not rt.hooks.has_listeners("agent/retry"):
                    raise KeyboardInterrupt

            rt.hooks.watch("agent/retry", watcher)
            try:
                await agent.dispose()
            finally:
                left.append(rt.tools.get("private", agent.id))

    with pytest.raises(KeyboardInterrupt):
        await dispose_with_a_watcher_interrupting()
    assert cleaned == ["a"]
    assert left == [None]
