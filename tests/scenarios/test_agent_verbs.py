"""The agent handle's verbs and the content and sources they take (SPEC 2; T-A1..T-A6)."""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping, Sequence

import pytest
import trio
import trio.testing

import retinue
from retinue import HookContext, MessageSource
from retinue.session import Event
from retinue.testing import (
    CallTools,
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import (
    OPTIONS,
    idle_events,
    nap,
    of_type,
    runtime,
    texts,
    turn_ends,
    types,
    types_without_chunks,
    user_texts,
)


def turn_starts(events: Sequence[Event]) -> list[tuple[int, str]]:
    """``(turn, trigger kind)`` of every ``turn/start``."""
    return [(e.data.turn, e.data.trigger.kind) for e in of_type(events, "turn/start")]  # type: ignore[union-attr]


async def test_verbs_raise_after_disposal(autojump_clock: trio.testing.MockClock) -> None:
    """T-A1 / R2.37: send, steer and inject raise on a disposed agent and log nothing."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("hello")
        before = len(agent.session.events)
        await agent.dispose()
        with pytest.raises(retinue.AgentDisposedError):
            agent.send("late")
        with pytest.raises(retinue.AgentDisposedError):
            agent.steer("late")
        with pytest.raises(retinue.AgentDisposedError):
            agent.inject("late")
        assert len(agent.session.events) == before
        assert model.statistics().calls == 1


async def test_inject_joins_an_open_turn_read_from_the_log(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-A2 / R2.17: an inject while the log has an open turn lands in that turn and the next request."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def pre_step(agent: retinue.Agent, *_args: object) -> None:
            agent.inject("late context", source="notes")

        rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        await agent.ask("hi")
        events = agent.session.events
        assert turn_starts(events) == [(1, "message")]
        assert types_without_chunks(events)[:4] == [
            "turn/start",
            "user/message",
            "context/message",
            "step/start",
        ]
        context = of_type(events, "context/message")[0].data
        assert context.source == MessageSource("plugin", "notes")  # type: ignore[union-attr]
        request = model.requests[0]
        assert texts(request.messages[0].content) == "hi"
        assert "late context" in texts(request.messages[1].content)
        check_session_invariants(events)


async def test_inject_while_running_without_open_turn_opens_its_own_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-A2 / R2.4, R2.17: status is already ``running`` before ``turn/start``; inject reads the log, not status."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        seen: list[str] = []

        def on_status(agent: retinue.Agent, status: str) -> None:
            seen.append(status)
            if status == "running" and len(seen) == 1:
                agent.inject("before the turn")

        rt.hooks.on("agent/status", on_status, agent=agent)
        await agent.ask("hi")
        events = agent.session.events
        assert turn_starts(events) == [(1, "injection"), (2, "message")]
        assert types(events)[:3] == ["turn/start", "context/message", "turn/end"]
        assert turn_ends(events) == ["completed", "completed"]
        assert "before the turn" in texts(model.requests[0].messages[0].content)
        check_session_invariants(events)


async def test_inject_during_the_post_turn_flush_opens_its_own_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-A2 / R2.4: during the post-``turn/end`` flush status is ``running`` but no turn is open."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses: list[str] = []

        def on_flush(agent: retinue.Agent, _session: object) -> None:
            if not statuses:
                statuses.append(agent.status)
                agent.inject("from the flush")

        rt.hooks.on("session/flush", on_flush, agent=agent)
        await agent.ask("hi")
        await agent.wait_idle()
        assert statuses == ["running"]
        events = agent.session.events
        assert turn_starts(events) == [(1, "message"), (2, "injection")]
        result = await agent.ask("next")
        assert result.turn == 3
        check_session_invariants(agent.session.events)


async def test_idle_inject_flush_failure_is_reported_not_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-A3 / R2.21: a failing flush after an idle inject is reported as agent/error step 0, never raised."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors: list[tuple[int, int, str]] = []
        reported = trio.Event()
        failures = [RuntimeError("disk full")]

        def on_flush(_agent: retinue.Agent, _session: object) -> None:
            if failures:
                raise failures.pop()

        def on_error(_agent: retinue.Agent, turn: int, step: int, error: BaseException) -> None:
            errors.append((turn, step, str(error)))
            reported.set()

        def raising_error_listener(*_args: object) -> None:
            raise RuntimeError("error listener broke")

        rt.hooks.on("session/flush", on_flush, agent=agent)
        rt.hooks.on("agent/error", raising_error_listener, agent=agent)
        rt.hooks.on("agent/error", on_error, agent=agent)
        agent.inject("note")
        await reported.wait()
        assert errors == [(1, 0, "disk full")]
        assert types(agent.session.events) == ["turn/start", "context/message", "turn/end"]
        result = await agent.ask("still alive?")
        assert result.reason.kind == "completed"
        assert result.turn == 2
        check_session_invariants(agent.session.events)


@pytest.mark.parametrize(
    ("failing_type", "raises"),
    [("turn/start", True), ("context/message", True), ("turn/end", False)],
)
async def test_idle_inject_closes_its_turn_and_flushes_when_an_observer_raises(
    autojump_clock: trio.testing.MockClock, failing_type: str, raises: bool
) -> None:
    """T-A4 / R2.19: the one-shot turn is balanced and flushed even when an append observer raises."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        flushed = trio.Event()

        def on_event(_session: object, event: Event) -> None:
            if event.type == failing_type:
                raise RuntimeError(f"observer of {failing_type} failed")

        rt.hooks.on("session/event", on_event, agent=agent)
        rt.hooks.on("session/flush", lambda *_: flushed.set(), agent=agent)
        if raises:
            with pytest.raises(RuntimeError, match=failing_type):
                agent.inject("note")
        else:
            agent.inject("note")
        assert types(agent.session.events) == ["turn/start", "context/message", "turn/end"]
        await flushed.wait()
        assert [e.seq for e in await _stored_events(rt, agent.id)] == [0, 1, 2]
        check_session_invariants(agent.session.events)


async def _stored_events(rt: retinue.Runtime, session_id: str) -> Sequence[Event]:
    stored = await rt.store.inspect(session_id)  # type: ignore[attr-defined]
    return stored.events  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("content", "source"),
    [("note", 42), ("note", object()), ([object()], None)],
    ids=["int-source", "object-source", "non-block-content"],
)
async def test_idle_inject_with_invalid_input_opens_no_turn(
    autojump_clock: trio.testing.MockClock, content: object, source: object
) -> None:
    """T-A5 / R2.20: an inject whose input is refused opens no turn, logs nothing and raises."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        with pytest.raises(TypeError):
            agent.inject(content, source)  # type: ignore[arg-type]
        assert list(agent.session.events) == []
        result = await agent.ask("hi")
        assert result.turn == 1


class _Quoted(retinue.Text):  # type: ignore[misc]  # a runtime subclass of a final block class
    pass


_OTHER_KIND = r"^content must be a str, a content block or a sequence of content blocks, got "


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (123, _OTHER_KIND),
        (None, _OTHER_KIND),
        ({"type": "text", "text": "hi"}, _OTHER_KIND),
        (b"hi", _OTHER_KIND),
        ([_Quoted("hi")], r"^content\[0\] is an instance of _Quoted, a subclass of Text: "),
    ],
    ids=["int", "None", "dict", "bytes", "block-subclass"],
)
async def test_every_verb_refuses_content_of_another_kind_saying_what_is_expected(
    autojump_clock: trio.testing.MockClock, content: object, expected: str
) -> None:
    """R2.10, R2.14, R2.16, R1.6: ask, send, steer and inject refuse content that is not a
    str, a block or a sequence of blocks, or holds a block of a subclass of a (final) block
    class, with a ``TypeError`` saying so; nothing is sent."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        for verb in (agent.send, agent.steer, agent.inject):
            with pytest.raises(TypeError, match=expected):
                verb(content)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=expected):
            await agent.ask(content)  # type: ignore[arg-type]
        await agent.wait_idle()
        assert list(agent.session.events) == []
        assert model.statistics().calls == 0


async def test_every_verb_refuses_a_source_of_another_kind_naming_every_kind_it_takes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R1.3: a source is a MessageSource, a str naming a plugin, or None for the user; any other is
    a TypeError naming every kind a verb takes, not "must be a MessageSource" alone, as if the str
    and None were refused too; nothing is sent."""
    expected = "^source must be a MessageSource, a str naming a plugin, or None, got int$"
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        for verb in (agent.send, agent.steer, agent.inject):
            with pytest.raises(TypeError, match=expected):
                verb("hi", 5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=expected):
            await agent.ask("hi", 5)  # type: ignore[arg-type]
        await agent.wait_idle()
        assert list(agent.session.events) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("", "^source '' names no plugin"),
        (MessageSource("plugin"), "^a plugin source must name its plugin"),
        (MessageSource("plugin", ""), "^a plugin source must name its plugin"),
        (MessageSource(""), "^a source's kind must not be empty"),
    ],
)
async def test_every_verb_refuses_a_source_that_names_no_one(
    source: MessageSource | str,
    expected: str,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R1.3: plugin content must label itself, so a source naming no plugin (or of no kind) is a
    ValueError, and nothing is sent or logged: no content of a plugin named "" (or None), which no
    reader of the log could tell apart from any other unnamed one."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        for verb in (agent.send, agent.steer, agent.inject):
            with pytest.raises(ValueError, match=expected):
                verb("hi", source)
        with pytest.raises(ValueError, match=expected):
            await agent.ask("hi", source)
        with pytest.raises(ValueError, match=expected):
            HookContext("hi", source)
        await agent.wait_idle()
        assert list(agent.session.events) == []
        assert model.statistics().calls == 0


def _queued_prompts(rt: retinue.Runtime, agent: retinue.Agent) -> list[tuple[str, bool]]:
    """The prompts ``agent/queued`` announces for *agent*, each with its steering flag."""
    queued: list[tuple[str, bool]] = []
    rt.hooks.on(
        "agent/queued",
        lambda _agent, content, info: queued.append((texts(content), info["steering"])),
        agent=agent,
    )
    return queued


async def test_steer_while_idle_behaves_as_send(autojump_clock: trio.testing.MockClock) -> None:
    """T-A6 / R2.14: a steer on an idle agent is queued like send and starts a turn."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        queued = _queued_prompts(rt, agent)
        agent.steer("steered while idle")
        events = await idle_events(agent)
        assert queued == [("steered while idle", False)]
        assert of_type(events, "steering/message") == []
        assert texts(of_type(events, "user/message")[0].data.content) == "steered while idle"  # type: ignore[union-attr]
        assert turn_ends(events) == ["completed"]


async def test_steer_while_running_is_announced_as_steering(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.15, R2.10: a steer on a running agent emits ``agent/queued`` with ``steering: True``;
    a send beside it is announced with ``steering: False``.
    """
    model = ScriptedModel(
        [CallTools([ToolCallSpec("nap", '{"seconds": 10}', id="c1")]), Reply("ok")],
        repeat_last=True,
    )
    async with runtime(model, tools=[nap]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        queued = _queued_prompts(rt, agent)
        agent.send("go")
        await trio.sleep(1)
        agent.steer("turn left")
        agent.send("next")
        events = await idle_events(agent)
        assert queued == [("go", False), ("turn left", True), ("next", False)]
        assert [texts(e.data.content) for e in of_type(events, "steering/message")] == [  # type: ignore[union-attr]
            "turn left"
        ]


async def test_a_queued_listener_sees_the_prompt_already_queued(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.10: ``send`` queues the prompt before it emits ``agent/queued``, so a listener
    that cancels on it discards that very prompt (R2.24, R2.25): no turn runs.
    """
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("agent/queued", lambda queued, _content, _info: queued.cancel(), agent=agent)
        agent.send("dropped at once")
        await agent.wait_idle()
        assert list(agent.session.events) == []
        assert model.statistics().calls == 0


async def test_steer_before_the_driver_runs_joins_the_queued_batch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-A6 / R2.14: between send and the flip to running the status is idle, so steer queues a prompt."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("first")
        agent.steer("second")
        events = await idle_events(agent)
        assert user_texts(events) == [
            "first",
            "second",
        ]
        assert of_type(events, "steering/message") == []
        assert len(of_type(events, "turn/start")) == 1


async def test_a_queued_listener_cannot_change_the_info_the_next_one_sees(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.10, R2.15: every ``agent/queued`` listener of one send or steer sees its source and
    steering flag as they are: the info is read-only, so a listener that writes to it fails alone
    (contained) and cannot change what the listeners after it see.
    """
    model = ScriptedModel(
        [CallTools([ToolCallSpec("nap", '{"seconds": 10}', id="c1")]), Reply("ok")],
        repeat_last=True,
    )
    writes: list[str] = []

    def forge(_agent: retinue.Agent, _content: object, typed: Mapping[str, object]) -> None:
        info = typing.cast("dict[str, object]", typed)  # a listener ignoring its type
        for write in (
            functools.partial(info.__setitem__, "steering", not info["steering"]),
            functools.partial(info.update, source="forged"),
            functools.partial(info.pop, "source"),
        ):
            try:
                write()
            except TypeError:
                writes.append("refused")

    seen: list[tuple[object, object]] = []
    async with runtime(model, tools=[nap]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("agent/queued", forge, agent=agent)
        rt.hooks.on(
            "agent/queued",
            lambda _agent, _content, info: seen.append((info["source"], info["steering"])),
            agent=agent,
        )
        agent.send("go", source="planner")
        await trio.sleep(1)
        agent.steer("turn left")
        await agent.wait_idle()
    assert seen == [(MessageSource("plugin", "planner"), False), (MessageSource("user"), True)]
    assert writes == ["refused"] * 6


@pytest.mark.parametrize("verb", ["send", "steer", "inject", "cancel"])
async def test_a_verb_called_from_another_trio_run_is_refused_before_it_changes_anything(
    verb: str,
) -> None:
    """R2.10-R2.23: a verb called inside a ``trio.run`` of another thread (one a sync tool body
    starts in its worker thread, say) is refused, as from a bare worker thread.

    That thread is in a trio run, but not the agent's: a ``send`` there would queue the prompt, then
    fail to wake the driver with trio's bare ``AssertionError``, leaving the prompt queued with
    nothing to run it and ``wait_idle`` waiting forever.
    """
    model = ScriptedModel([Reply("one"), Reply("two")])
    with trio.fail_after(30):  # real time: a worker thread runs
        async with retinue.open_runtime(models=model) as rt:
            other = await rt.create_agent("other", OPTIONS)
            call = getattr(other, verb)

            async def in_its_own_run() -> None:
                call("from another trio run")

            with pytest.raises(RuntimeError, match=r"not from another trio\.run"):
                await trio.to_thread.run_sync(trio.run, in_its_own_run)
            assert [event.type for event in other.session.events] == []
            await other.wait_idle()
            result = await other.ask("from the trio thread")
    assert (result.reason.kind, result.text) == ("completed", "one")


async def _wait_on(agent: retinue.Agent, verb: str) -> None:
    if verb == "ask":
        await agent.ask("from another trio run")
        return
    if verb == "subscribe":
        async with agent.subscribe() as feed:
            async for _event in feed:
                return
    await getattr(agent, verb)()


@pytest.mark.parametrize("verb", ["wait_idle", "dispose", "subscribe", "ask"])
async def test_a_wait_from_another_trio_run_is_refused_and_the_agent_goes_on(verb: str) -> None:
    """R2.30-R2.35: ``wait_idle``, ``dispose``, ``subscribe`` and ``ask`` called inside a
    ``trio.run`` of another thread are refused before they wait, and the running agent goes on.

    A waiter of that run, woken from the agent's run, would fail there: the driver would crash on
    releasing an idle waiter of the other run (with trio's bare ``AssertionError``), a dispose end
    in ``TrioInternalError`` and a feed's wait in a foreign ``Cancelled``.
    """
    model = ScriptedModel([Hang(), Reply("two")])
    # Real time: a worker thread runs its own trio.run. The bound covers the runtime's
    # exit too, which waits for the agent a failure here could leave hanging.
    with trio.fail_after(10):
        async with retinue.open_runtime(models=model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            agent.send("first")
            await trio.sleep(0.05)
            with pytest.raises(RuntimeError, match=r"not from another trio\.run"):
                await trio.to_thread.run_sync(
                    trio.run, functools.partial(_wait_on, agent, verb), abandon_on_cancel=True
                )
            agent.cancel("done waiting")
            result = await agent.ask("after")
    assert (result.reason.kind, result.text) == ("completed", "two")
