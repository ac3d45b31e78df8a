"""User code raising a ``trio.Cancelled`` of its own (a listener, the model, the store, an
observer, a cleanup) fails what it was part of, never the agent or the runtime (R7.48)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue.providers import ModelRequest, StreamChunk
from retinue.session import Event, ToolResultEvent
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    DelegatingStore,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import (
    OPTIONS,
    echo,
    idle_events,
    kept_stray_cancelled,
    last_end_reason,
    of_type,
    raise_stray_cancelled,
    runtime,
    texts,
)


async def test_agent_request_listener_raising_stray_cancelled_fails_the_turn_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.48: the turn ends with an error naming the misuse, ``agent/error`` reports it, and the
    agent serves its next turn (it is not logged disposed and torn down)."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors: list[BaseException] = []
        rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error), agent=agent)

        async def on_request(*args: object) -> Any:
            await raise_stray_cancelled()
            raise AssertionError("not reached")

        unregister = rt.hooks.on("agent/request", on_request, agent=agent)
        first = await agent.ask("go")
        assert (first.reason.kind, first.reason.code) == ("error", "STRAY_CANCELLED")
        assert [getattr(error, "code", None) for error in errors] == ["STRAY_CANCELLED"]
        assert agent.status == "idle"
        unregister()
        second = await agent.ask("again")
        assert second.reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_pre_execute_listener_raising_stray_cancelled_fails_the_call_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.48, docs/hooks.md: a failing tools/pre-execute listener makes the call's result
    an error and the turn goes on."""
    model = ScriptedModel([CallTools([ToolCallSpec("echo", '{"text": "x"}')]), Reply("done")])
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def on_pre_execute(*args: object) -> Any:
            await raise_stray_cancelled()
            raise AssertionError("not reached")

        rt.hooks.on("tools/pre-execute", on_pre_execute, agent=agent)
        result = await agent.ask("go")
        events = await idle_events(agent)
        assert result.reason.kind == "completed"
        assert last_end_reason(events).kind == "completed"
        [logged] = of_type(events, "tool/result")
        assert isinstance(logged.data, ToolResultEvent)
        assert logged.data.is_error
        assert "trio.Cancelled" in texts(logged.data.content)
        check_session_invariants(events)


async def test_a_real_cancel_still_reaches_a_listener_and_ends_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.40: a Cancelled from a cancel of the agent is not a listener's failure."""
    model = ScriptedModel([Reply("never")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        entered = trio.Event()

        async def on_request(*args: object) -> Any:
            entered.set()
            await trio.sleep_forever()

        rt.hooks.on("agent/request", on_request, agent=agent)
        agent.send("go")
        await entered.wait()
        agent.cancel("stop")
        events = await idle_events(agent)
        assert last_end_reason(events).kind == "aborted"


class _StrayModel:
    """Streams as *model* does, but the first stream raises a stray ``Cancelled``."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model, self.strays = model, 1

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        chunks = self.model.stream(request)
        try:
            async for chunk in chunks:
                yield chunk
                if self.strays:
                    self.strays -= 1
                    await raise_stray_cancelled()
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]


async def test_a_model_stream_raising_stray_cancelled_fails_the_turn_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.36, R7.48: the model's own Cancelled ends its turn as an error naming the misuse, reported
    on ``agent/error``; the agent is not logged disposed and torn down."""
    model = _StrayModel(ScriptedModel([Reply("partial answer")], repeat_last=True))
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors: list[BaseException] = []
        rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error), agent=agent)
        first = await agent.ask("go")
        assert (first.reason.kind, first.reason.code) == ("error", "STRAY_CANCELLED")
        assert "the model stream raised trio.Cancelled" in (first.reason.message or "")
        assert [(type(error), getattr(error, "code", None)) for error in errors] == [
            (retinue.ModelError, "STRAY_CANCELLED")
        ]
        assert agent.status == "idle"
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def _raise_stray(*, grouped: bool) -> None:
    """Raise a stray ``Cancelled``, bare or in the group of a nursery the store opened."""
    if grouped:
        raise BaseExceptionGroup("nursery", [await kept_stray_cancelled()])
    await raise_stray_cancelled()


class _StrayFlushStore(DelegatingStore):
    """Its first flush raises a stray ``Cancelled``; durable or not as the test asks."""

    strays = 1
    grouped = False

    async def flush(self, session: retinue.Session) -> None:
        if self.strays:
            self.strays -= 1
            await _raise_stray(grouped=self.grouped)
        await self.store.flush(session)


@pytest.mark.parametrize("grouped", [False, True], ids=["bare", "grouped"])
@pytest.mark.parametrize(
    ("durable", "listened"),
    [(True, False), (False, False), (True, True)],
    ids=["deadline-bound", "in-memory", "beside-flush-listeners"],
)
async def test_a_store_flush_raising_stray_cancelled_is_reported_not_a_disposal(
    autojump_clock: trio.testing.MockClock, durable: bool, listened: bool, grouped: bool
) -> None:
    """R7.49, R4.23: a failed end-of-turn flush is reported on ``agent/error`` and the turn keeps
    its end; the agent is not silently disposed, its ``ask`` answered ``disposed`` against a log
    that says ``completed``. Every flush path: bound by the deadline, in memory, and beside
    ``session/flush`` listeners, which still run. A stray Cancelled in a group (a nursery of the
    store's) is the same failure."""
    store = _StrayFlushStore(MemoryStore())
    store.durable = durable  # type: ignore[attr-defined]
    store.grouped = grouped
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model, store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors: list[BaseException] = []
        flushed: list[str] = []
        rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error), agent=agent)
        if listened:
            rt.hooks.on("session/flush", lambda _a, s: flushed.append(s.id), agent=agent)
        first = await agent.ask("go")
        assert first.reason.kind == "completed"
        assert last_end_reason(agent.session.events).kind == "completed"
        assert [(type(error), getattr(error, "code", None)) for error in errors] == [
            (retinue.StoreError, "STRAY_CANCELLED")
        ]
        assert "the store's flush raised trio.Cancelled" in str(errors[0])
        assert flushed == ([agent.session.id] if listened else [])
        assert agent.status == "idle"
        assert (await agent.ask("again")).reason.kind == "completed"


@pytest.mark.parametrize("observers", [1, 2])
async def test_a_session_observer_raising_cancelled_fails_the_turn_only(
    autojump_clock: trio.testing.MockClock, observers: int
) -> None:
    """R4.8, R7.48: observers are synchronous, so a Cancelled is their own failure: the
    event stays logged, every observer hears it, and the turn ends as an error."""
    cancelled = await kept_stray_cancelled()
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        heard: list[str] = []
        raised: list[str] = []

        def stray_on_prompt(event: Event) -> None:
            if event.type == "user/message" and not raised:
                raised.append(event.type)
                raise cancelled

        agent.session.observe(stray_on_prompt)
        for _ in range(observers - 1):
            agent.session.observe(lambda event: heard.append(f"other {event.type}"))
        first = await agent.ask("go")
        assert (first.reason.kind, first.reason.code) == ("error", "STRAY_CANCELLED")
        assert "session observer" in (first.reason.message or "")
        assert of_type(agent.session.events, "user/message")
        if observers == 2:
            assert "other user/message" in heard
        assert agent.status == "idle"
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


class _StrayDetachStore(DelegatingStore):
    """Detaching the session named *victim* raises a stray ``Cancelled``."""

    grouped = False

    async def detach(self, session: retinue.Session) -> None:
        if session.id.startswith("victim-"):
            await _raise_stray(grouped=self.grouped)
        await self.store.detach(session)


@pytest.mark.parametrize("grouped", [False, True], ids=["bare", "grouped"])
async def test_a_store_detach_raising_stray_cancelled_leaves_the_runtime_running(
    autojump_clock: trio.testing.MockClock, grouped: bool
) -> None:
    """R12.9: one agent's teardown never fails another; the runtime's nursery is not cancelled,
    which would end every agent's turn and the runtime's body without an error (and, with a stray
    Cancelled in a group of the store's, leave the victim's dispose never ending)."""
    model = ScriptedModel({"scripted": [Reply("ok")]}, repeat_last=True)
    reached: list[str] = []
    store = _StrayDetachStore(MemoryStore())
    store.grouped = grouped
    async with runtime(model, store=store) as rt:
        victim = await rt.create_agent("victim", OPTIONS)
        bystander = await rt.create_agent("bystander", OPTIONS)
        await victim.dispose()
        assert victim.status == "disposed"
        assert (await bystander.ask("go")).reason.kind == "completed"
        late = await rt.create_agent("late", OPTIONS)
        assert (await late.ask("go")).reason.kind == "completed"
        # A cancelled runtime nursery would end this body silently before here.
        reached.append("end of body")
    assert reached == ["end of body"]
    check_session_invariants(bystander.session.events)


class _StrayReleaseStore(DelegatingStore):
    """Once armed, the next detach raises a stray ``Cancelled``."""

    armed = False

    async def detach(self, session: retinue.Session) -> None:
        if self.armed:
            self.armed = False
            await raise_stray_cancelled()
        await self.store.detach(session)


async def test_a_stray_cancelled_giving_back_a_refused_resume_is_logged_not_spread(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R11.15, R12.9: a resume refused after its load gives the claim back; a stray
    ``Cancelled`` from that detach is logged as the store's failure, the refusal is what
    the caller gets, and the runtime's other agents run on."""
    store = _StrayReleaseStore(MemoryStore())
    model = ScriptedModel({"scripted": [Reply("ok")]}, repeat_last=True)
    async with runtime(model, store=store) as rt:
        first = await rt.create_agent("a", OPTIONS, session_id="s", cwd="/old")
        await first.ask("hi")
        await first.dispose()
        store.armed = True
        with pytest.raises(retinue.SessionError) as raised:
            await rt.resume_agent("s", retinue.AgentOptions(model="scripted", cwd="/new"))
        assert raised.value.code == "CWD_MISMATCH"
        assert not store.armed
        assert "releasing session s after a failed resume failed" in caplog.text
        assert "the store's detach raised trio.Cancelled while nothing around it" in caplog.text
        bystander = await rt.create_agent("b", OPTIONS)
        assert (await bystander.ask("go")).reason.kind == "completed"
    check_session_invariants(bystander.session.events)


async def test_a_cleanup_raising_cancelled_is_contained_and_the_others_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: an agent's scoped cleanups are synchronous, so a Cancelled is the cleanup's
    own: logged, and the cleanups after it still run; the runtime goes on."""
    cancelled = await kept_stray_cancelled()

    def stray_cleanup() -> None:
        raise cancelled

    model = ScriptedModel({"scripted": [Reply("ok")]}, repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        cleaned: list[str] = []
        rt.scoped(agent, lambda: cleaned.append("registered first"))
        rt.scoped(agent, stray_cleanup)  # unwound before the first: the last is undone first
        await agent.dispose()
        assert cleaned == ["registered first"]
        other = await rt.create_agent("b", OPTIONS)
        assert (await other.ask("go")).reason.kind == "completed"
