"""A listener raising a ``BaseException`` that is neither Ctrl-C nor a cancel (a
``SystemExit``, a ``GeneratorExit``, a subclass of the user's, a group of them) fails
what its seam fails for any raise, never the driver or the runtime (R6.1-R6.4, R7.45,
R7.48); Ctrl-C and a cancel still pass through listeners. A ``StopIteration``, which
Python turns into a ``RuntimeError`` as it leaves a coroutine, names the listener."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import pytest
import trio
import trio.testing

import retinue
from retinue._content import content_text
from retinue.hooks import HookError
from retinue.hooks._calls import a_listener_of
from retinue.session import Event, ToolResultEvent
from retinue.testing import (
    CallTools,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import OPTIONS, Next, echo, last_end_reason, raises_ctrl_c, runtime


class _GaveUp(BaseException):
    """A user's own BaseException subclass, carrying a code as a ``ToolError`` would."""

    code = "GAVE_UP"


def _exit(*_args: object) -> NoReturn:
    raise SystemExit("plugin exits")


async def _exit_later(*_args: object) -> NoReturn:
    await trio.lowlevel.checkpoint()
    raise SystemExit(3)


async def _give_up(*_args: object) -> NoReturn:
    await trio.lowlevel.checkpoint()
    raise _GaveUp("given up")


async def _generator_exit(*_args: object) -> NoReturn:
    await trio.lowlevel.checkpoint()
    raise GeneratorExit


async def _exits_in_a_nursery(*_args: object) -> None:
    async def leave() -> NoReturn:
        await trio.lowlevel.checkpoint()
        raise SystemExit("from a child")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(leave)
        nursery.start_soon(leave)


async def _wraps_then_exits(*args: Any) -> object:
    call_next: Next = args[-1]
    await call_next()
    raise SystemExit("after the chain")


@pytest.mark.parametrize(
    ("seam", "listener", "code", "said"),
    [
        ("agent/pre-step", _exit, "UNKNOWN", "raised SystemExit: plugin exits"),
        ("agent/pre-step", _exits_in_a_nursery, "UNKNOWN", "raised SystemExit: from a child"),
        ("agent/request", _give_up, "GAVE_UP", "raised _GaveUp: given up"),
        ("agent/step-result", _wraps_then_exits, "UNKNOWN", "raised SystemExit: after the"),
        ("agent/turn-continuation", _exit_later, "UNKNOWN", "raised SystemExit: 3"),
        ("agent/turn-stop", _generator_exit, "UNKNOWN", "raised GeneratorExit"),
        ("agent/prompt-submit", _exit, "UNKNOWN", "raised SystemExit: plugin exits"),
        ("system-prompt/assemble", _give_up, "GAVE_UP", "raised _GaveUp: given up"),
    ],
    ids=[
        "serial",
        "serial-group",
        "waterfall-coded",
        "waterfall-wrapping",
        "waterfall-exit-status",
        "strict-serial",
        "prompt-submit",
        "assemble",
    ],
)
async def test_a_listener_base_exception_ends_the_turn_as_its_error(
    autojump_clock: trio.testing.MockClock,
    seam: str,
    listener: Callable[..., object],
    code: str,
    said: str,
) -> None:
    """R6.2, R6.3, R7.45, R7.48: the turn ends ``error`` with code ``UNKNOWN`` (or the code the
    exception carries; a SystemExit's is its exit status, no error code), the message names the seam
    and what was raised, ``agent/error`` reports a ``HookError`` caused by it, and the agent serves
    its next turn: the runtime does not end."""
    model = ScriptedModel([Reply("one")], repeat_last=True)
    with trio.fail_after(60):
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            errors: list[BaseException] = []
            rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error))
            unregister = rt.hooks.on(seam, listener, agent=agent)  # type: ignore[call-overload]
            first = await agent.ask("go")
            assert (first.reason.kind, first.reason.code) == ("error", code)
            assert a_listener_of(seam) in (first.reason.message or "")
            assert said in (first.reason.message or "")
            [error] = errors
            assert isinstance(error, HookError)
            assert isinstance(error.__cause__, BaseException)
            assert not isinstance(error.__cause__, Exception)
            unregister()
            second = await agent.ask("again")
            assert second.reason.kind == "completed"
            assert agent.status == "idle"
            check_session_invariants(agent.session.events)


@pytest.mark.parametrize(
    "seam", ["agent/status", "agent/queued", "agent/created", "agent/session-start", "tools/result"]
)
async def test_a_notification_listener_base_exception_is_contained(
    autojump_clock: trio.testing.MockClock, seam: str
) -> None:
    """R6.1: an emit listener's SystemExit is logged and contained like any other failure; the other
    listeners still hear the event and the turn completes. It neither ends the runtime nor, at
    creation, reaches the creator."""
    model = ScriptedModel([CallTools([ToolCallSpec("echo", '{"text": "hi"}')]), Reply("done")])
    heard: list[str] = []
    with trio.fail_after(60):
        async with runtime(model, tools=[echo]) as rt:
            rt.hooks.on(seam, _exit)  # type: ignore[call-overload]
            rt.hooks.on(seam, lambda *_args: heard.append(seam))  # type: ignore[call-overload]
            agent = await rt.create_agent("a", OPTIONS)
            answer = await agent.ask("go")
            assert (answer.reason.kind, answer.text) == ("completed", "done")
            assert heard
            check_session_invariants(agent.session.events)


async def test_an_error_listener_base_exception_is_contained(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.45, R7.48: an ``agent/error`` listener exiting while a failed turn is reported
    leaves the turn's error as it was and the agent serving."""
    model = ScriptedModel([Reply("one")], repeat_last=True)
    with trio.fail_after(60):
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            rt.hooks.on("agent/error", _exit, agent=agent)

            def broken(*_args: object) -> NoReturn:
                raise RuntimeError("pre-step broke")

            unregister = rt.hooks.on("agent/pre-step", broken, agent=agent)
            first = await agent.ask("go")
            assert (first.reason.kind, first.reason.message) == ("error", "pre-step broke")
            unregister()
            assert (await agent.ask("again")).reason.kind == "completed"


async def test_a_session_event_listener_base_exception_fails_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.8, R7.45: a ``session/event`` listener's raise is surfaced where the event was
    appended; a SystemExit is surfaced as a ``HookError`` (``UNKNOWN``) that ends the
    turn, as any raise there does, not the runtime."""
    model = ScriptedModel([Reply("one")], repeat_last=True)
    with trio.fail_after(60):
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)

            def exit_on_step_start(_session: object, event: Any) -> None:
                if event.type == "step/start":
                    raise SystemExit("observer exits")

            unregister = rt.hooks.on("session/event", exit_on_step_start, agent=agent)
            first = await agent.ask("go")
            assert (first.reason.kind, first.reason.code) == ("error", "UNKNOWN")
            assert "observer exits" in (first.reason.message or "")
            unregister()
            assert (await agent.ask("again")).reason.kind == "completed"
            check_session_invariants(agent.session.events)


async def test_a_flush_listener_base_exception_is_reported_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.4, R7.49: a ``session/flush`` listener's group of SystemExits is reported on
    ``agent/error`` as a ``HookError`` (``UNKNOWN``); the turn keeps its end and the
    agent serves its next turn."""
    model = ScriptedModel([Reply("one")], repeat_last=True)
    with trio.fail_after(60):
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            errors: list[BaseException] = []
            rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error))
            unregister = rt.hooks.on("session/flush", _exits_in_a_nursery, agent=agent)
            assert (await agent.ask("go")).reason.kind == "completed"
            [error] = errors
            assert isinstance(error, HookError)
            assert error.code == "UNKNOWN"
            unregister()
            assert (await agent.ask("again")).reason.kind == "completed"


@pytest.mark.parametrize("seam", ["tools/pre-execute", "tools/execute", "tools/post-execute"])
async def test_a_tool_pipeline_listener_base_exception_fails_its_call(
    autojump_clock: trio.testing.MockClock, seam: str
) -> None:
    """R9.2, R6.3: the call's result is an error coded ``UNKNOWN`` naming what was
    raised; the turn goes on to its answer."""
    model = ScriptedModel([CallTools([ToolCallSpec("echo", '{"text": "hi"}')]), Reply("done")])
    with trio.fail_after(60):
        async with runtime(model, tools=[echo]) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            rt.hooks.on(seam, _exit_later, agent=agent)  # type: ignore[call-overload]
            answer = await agent.ask("go")
            assert (answer.reason.kind, answer.text) == ("completed", "done")
            [result] = [
                event.data
                for event in agent.session.events
                if isinstance(event.data, ToolResultEvent)
            ]
            assert result.is_error
            assert result.error is not None
            assert result.error.code == "UNKNOWN"
            assert "raised SystemExit: 3" in content_text(result.content)


async def _interrupt(*_args: object) -> NoReturn:
    await trio.lowlevel.checkpoint()
    raise KeyboardInterrupt


@pytest.mark.parametrize("seam", ["agent/pre-step", "agent/request", "tools/execute"])
async def test_ctrl_c_in_a_listener_still_ends_the_runtime(
    autojump_clock: trio.testing.MockClock, seam: str
) -> None:
    """R7.40, R12.10: Ctrl-C is no listener's failure: it goes on out of the runtime,
    and the turn it interrupted is logged disposed."""
    model = ScriptedModel([CallTools([ToolCallSpec("echo", '{"text": "hi"}')]), Reply("never")])
    sessions: list[retinue.Session] = []
    with trio.fail_after(60), raises_ctrl_c():
        async with retinue.open_runtime(models=model, tools=[echo]) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            sessions.append(agent.session)
            rt.hooks.on(seam, _interrupt, agent=agent)  # type: ignore[call-overload]
            await agent.ask("go")
    assert last_end_reason(sessions[0].events).kind == "disposed"
    check_session_invariants(sessions[0].events)


async def test_ctrl_c_in_a_notification_listener_still_passes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.1: an emit seam contains its listeners' failures, but Ctrl-C is none."""
    with trio.fail_after(60):
        async with runtime(ScriptedModel([Reply("one")])) as rt:
            agent = await rt.create_agent("a", OPTIONS)

            def interrupt(*_args: object) -> NoReturn:
                raise KeyboardInterrupt

            rt.hooks.on("agent/queued", interrupt, agent=agent)
            with raises_ctrl_c():
                agent.send("go")


async def test_a_tool_guard_base_exception_fails_its_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.3, R7.45: a guard, asked as a listener is, fails the call it was asked about
    when it exits (``UNKNOWN``), as when it raises; the turn goes on."""
    model = ScriptedModel([CallTools([ToolCallSpec("echo", '{"text": "hi"}')]), Reply("done")])
    with trio.fail_after(60):
        async with runtime(model, tools=[echo]) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            rt.tools.guard(_exit_later, agent=agent)
            answer = await agent.ask("go")
            assert (answer.reason.kind, answer.text) == ("completed", "done")
            [result] = [
                event.data
                for event in agent.session.events
                if isinstance(event.data, ToolResultEvent)
            ]
            assert result.error is not None
            assert (result.error.code, content_text(result.content)) == (
                "UNKNOWN",
                f"Error: a tool guard ({__name__}._exit_later) raised SystemExit: 3",
            )


async def test_a_scoped_cleanup_base_exception_is_contained_and_the_teardown_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9: a scoped cleanup (the unregister of a scoped listener, say) that exits is logged like
    any cleanup failure: the cleanups after it still run, the agent's subscriptions end and the
    runtime goes on; the exit neither ends the runtime nor skips them."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    with trio.fail_after(60):
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            cleaned: list[str] = []
            rt.scoped(agent, lambda: cleaned.append("registered first"))
            rt.scoped(agent, _exit)  # unwound before the first: the last is undone first
            async with agent.subscribe() as events:
                await agent.dispose()
                assert [event async for event in events] == []
            assert cleaned == ["registered first"]
            other = await rt.create_agent("b", OPTIONS)
            assert (await other.ask("go")).reason.kind == "completed"


def _exhausted(*args: Any) -> None:
    """Raise StopIteration; as a ``session/event`` listener, on ``step/start`` only."""
    if not isinstance(args[-1], Event) or args[-1].type == "step/start":
        next(iter(()))


@pytest.mark.parametrize("seam", ["agent/pre-step", "session/event", "agent/turn-stop"])
async def test_a_synchronous_listener_stop_iteration_names_the_listener(
    autojump_clock: trio.testing.MockClock, seam: str
) -> None:
    """R7.45: the turn's error names the listener that raised StopIteration, not "coroutine raised
    StopIteration", which names a coroutine the listener does not have."""
    model = ScriptedModel([Reply("one")], repeat_last=True)
    with trio.fail_after(60):
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            unregister = rt.hooks.on(seam, _exhausted, agent=agent)  # type: ignore[call-overload]
            first = await agent.ask("go")
            assert first.reason.kind == "error"
            message = first.reason.message or ""
            assert a_listener_of(seam) in message
            assert message.endswith("raised StopIteration")
            unregister()
            assert (await agent.ask("again")).reason.kind == "completed"
