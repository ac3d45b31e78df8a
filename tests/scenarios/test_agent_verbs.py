"""The agent handle: verbs, idle waiting, disposal and status (SPEC 2; T-A1..T-A9)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, HookContext, MessageSource
from retinue.session import Event
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from retinue.tools import ToolContext
from tests.helpers import (
    OPTIONS,
    echo,
    idle_events,
    nap,
    of_type,
    record_statuses,
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
    """R1.3: a source is a MessageSource, a str naming a plugin, or None for the user; any
    other is a TypeError saying so, and nothing is sent. It said "must be a
    MessageSource" alone, as if the str and None every verb takes were refused too."""
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
    """R1.3: plugin content must label itself, so a source naming no plugin (or of no
    kind) is a ValueError, and nothing is sent or logged. It was logged as the
    content of a plugin named "" (or None), which no reader of the log could tell
    apart from any other unnamed one."""
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


async def test_dispose_is_idempotent(autojump_clock: trio.testing.MockClock) -> None:
    """T-A7 / R2.35, R12.8: concurrent and repeated disposals emit ``disposed`` and ``agent/disposed`` once."""
    model = ScriptedModel([Hang()])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses = record_statuses(rt, agent)
        disposed: list[str] = []
        rt.hooks.on("agent/disposed", lambda a: disposed.append(a.id), agent=agent)
        agent.send("go")
        await trio.sleep(1)
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(agent.dispose)
        await agent.dispose()
        assert statuses == ["running", "disposed"]
        assert disposed == [agent.id]
        assert turn_ends(agent.session.events) == ["disposed"]
        check_session_invariants(agent.session.events)


@pytest.mark.parametrize("verb", ["wait_idle", "ask"])
async def test_an_agent_waiting_on_itself_from_its_own_tool_gets_a_typed_error(
    autojump_clock: trio.testing.MockClock, verb: str
) -> None:
    """Waiting on oneself is refused: ``wait_idle``/``ask`` from the agent's own tool would
    wait for itself forever; it raises ``WAITS_FOR_ITSELF``, which the call reports, and
    the turn goes on.
    """

    async def wait_for_me(ctx: ToolContext) -> str:
        """Wait for the calling agent."""
        agent = ctx.agent
        assert isinstance(agent, retinue.Agent)
        await (agent.wait_idle() if verb == "wait_idle" else agent.ask("again"))
        return "never"

    model = ScriptedModel([CallTools([ToolCallSpec("wait_for_me", "{}", id="w")]), Reply("done")])
    async with runtime(model, tools=[retinue.tool(wait_for_me)]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        (tool_result,) = of_type(agent.session.events, "tool/result")
        assert tool_result.data.error is not None  # type: ignore[union-attr]
        assert tool_result.data.error.code == "WAITS_FOR_ITSELF"  # type: ignore[union-attr]
        assert len(of_type(agent.session.events, "turn/start")) == 1


async def test_a_flush_listener_waiting_on_its_agent_during_disposal_gets_a_typed_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: the final flush of a disposal runs the agent's ``session/flush``
    listeners under its driver; a ``wait_idle`` there would wait for its own teardown,
    so it raises ``WAITS_FOR_ITSELF`` and ``dispose`` does not stall.
    """
    codes: list[str | None] = []
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True), flush_timeout=30) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def on_flush(flushed: retinue.Agent, _session: object) -> None:
            try:
                await flushed.wait_idle()
                codes.append(None)
            except retinue.AgentError as exc:
                codes.append(exc.code)

        rt.hooks.on("session/flush", on_flush, agent=agent)
        await agent.ask("hi")
        started = trio.current_time()
        await agent.dispose()
        assert trio.current_time() - started < 1, "dispose waited out the flush timeout"
    assert codes[-1] == "WAITS_FOR_ITSELF"


async def test_disposal_flush_listeners_waiting_on_each_other_get_a_typed_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: two agents disposed together whose ``session/flush`` listeners each
    ``wait_idle`` on the other would wait in a circle; one gets ``WAIT_CYCLE``, so
    leaving the runtime does not wait out the flush timeout.
    """
    heard: list[tuple[str, str]] = []
    with trio.fail_after(100):
        async with retinue.open_runtime(
            models=ScriptedModel([Reply("ok")], repeat_last=True), flush_timeout=30
        ) as rt:
            first = await rt.create_agent("a", OPTIONS)
            second = await rt.create_agent("b", OPTIONS)

            async def on_flush(flushed: retinue.Agent, _session: object) -> None:
                if flushed.status != "disposed":
                    return
                other = second if flushed is first else first
                try:
                    await other.wait_idle()
                    heard.append((flushed.id, "returned"))
                except retinue.AgentError as exc:
                    heard.append((flushed.id, str(exc.code)))

            rt.hooks.on("session/flush", on_flush)
            await first.ask("hi")
            await second.ask("hi")
            started = trio.current_time()
    assert trio.current_time() - started < 1, "the runtime waited out the flush timeout"
    assert sorted(code for _, code in heard) == ["WAIT_CYCLE", "returned"]


@pytest.mark.timeout(30)  # a regression deadlocks inside a shielded wait, out of the clock's reach
@pytest.mark.parametrize("where", ["tool", "listener"])
async def test_an_agent_disposing_itself_from_its_own_turn_does_not_deadlock(
    autojump_clock: trio.testing.MockClock, where: str
) -> None:
    """R2.35, R2.36, R12.9: ``await agent.dispose()`` from the agent's own tool or listener.

    The call cannot wait for the driver it runs under: it stops the agent and
    returns; the turn ends ``disposed``, is flushed, and the agent is torn down.
    """
    returned: list[str] = []

    async def stop_me(ctx: ToolContext) -> str:
        """Dispose the calling agent."""
        await ctx.agent.dispose()
        returned.append("tool")
        return "stopped"

    model = ScriptedModel([CallTools([ToolCallSpec("stop_me", "{}", id="s")]), Reply("never")])
    store = MemoryStore()
    async with runtime(model, tools=[retinue.tool(stop_me)], store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        disposed: list[str] = []
        rt.hooks.on("agent/disposed", lambda a: disposed.append(a.id), agent=agent)
        if where == "listener":

            async def pre_step(*_args: object) -> None:
                await agent.dispose()
                returned.append("listener")

            rt.hooks.on("agent/pre-step", pre_step, agent=agent)
        result = await agent.ask("go")
        await agent.dispose()
        assert result.reason.kind == "disposed"
        assert returned == [where]
        assert disposed == [agent.id]
        assert agent.status == "disposed"
        assert len(rt.agents) == 0
        assert store.statistics().buffered_events == 0
        check_session_invariants(agent.session.events)


async def test_status_changes_emit_only_real_transitions(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-A7 / R2.3, R7.1: no duplicate status events; back-to-back turns stay ``running``;
    a transition out of ``disposed`` is refused and never announced.
    """
    model = ScriptedModel([Reply("one", delay=5), Reply("two"), Reply("three")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses = record_statuses(rt, agent)
        announced: list[tuple[str, str]] = []
        rt.hooks.on("agent/status", lambda who, status: announced.append((who.id, status)))
        agent.send("first")
        await trio.sleep(1)
        assert agent.status == "running"
        agent.send("queued behind the first")
        await agent.wait_idle()
        assert turn_ends(agent.session.events) == ["completed", "completed"]
        assert statuses == ["running", "idle"]
        await agent.ask("third")
        assert statuses == ["running", "idle", "running", "idle"]
        await agent.dispose()
        assert statuses[-1] == "disposed"
        # No public verb moves a disposed agent, so drive the status setter itself, as a
        # driver racing the disposal would: it must not leave ``disposed`` or announce.
        after: list[str] = []
        for status in ("idle", "running", "idle"):
            agent._core.set_status(status)
            after.append(agent.status)
        assert after == ["disposed", "disposed", "disposed"]
        expected = ["running", "idle", "running", "idle", "disposed"]
        assert announced == [(agent.id, status) for status in expected]
        assert statuses == expected


async def test_wait_idle_returns_at_once_when_idle(autojump_clock: trio.testing.MockClock) -> None:
    """T-A8 / R2.31: wait_idle on an idle agent with nothing queued returns immediately (a checkpoint)."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        start = trio.current_time()
        with trio.testing.assert_checkpoints():
            await agent.wait_idle()
        assert trio.current_time() == start
        assert list(agent.session.events) == []


async def test_wait_idle_waits_for_queued_work(autojump_clock: trio.testing.MockClock) -> None:
    """T-A8 / R2.32, R7.2: a send not yet picked up is waited for, including its flush."""
    model = ScriptedModel([Reply("ok", delay=3)])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        flushed: list[int] = []
        rt.hooks.on(
            "session/flush", lambda _a, session: flushed.append(len(session.events)), agent=agent
        )
        agent.send("hi")
        assert agent.status == "idle"
        await agent.wait_idle()
        assert agent.status == "idle"
        assert turn_ends(agent.session.events) == ["completed"]
        assert flushed == [len(agent.session.events)]


async def test_wait_idle_ignores_other_agents(autojump_clock: trio.testing.MockClock) -> None:
    """T-A8 / R2.32: another agent going idle does not release this agent's waiter."""
    model = ScriptedModel({"slow": [Hang()], "fast": [Reply("done")]})
    async with runtime(model) as rt:
        slow = await rt.create_agent("slow", AgentOptions(model="slow"))
        fast = await rt.create_agent("fast", AgentOptions(model="fast"))
        released = trio.Event()

        async def wait_slow() -> None:
            await slow.wait_idle()
            released.set()

        slow.send("hang")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_slow)
            await fast.ask("quick")
            await trio.sleep(10)
            assert not released.is_set()
            slow.cancel()
            await released.wait()
        assert turn_ends(slow.session.events) == ["aborted"]


async def test_wait_idle_released_by_disposal_after_driver_exit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-A8 / R2.30, R2.32: disposal releases waiters only once the driver exited and the turn closed."""
    model = ScriptedModel([Hang()])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("hang")
        observed: list[list[str]] = []

        async def waiter() -> None:
            await agent.wait_idle()
            observed.append(turn_ends(agent.session.events))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.sleep(1)
            await agent.dispose()
        assert observed == [["disposed"]]
        start = trio.current_time()
        await agent.wait_idle()
        assert trio.current_time() == start


async def test_raising_status_listeners_are_contained(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-A9 / R2.33, R6.1: raising ``agent/status`` listeners change nothing; later listeners
    still run; a ``wait_idle`` waiter is already released when they hear the agent go idle.
    """
    model = ScriptedModel([Reply("one"), Reply("two", delay=5)])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        waiters: list[trio.Event] = []
        released_when_heard: list[tuple[str, list[bool]]] = []

        def raising(_agent: retinue.Agent, status: str) -> None:
            raise RuntimeError(f"listener broke on {status}")

        def check_waiters(_agent: retinue.Agent, status: str) -> None:
            released_when_heard.append((status, [waiter.is_set() for waiter in waiters]))

        rt.hooks.on("agent/status", raising, agent=agent)
        rt.hooks.on("agent/status", check_waiters, agent=agent)
        seen = record_statuses(rt, agent)
        first = await agent.ask("one")
        agent.send("two")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.wait_idle)
            await trio.sleep(1)  # the second turn is under way: its model replies at 5 s
            waiters.extend(agent._core.idle_waiters)  # the one the waiting task registered
            assert [waiter.is_set() for waiter in waiters] == [False]
        assert released_when_heard == [
            ("running", []),
            ("idle", []),
            ("running", []),
            ("idle", [True]),
        ]
        assert first.reason.kind == "completed"
        assert turn_ends(agent.session.events) == ["completed", "completed"]
        assert seen == ["running", "idle", "running", "idle"]
        assert agent.status == "idle"
        check_session_invariants(agent.session.events)


async def test_session_event_listeners_added_and_removed_later_hear_exactly_their_window(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``session/event`` reaches listeners registered after creation, and only while registered (R6.2)."""
    async with runtime(ScriptedModel([Reply(text) for text in ("a", "b", "c", "d")])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("first")
        heard: list[int] = []
        scoped: list[int] = []
        unregister = rt.hooks.on("session/event", lambda _session, event: heard.append(event.seq))
        start = len(agent.session.events)
        await agent.ask("second")
        end = len(agent.session.events)
        unregister()
        await agent.ask("third")
        rt.hooks.on("session/event", lambda _s, event: scoped.append(event.seq), agent=agent)
        third_end = len(agent.session.events)
        await agent.ask("fourth")
        assert heard == list(range(start, end))
        assert scoped == list(range(third_end, len(agent.session.events)))


async def test_nothing_can_be_scoped_to_a_disposed_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.5, R2.37: a listener or tool scoped to a disposed handle is refused: it would
    outlive the teardown and be heard by a later agent resumed under the same id.
    """
    async with runtime(ScriptedModel([Reply("hi")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("first")
        await agent.dispose()
        with pytest.raises(retinue.AgentDisposedError):
            rt.hooks.on("agent/status", lambda _agent, _status: None, agent=agent)
        with pytest.raises(retinue.AgentDisposedError):
            rt.tools.add(echo, agent=agent)
        resumed = await rt.resume_agent(agent.id, OPTIONS)
        await resumed.ask("hello")
        assert not rt.hooks.has_listeners("agent/status")
