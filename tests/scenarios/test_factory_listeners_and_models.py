"""Scoped listeners over an agent's life, status listeners at disposal, and the model and
sources an agent runs with (SPEC 12; T-F8, T-X5, T-X6).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, MessageSource, ModelRouter
from retinue.testing import Hang, Reply, ScriptedModel, check_session_invariants
from tests.helpers import OPTIONS, of_type, record_statuses, runtime, texts, turn_ends

# -- T-F8 scoped listeners ----------------------------------------------------


async def test_scoped_listeners_hear_only_their_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F8 / R6.5: a listener scoped to one agent hears none of another agent's dispatches."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        first = await rt.create_agent("a", OPTIONS)
        second = await rt.create_agent("b", OPTIONS)
        heard: list[str] = []

        async def submit(
            agent: retinue.Agent, _content: object, _source: object, proceed: object
        ) -> Any:
            heard.append(f"prompt-submit {agent.id}")
            return await proceed()  # type: ignore[operator]

        rt.hooks.on(
            "agent/status", lambda agent, _status: heard.append(f"status {agent.id}"), agent=first
        )
        rt.hooks.on(
            "session/event",
            lambda session, _event: heard.append(f"event {session.id}"),
            agent=first,
        )
        rt.hooks.on("agent/prompt-submit", submit, agent=first.id)
        await second.ask("not for you")
        assert heard == []
        await first.ask("for you")
        assert {entry.split(" ")[1] for entry in heard} == {first.id}
        assert f"prompt-submit {first.id}" in heard


async def test_setup_scoped_listeners_precede_session_start_and_die_with_the_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F8 / R12.5, R12.9: listeners registered in setup hear session-start and are removed at disposal."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        heard: list[str] = []

        def setup(agent: retinue.Agent) -> None:
            for name in ("agent/session-start", "agent/pre-step"):
                remove = rt.hooks.on(
                    name, lambda _agent, *_args, name=name: heard.append(name), agent=agent
                )
                rt.scoped(agent, remove)

        agent = await rt.create_agent("a", OPTIONS, setup=setup)
        await agent.ask("hi")
        assert heard == ["agent/session-start", "agent/pre-step"]
        await agent.dispose()
        assert not rt.hooks.has_listeners("agent/session-start")
        assert not rt.hooks.has_listeners("agent/pre-step")


async def test_agent_scoped_listeners_die_with_their_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F8 / R6.5, R12.9: a listener scoped to an agent handle does not outlive it (not even into a resume)."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="s")
        heard = record_statuses(rt, agent)
        await agent.ask("hi")
        await agent.dispose()
        heard.clear()
        resumed = await rt.resume_agent("s", OPTIONS)
        await resumed.ask("again")
        assert heard == []
        assert not rt.hooks.has_listeners("agent/status")


# -- T-X5, T-X6 ----------------------------------------------------------------


async def test_dispose_survives_raising_status_listeners(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X5 / R2.35: a raising ``disposed`` status listener breaks neither disposal nor registry removal."""
    async with runtime(ScriptedModel([Hang()])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        gone: list[str] = []

        def raising(_agent: retinue.Agent, status: str) -> None:
            raise RuntimeError(f"status listener broke on {status}")

        rt.hooks.on("agent/status", raising, agent=agent)
        rt.hooks.on("agent/disposed", lambda a: gone.append(a.id), agent=agent)
        agent.send("go")
        await trio.sleep(1)
        await agent.dispose()
        assert agent.status == "disposed"
        assert turn_ends(agent.session.events) == ["disposed"]
        assert rt.agents.get(agent.id) is None
        assert gone == [agent.id]
        check_session_invariants(agent.session.events)


async def test_model_less_agent_fails_with_a_clear_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X6 / R2.8, R7.33: no model is an ``error`` turn naming the agent and both ways to supply one."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", AgentOptions(), session_id="no-model")
        errors: list[BaseException] = []
        rt.hooks.on(
            "agent/error", lambda _a, _turn, _step, error: errors.append(error), agent=agent
        )
        result = await agent.ask("hi")
        assert (result.reason.kind, result.reason.step) == ("error", 1)
        message = result.reason.message or ""
        assert "no-model" in message
        assert "AgentOptions(model=" in message
        assert "agent/request" in message
        assert len(errors) == 1
        assert model.statistics().calls == 0
        check_session_invariants(agent.session.events)


async def test_agent_request_listener_can_supply_the_model(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X6 / R2.8, R7.33: an ``agent/request`` listener returning a config with a model makes it work."""
    import attrs

    model = ScriptedModel({"picked": [Reply("ok")]})
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", AgentOptions())

        async def choose(
            _agent: retinue.Agent, _turn: int, _step: int, config: object, proceed: object
        ) -> Any:
            seed = await proceed()  # type: ignore[operator]
            return attrs.evolve(seed, model="picked")

        rt.hooks.on("agent/request", choose, agent=agent)
        result = await agent.ask("hi")
        assert result.reason.kind == "completed"
        assert model.requests[0].model == "picked"
        header = of_type(agent.session.events, "request/header")[0].data.header  # type: ignore[union-attr]
        assert header.config.model == "picked"


async def test_queued_notification_carries_the_resolved_source(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X6 / R1.3, R2.10: ``agent/queued`` reports the resolved source, never ``None``."""
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        queued: list[tuple[str, MessageSource, bool]] = []
        rt.hooks.on(
            "agent/queued",
            lambda _a, content, info: queued.append(
                (texts(content), info["source"], info["steering"])
            ),
            agent=agent,
        )
        agent.send("from the user")
        agent.send("from a plugin", source="reminders")
        await agent.wait_idle()
        assert queued == [
            ("from the user", MessageSource("user"), False),
            ("from a plugin", MessageSource("plugin", "reminders"), False),
        ]
        sources = [e.data.source for e in of_type(agent.session.events, "user/message")]  # type: ignore[union-attr]
        assert sources == [MessageSource("user"), MessageSource("plugin", "reminders")]


def test_duplicate_adapter_registration_is_refused() -> None:
    """T-X6 / R10.7: registering a second adapter for a model name fails all-or-nothing."""
    router = ModelRouter()
    router.add(ScriptedModel([Reply("a")]), "m1")
    with pytest.raises(retinue.ModelError) as raised:
        router.add(ScriptedModel([Reply("b")]), "m2", "m1")
    assert raised.value.code == "DUPLICATE_ADAPTER"
    assert sorted(name for _provider, name in router.routes) == ["m1"]
