"""Reconstructable requests: which header event each request owes the log (SPEC 8; T-R1, T-L8)."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import trio
import trio.testing

import retinue
from retinue import Message, Text
from retinue.prompt import Section
from retinue.session import RequestHeader, RequestHeaderDelta, apply_delta
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import OPTIONS, Next, echo, of_type, runtime
from tests.scenarios._request_log_kit import assert_requests_rebuild, header_events


@retinue.tool
async def zeta(text: str) -> str:
    """A tool whose name sorts last.

    Args:
        text: Anything.
    """
    await trio.lowlevel.checkpoint()
    return text


@retinue.tool
async def aardvark(text: str) -> str:
    """A tool whose name sorts first.

    Args:
        text: Anything.
    """
    await trio.lowlevel.checkpoint()
    return text


# -- T-R1: which header event is owed ---------------------------------------------------


async def test_request_header_initial_then_silence_while_unchanged(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-R1, T-R2 / R8.4: the first request logs ``initial``; unchanged later requests log nothing."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("echo", '{"text": "x"}')]), Reply("a"), Reply("b")]
    )
    async with runtime(model, tools=[echo], system_prompt="Stable prompt.") as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("one")
        await agent.ask("two")
        events = agent.session.events
        headers = header_events(events)
        assert len(headers) == 1
        assert isinstance(headers[0].data, RequestHeader)
        assert headers[0].data.reason == "initial"
        assert len(of_type(events, "step/start")) == 3
        step_start = of_type(events, "step/start")[0]
        assert headers[0].seq == step_start.seq + 1
        assert_requests_rebuild(events, model.requests)


async def test_request_header_fresh_driver_anchors_with_resume(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-R1, T-R2 / R8.4, R8.6, R11.16: a new driver over an anchored log logs ``resume`` even if nothing changed.

    The resumed driver recomposes the session prefix, and its requests rebuild from the log too.
    """
    model = ScriptedModel([Reply("first"), Reply("second"), Reply("third")])
    async with runtime(model, system_prompt="Same prompt.") as rt:
        compositions = 0

        async def prefix(
            _agent: object, _seed: object, _signal: object, next_: Next
        ) -> list[Message]:
            nonlocal compositions
            compositions += 1
            return [Message("user", (Text("PREFIX"),)), *await next_()]

        rt.hooks.on("agent/session-prefix", prefix)
        agent = await rt.create_agent("a", OPTIONS, session_id="anchored")
        await agent.ask("one")
        before = agent.session.current_header
        await agent.dispose()
        again = await rt.resume_agent("anchored", OPTIONS)
        result = await again.ask("two")
        assert result.turn == 2
        await again.ask("three")
        headers = header_events(again.session.events)
        reasons = [e.data.reason for e in headers if isinstance(e.data, RequestHeader)]
        assert reasons == ["initial", "resume"]
        assert len(headers) == 2
        assert headers[1].data.header == before  # type: ignore[union-attr]
        assert compositions == 2
        assert_requests_rebuild(again.session.events, model.requests)
        check_session_invariants(again.session.events)


async def test_request_resumed_driver_without_a_model_continues_with_the_stored_config(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.32, R11.16: a resumed driver's first request takes its model from its options; resumed
    without one, it continues with the stored header's config rather than failing for want of one."""
    model = ScriptedModel([Reply("first"), Reply("second"), Reply("third")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="stored")
        await agent.ask("one")
        await agent.dispose()
        bare = await rt.resume_agent("stored")
        assert (await bare.ask("two")).reason.kind == "completed"
        await bare.dispose()
        switched = await rt.resume_agent("stored", retinue.AgentOptions(model="other"))
        assert (await switched.ask("three")).reason.kind == "completed"
        assert [request.model for request in model.requests] == [OPTIONS.model] * 2 + ["other"]
        check_session_invariants(switched.session.events)


async def test_request_header_model_switch_is_a_round_tripping_delta(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L8, T-R1 / R8.4, R8.5, R7.32: an ``agent/request`` model switch logs a config delta; the fold keeps it."""
    model = ScriptedModel([Reply("a"), Reply("b"), Reply("c")])
    async with runtime(model, tools=[echo], system_prompt="Prompt.") as rt:
        agent = await rt.create_agent("a", OPTIONS)
        seeds: list[str] = []

        async def switch(_agent: object, turn: int, _step: int, config: Any, next_: Next) -> Any:
            seeds.append(config.model)
            chosen = await next_()
            return attrs.evolve(chosen, model="bigger", temperature=0.5) if turn == 2 else chosen

        rt.hooks.on("agent/request", switch, agent=agent)
        await agent.ask("one")
        fold_before = agent.session.current_header
        await agent.ask("two")
        await agent.ask("three")
        headers = header_events(agent.session.events)
        assert [e.type for e in headers] == ["request/header", "request/header-delta"]
        delta = headers[1].data
        assert isinstance(delta, RequestHeaderDelta)
        assert delta.system is None
        assert delta.tools is None
        assert delta.message_prefix is None
        assert delta.config is not None
        assert delta.config.model == "bigger"
        assert fold_before is not None
        assert apply_delta(fold_before, delta) == agent.session.current_header
        assert [r.model for r in model.requests] == ["scripted", "bigger", "bigger"]
        assert seeds == ["scripted", "scripted", "bigger"]
        assert model.requests[2].temperature == 0.5
        assert_requests_rebuild(agent.session.events, model.requests)


async def test_request_header_system_prompt_change_alone_is_a_system_delta(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-R1 / R8.4: a system prompt that changes while config and tools stay put logs a system delta."""
    model = ScriptedModel([Reply("a"), Reply("b"), Reply("c")])
    async with runtime(model, system_prompt="Prompt.") as rt:
        agent = await rt.create_agent("a", OPTIONS)
        turns = itertools.count(1)

        async def assemble(_agent: object, _base: Any, next_: Next) -> Any:
            base = await next_()
            number = next(turns)
            if number == 1:
                return base
            return attrs.evolve(base, sections=(*base.sections, Section("turn", f"Turn {number}.")))

        rt.hooks.on("system-prompt/assemble", assemble, agent=agent)
        for prompt in ("one", "two", "three"):
            await agent.ask(prompt)
        headers = header_events(agent.session.events)
        assert [e.type for e in headers] == [
            "request/header",
            "request/header-delta",
            "request/header-delta",
        ]
        deltas = [e.data for e in headers[1:] if isinstance(e.data, RequestHeaderDelta)]
        assert [(d.config, d.tools, d.message_prefix) for d in deltas] == [(None, None, None)] * 2
        assert all(d.system is not None for d in deltas)
        assert [request.system for request in model.requests] == [
            "Prompt.",
            "Prompt.\n\nTurn 2.",
            "Prompt.\n\nTurn 3.",
        ]
        fold = agent.session.current_header
        assert fold is not None
        assert fold.system == "Prompt.\n\nTurn 3."
        assert_requests_rebuild(agent.session.events, model.requests)


async def test_request_header_added_tool_is_a_tools_delta(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-R1 / R8.5: a scoped tool added between turns, appended in canonical order, logs a tools delta."""
    model = ScriptedModel([Reply("a"), Reply("b"), Reply("c")])
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("one")
        remove = rt.tools.add(zeta, agent=agent)
        await agent.ask("two")
        remove()
        await agent.ask("three")
        headers = header_events(agent.session.events)
        assert [e.type for e in headers] == [
            "request/header",
            "request/header-delta",
            "request/header-delta",
        ]
        added, removed = headers[1].data, headers[2].data
        assert isinstance(added, RequestHeaderDelta)
        assert isinstance(removed, RequestHeaderDelta)
        assert added.tools is not None
        assert [t.name for t in added.tools.added] == ["zeta"]
        assert removed.tools is not None
        assert removed.tools.removed == ("zeta",)
        assert added.config is None
        assert added.system is None
        assert [[t.name for t in r.tools] for r in model.requests] == [
            ["echo"],
            ["echo", "zeta"],
            ["echo"],
        ]
        assert_requests_rebuild(agent.session.events, model.requests)


async def test_request_header_reordering_tools_falls_back_to_a_full_header(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-R1 / R8.4 case 4: a tool that sorts before the others cannot be appended by a delta → ``fallback``."""
    model = ScriptedModel([Reply("a"), Reply("b")])
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("one")
        rt.tools.add(aardvark, agent=agent)
        await agent.ask("two")
        headers = header_events(agent.session.events)
        reasons = [e.data.reason for e in headers if isinstance(e.data, RequestHeader)]
        assert reasons == ["initial", "fallback"]
        assert [t.name for t in model.requests[1].tools] == ["aardvark", "echo"]
        assert_requests_rebuild(agent.session.events, model.requests)
