"""Reconstructable requests: header events and rebuilding every request from the log (SPEC 8; T-R1, T-R2, T-L8)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue import Message, MessageSource, Text
from retinue._request import MessageHistory, ModelRequest
from retinue.prompt import Section
from retinue.session import (
    ContextMessage,
    EpochHeader,
    Event,
    Replace,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    SessionHeader,
    apply_delta,
    dump_event,
)
from retinue.testing import (
    CallTools,
    InvariantError,
    RebuildCheckedModel,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_request_rebuild,
    check_session_invariants,
)
from tests.helpers import OPTIONS, Next, echo, of_type, runtime


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


def header_events(events: Sequence[Event]) -> list[Event]:
    """The request/header and request/header-delta events, in order."""
    return [e for e in events if e.type in ("request/header", "request/header-delta")]


def rebuild_requests(events: Sequence[Event]) -> list[tuple[list[Message], EpochHeader]]:
    """Rebuild every step's request from the log alone (R8.8).

    Messages fold the surface over ``events[:seq(step/start)]`` in a fresh
    session; the header folds every header event up to and including the
    step's own (which sits after ``step/start``, before the first chunk).
    """
    rebuilt: list[tuple[list[Message], EpochHeader]] = []
    for index, event in enumerate(events):
        if event.type != "step/start":
            continue
        history = Session.from_events(SessionHeader("rebuild", 0), events[:index]).derive_messages()
        end = index + 1
        while end < len(events) and events[end].type not in (
            "assistant/chunk",
            "assistant/message",
            "step/end",
        ):
            end += 1
        fold = Session.from_events(SessionHeader("rebuild", 0), events[:end]).current_header
        assert fold is not None, f"step at seq {event.seq} has no header"
        rebuilt.append(([*fold.message_prefix, *history], fold))
    return rebuilt


def wire(config: Any, system: str | None, tools: Any, messages: Sequence[Message]) -> str:
    """A canonical JSON text of a request's model-visible parts, through the session codec."""
    header = EpochHeader(config, system, tuple(tools), tuple(messages))
    return json.dumps(dump_event(Event(0, 0, RequestHeader(header, "initial"))), sort_keys=True)


def assert_requests_rebuild(events: Sequence[Event], requests: Sequence[ModelRequest]) -> None:
    """Every recorded request equals, byte for byte, its rebuild from the log (R8.9)."""
    rebuilt = rebuild_requests(events)
    assert len(rebuilt) == len(requests)
    for (messages, header), request in zip(rebuilt, requests, strict=True):
        assert list(request.messages) == messages
        assert request.system == header.system
        assert request.tools == header.tools
        assert request.config == header.config
        assert wire(request.config, request.system, request.tools, request.messages) == wire(
            header.config, header.system, header.tools, messages
        )


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


# -- T-R2: what reaches the model is what the log says -------------------------------------


async def test_request_each_step_extends_the_previous_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-R2 / R8.1: without compaction every request append-extends the one before, across turns."""
    model = ScriptedModel(
        [
            CallTools(
                [ToolCallSpec("echo", '{"text": "a"}'), ToolCallSpec("echo", '{"text": "b"}')]
            ),
            Reply("done"),
            Reply("again"),
        ]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("one")
        agent.inject("fact")
        await agent.ask("two")
        requests = model.requests
        assert len(requests) == 3
        for earlier, later in itertools.pairwise(requests):
            size = len(earlier.messages)
            assert len(later.messages) > size
            assert list(later.messages[:size]) == list(earlier.messages)
        assert_requests_rebuild(agent.session.events, requests)


async def test_request_every_request_rebuilds_byte_equal_from_the_log(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-R2 / R8.8, R8.9, R8.6, R7.18, R7.20: prefix, steering, injects, compaction and switches all rebuild."""
    model = ScriptedModel(
        [
            CallTools([ToolCallSpec("echo", '{"text": "a"}', id="c1")], delay=5),
            Reply("done one"),
            Reply("done two"),
            Reply("done three"),
        ]
    )
    checked = RebuildCheckedModel(model)
    async with runtime(checked, tools=[echo], system_prompt="Identity {{model}}.") as rt:
        checked.follow(rt)
        agent = await rt.create_agent("a", OPTIONS, session_id="rebuilt")
        compositions = 0

        async def prefix(
            _agent: object, seed: Sequence[Message], _signal: object, next_: Next
        ) -> list[Message]:
            nonlocal compositions
            compositions += 1
            assert tuple(seed) == ()
            return [Message("user", (Text(f"PREFIX {compositions}"),)), *await next_()]

        async def request(handle: Any, turn: int, step: int, config: Any, next_: Next) -> Any:
            if (turn, step) == (1, 1):
                handle.inject("injected during agent/request")
            chosen = await next_()
            return attrs.evolve(chosen, model="switched") if turn >= 2 else chosen

        def compact(handle: Any, turn: int, step: int, *_rest: object) -> None:
            if (turn, step) != (2, 1):
                return
            session = handle.session
            first_turn = [
                e
                for e in session.events
                if e.surface_op is not None and _turn_of(session.events, e) == 1
            ]
            seqs = tuple(e.seq for e in first_turn)
            session.append(
                ContextMessage((Text("summary of turn 1"),), MessageSource("plugin", "compactor")),
                surface=Replace(seqs[0], seqs[-1]),
                source_event_seqs=seqs,
            )

        rt.hooks.on("agent/session-prefix", prefix)
        rt.hooks.on("agent/request", request)
        rt.hooks.on("agent/pre-step", compact)
        agent.send("one")
        await trio.sleep(1)
        agent.steer("steer during step 1")
        await agent.wait_idle()
        await agent.ask("two")
        await agent.ask("three")

        events = agent.session.events
        requests = model.requests
        assert len(requests) == 4
        assert_requests_rebuild(events, requests)
        assert (checked.checked, checked.failures) == (4, [])
        check_session_invariants(events)
        assert compositions == 1
        assert all(r.messages[0] == Message("user", (Text("PREFIX 1"),)) for r in requests)
        assert all("PREFIX" not in repr(m) for m in agent.session.derive_messages())
        assert not any("injected during" in repr(m) for m in requests[0].messages)
        assert any("injected during" in repr(m) for m in requests[1].messages)
        assert any("summary of turn 1" in repr(m) for m in requests[2].messages)
        assert not any("done one" in repr(m) for m in requests[2].messages)
        reasons = [
            e.type if not isinstance(e.data, RequestHeader) else e.data.reason
            for e in header_events(events)
        ]
        assert reasons == ["initial", "request/header-delta"]


def _turn_of(events: Sequence[Event], target: Event) -> int:
    turn = 0
    for event in events[: target.seq + 1]:
        if event.type == "turn/start":
            turn = event.data.turn  # type: ignore[union-attr]
    return turn


_MUTATIONS: dict[str, Callable[[ModelRequest], object]] = {
    "system": lambda r: setattr(r, "system", "hacked"),
    "config": lambda r: setattr(r.config, "model", "hacked"),
    "tools": lambda r: setattr(r, "tools", ()),
    "messages": lambda r: r.messages.append(Message("user", (Text("x"),))),  # type: ignore[attr-defined]
    "message": lambda r: setattr(r.messages[0], "content", ()),
    "metadata": lambda r: r.metadata.__setitem__("k", "v"),
    "schema": lambda r: r.tools[0].parameters.__setitem__("k", "v"),
}


@pytest.mark.parametrize("what", sorted(_MUTATIONS))
async def test_request_mutating_the_frozen_request_raises_into_the_step(
    autojump_clock: trio.testing.MockClock, what: str
) -> None:
    """T-R2 / R7.35: an adapter mutating the request fails loudly; the turn ends ``error``, history intact."""
    mutate = _MUTATIONS[what]

    def script(request: ModelRequest) -> Reply:
        if request.messages[-1].content == (Text("mutate"),):
            mutate(request)
        return Reply("fine")

    model = ScriptedModel(script)
    async with runtime(model, tools=[echo], system_prompt="Prompt.") as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("mutate")
        assert result.reason.kind == "error"
        assert result.reason.step == 1
        header = agent.session.current_header
        assert header is not None
        assert header.system == "Prompt."
        assert header.config.model == "scripted"
        assert [t.name for t in header.tools] == ["echo"]
        assert [m.content for m in agent.session.derive_messages()] == [(Text("mutate"),)]
        assert (await agent.ask("next")).reason.kind == "completed"
        assert_requests_rebuild(agent.session.events, model.requests)


async def test_request_listener_cannot_mutate_the_seed_config(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-R2 / R7.32: the seed config is frozen; in-place mutation fails the turn and leaves the fold alone."""
    model = ScriptedModel([Reply("a"), Reply("b")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("one")
        armed = True

        async def mutate(_agent: object, _turn: int, _step: int, config: Any, next_: Next) -> Any:
            if armed:
                config.model = "hijacked"
            return await next_()

        rt.hooks.on("agent/request", mutate, agent=agent)
        result = await agent.ask("two")
        assert result.reason.kind == "error"
        header = agent.session.current_header
        assert header is not None
        assert header.config.model == "scripted"
        assert len(header_events(agent.session.events)) == 1
        armed = False
        assert (await agent.ask("three")).reason.kind == "completed"
        assert model.requests[-1].model == "scripted"
        assert len(header_events(agent.session.events)) == 1


async def test_request_rebuild_check_names_the_part_a_request_changed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R8.9: the shipped dev-mode check refuses a request its log does not rebuild, naming the part."""
    refused: list[str] = []

    def answer(request: ModelRequest) -> Reply:
        session = rt.agents.get("a").session  # type: ignore[union-attr]
        check_request_rebuild(session, request)
        altered = {
            "system": attrs.evolve(request, system="not logged"),
            "config": attrs.evolve(request, config=attrs.evolve(request.config, model="other")),
            "messages": attrs.evolve(request, messages=MessageHistory(request.messages[1:])),
        }
        for part, wrong in altered.items():
            with pytest.raises(InvariantError, match=f"R8.9: .* request's {part} differ") as raised:
                check_request_rebuild(session, wrong)
            refused.append(str(raised.value).split(": ")[1])
        return Reply("one")

    async with runtime(ScriptedModel(answer)) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="a")
        result = await agent.ask("hello")
    assert result.reason.kind == "completed"
    assert len(refused) == 3


async def test_request_rebuild_check_fails_the_call_and_keeps_the_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R8.9: a request its log does not rebuild fails before the model sees it; the turn ends ``error``."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    # Every request is checked against the first agent's log: the second's cannot match it.
    checked = RebuildCheckedModel(model, lambda _session_id: first.session)
    async with runtime(checked) as rt:
        first = await rt.create_agent("first", OPTIONS, session_id="first")
        second = await rt.create_agent("second", OPTIONS, session_id="second")
        assert (await first.ask("hello")).reason.kind == "completed"
        result = await second.ask("bonjour")
    assert result.reason.kind == "error"
    assert checked.checked == 2
    [failure] = checked.failures
    assert "request's messages differ" in str(failure)
    assert len(model.requests) == 1
