"""The session-start, session-prefix and turn-continuation interception seams end to end
(SPEC 6, R7.11-R7.37; T-I2..T-I4).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import Continue, HookContext, Message, MessageSource, Stop
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import OPTIONS, Next, of_type, runtime
from tests.scenarios._interception_kit import note, prefix_message, request_texts

# -- T-I2 session-start -------------------------------------------------------


async def test_session_start_fires_once_and_can_seed_context(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I2 / R6.10, R7.3: session-start fires once with ``startup``; its inject is seen by the first request."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        starts: list[tuple[str, str, int]] = []

        def on_start(agent: retinue.Agent, source: str) -> None:
            starts.append((agent.id, source, len(agent.session.events)))
            agent.inject("you are in a test", source="seed")

        rt.hooks.on("agent/session-start", on_start)
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("first")
        await agent.ask("second")
        assert starts == [(agent.id, "startup", 0)]
        first = request_texts(model.requests[0].messages)
        assert first == ['<context source="plugin">you are in a test</context>', "first"]
        starts_of_turns = of_type(agent.session.events, "turn/start")
        assert [e.data.trigger.kind for e in starts_of_turns] == ["injection", "message", "message"]  # type: ignore[union-attr]
        check_session_invariants(agent.session.events)


async def test_session_start_raising_listener_does_not_abort_creation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I2 / R6.2 table: a raising session-start listener is contained; the agent is created and works."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        heard: list[str] = []

        def raising(_agent: retinue.Agent, _source: str) -> None:
            raise RuntimeError("plugin crashed")

        rt.hooks.on("agent/session-start", raising)
        rt.hooks.on("agent/session-start", lambda _agent, source: heard.append(source))
        agent = await rt.create_agent("a", OPTIONS)
        assert rt.agents.get(agent.id) is agent
        assert heard == ["startup"]
        assert (await agent.ask("hi")).reason.kind == "completed"


# -- T-I3 session-prefix ------------------------------------------------------


async def test_session_prefix_composed_once_fronts_every_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I3 / R7.18, R8.6: composed once per driver, in front of every request, recorded in the header only."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("note", '{"text": "x"}')]), Reply("one"), Reply("two")]
    )
    async with runtime(model, tools=[note]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        calls: list[str] = []
        pre_step_prefixes: list[tuple[Message, ...]] = []

        async def prefix(
            _agent: retinue.Agent, seed: object, _signal: object, proceed: Next
        ) -> Any:
            calls.append("prefix")
            assert seed == ()
            with pytest.raises(AttributeError):
                seed.append(prefix_message("into the seed"))  # type: ignore[attr-defined]
            return [prefix_message("project facts"), *await proceed()]  # type: ignore[misc]

        def pre_step(
            _agent: retinue.Agent,
            _turn: int,
            _step: int,
            _system: str,
            prefix: object,
            _sig: object,
        ) -> None:
            calls.append("pre-step")
            pre_step_prefixes.append(tuple(prefix))  # type: ignore[call-overload,arg-type]

        rt.hooks.on("agent/session-prefix", prefix, agent=agent)
        rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        await agent.ask("first")
        await agent.ask("second")
        assert calls == ["prefix", "pre-step", "pre-step", "pre-step"]
        assert pre_step_prefixes == [(prefix_message("project facts"),)] * 3
        assert len(model.requests) == 3
        for request in model.requests:
            assert request.messages[0] == prefix_message("project facts")
        assert all(
            "project facts" not in text for text in request_texts(agent.session.derive_messages())
        )
        headers = of_type(agent.session.events, "request/header")
        assert len(headers) == 1
        assert headers[0].data.header.message_prefix == (prefix_message("project facts"),)  # type: ignore[union-attr]
        assert of_type(agent.session.events, "request/header-delta") == []
        check_session_invariants(agent.session.events)


async def test_session_prefix_prepend_idiom_keeps_registration_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I3 / R8.7: ``[mine, *await next()]`` puts the first-registered listener's message first."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def contributor(text: str) -> Callable[..., Awaitable[object]]:
            async def prefix(
                _agent: retinue.Agent, _seed: object, _signal: object, proceed: Next
            ) -> object:
                return [prefix_message(text), *await proceed()]  # type: ignore[misc]

            return prefix

        for text in ("first plugin", "second plugin", "third plugin"):
            rt.hooks.on("agent/session-prefix", contributor(text), agent=agent)  # type: ignore[call-overload]
        await agent.ask("hi")
        assert request_texts(model.requests[0].messages) == [
            "first plugin",
            "second plugin",
            "third plugin",
            "hi",
        ]


async def test_session_prefix_absent_is_omitted_from_the_header(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I3 / R8.2: with no prefix listener the header has no prefix, in memory and in the dumped JSON."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("hi")
        header = of_type(agent.session.events, "request/header")[0].data.header  # type: ignore[union-attr]
        assert header.message_prefix == ()
        assert request_texts(model.requests[0].messages) == ["hi"]
        dumped = next(d for d in agent.session.dump() if d["type"] == "request/header")
        assert "message_prefix" not in dumped["data"]["header"]  # type: ignore[index]


async def test_session_prefix_cache_is_immune_to_listener_held_mutation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I3 / R7.18: the cached prefix is a copy; mutating the list a listener returned changes nothing."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        held: list[Message] = []

        def prefix(
            _agent: retinue.Agent, _seed: object, _signal: object, _proceed: Next
        ) -> list[Message]:
            held.append(prefix_message("original"))
            return held

        rt.hooks.on("agent/session-prefix", prefix, agent=agent)
        await agent.ask("first")
        held.append(prefix_message("smuggled"))
        held[0] = prefix_message("tampered")
        await agent.ask("second")
        assert request_texts(model.requests[1].messages)[:1] == ["original"]
        assert "smuggled" not in request_texts(model.requests[1].messages)
        assert of_type(agent.session.events, "request/header-delta") == []


# -- T-I4 continuation --------------------------------------------------------


async def test_continuation_reason_becomes_steering_of_the_next_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I4 / R6.7, R7.27: ``Continue(reason)`` runs another step in the same turn with the reason as steering."""
    model = ScriptedModel([Reply("draft"), Reply("final")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        decisions: list[object] = []

        async def continuation(
            _agent: retinue.Agent, turn: int, default: object, proceed: Next
        ) -> Any:
            decisions.append(default)
            if len(decisions) == 1:
                return Continue(HookContext("check your work", MessageSource("plugin", "critic")))
            return await proceed()

        rt.hooks.on("agent/turn-continuation", continuation, agent=agent)
        result = await agent.ask("write")
        events = agent.session.events
        assert decisions == [Stop(), Stop()]
        assert (result.reason.kind, result.text) == ("completed", "final")
        assert len(of_type(events, "turn/start")) == 1
        assert len(of_type(events, "step/start")) == 2
        steering = of_type(events, "steering/message")[0]
        assert steering.data.turn == 1  # type: ignore[union-attr]
        assert steering.data.source == MessageSource("plugin", "critic")  # type: ignore[union-attr]
        step_starts = [e.seq for e in of_type(events, "step/start")]
        assert step_starts[0] < steering.seq < step_starts[1]
        assert request_texts(model.requests[1].messages) == [
            "write",
            "draft",
            '<steering source="plugin">check your work</steering>',
        ]
        check_session_invariants(events)


async def test_continuation_stop_wins_over_tool_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-I4 / R6.7, R7.26: ``Stop`` ends the turn even though the step had tool calls (their results stay)."""
    model = ScriptedModel([CallTools([ToolCallSpec("note", '{"text": "x"}')]), Reply("unused")])
    async with runtime(model, tools=[note]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        defaults: list[object] = []

        def continuation(
            _agent: retinue.Agent, _turn: int, default: object, _proceed: Next
        ) -> Stop:
            defaults.append(default)
            return Stop()

        rt.hooks.on("agent/turn-continuation", continuation, agent=agent)
        result = await agent.ask("go")
        events = agent.session.events
        assert defaults == [Continue()]
        assert result.reason.kind == "completed"
        assert len(of_type(events, "step/start")) == 1
        assert len(of_type(events, "tool/result")) == 1
        assert model.statistics().calls == 1
        check_session_invariants(events)
