"""Reconstructable requests: what reaches the model is what the log says, rebuilt from it
byte for byte, and frozen against adapters and listeners (SPEC 8; T-R2).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from retinue import Message, MessageSource, Text
from retinue._request import MessageHistory, ModelRequest
from retinue.session import ContextMessage, Event, Replace, RequestHeader
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
from tests.helpers import OPTIONS, Next, echo, runtime
from tests.scenarios._request_log_kit import assert_requests_rebuild, header_events

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


async def test_request_rebuild_check_not_following_a_runtime_fails_naming_follow(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R8.9: an agent's request reaching a checker that follows no runtime fails naming
    ``follow``: a test asserting on ``failures`` alone cannot pass having checked nothing."""
    model = ScriptedModel([Reply("one")])
    checked = RebuildCheckedModel(model)
    with trio.fail_after(60):
        async with runtime(checked) as rt:
            agent = await rt.create_agent("a", OPTIONS, session_id="unfollowed")
            result = await agent.ask("hello")
    assert (result.reason.kind, checked.checked) == ("error", 0)
    [failure] = checked.failures
    assert "'unfollowed'" in str(failure)
    assert "model.follow(rt)" in str(failure)
    assert result.reason.message is not None
    assert "model.follow(rt)" in result.reason.message
    assert model.requests == []


async def test_request_rebuild_check_fails_a_request_of_a_runtime_it_does_not_follow(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R8.9: a checker shared by two runtimes but following one fails the other's requests,
    naming the session: they would go unchecked, and ``failures == []`` pass having checked
    only some."""
    model = ScriptedModel([Reply("one")], repeat_last=True)
    checked = RebuildCheckedModel(model)
    with trio.fail_after(60):
        async with runtime(checked) as followed, runtime(checked) as other:
            checked.follow(followed)
            mine = await followed.create_agent("a", OPTIONS)
            theirs = await other.create_agent("b", OPTIONS, session_id="elsewhere")
            assert (await mine.ask("hello")).reason.kind == "completed"
            result = await theirs.ask("hello")
    assert (result.reason.kind, checked.checked) == ("error", 1)
    [failure] = checked.failures
    assert "'elsewhere'" in str(failure)
    assert "a RebuildCheckedModel of its own" in str(failure)
    assert len(model.requests) == 1
