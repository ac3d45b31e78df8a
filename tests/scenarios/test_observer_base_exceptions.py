"""A session observer raising a ``BaseException`` that is no Ctrl-C (a ``SystemExit``, a
subclass of the user's) or a ``StopIteration`` fails the turn with a ``SessionError``
naming the observer, never the agent or the runtime; the event stays logged and
persisted (R4.8, R7.45, R7.48)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
import trio.testing

from retinue import SessionError
from retinue.session import Event
from retinue.stores import MemoryStore
from retinue.testing import Reply, ScriptedModel, check_session_invariants
from tests.helpers import OPTIONS, of_type, runtime


class _GaveUp(BaseException):
    """A user's own BaseException subclass, carrying a code as a ``ToolError`` would."""

    code = "GAVE_UP"


def _raising_on(event_type: str, raised: BaseException) -> Callable[[Event], None]:
    def raising_observer(event: Event) -> None:
        if event.type == event_type:
            raise raised

    return raising_observer


@pytest.mark.parametrize(
    ("raised", "code"),
    [
        (SystemExit("observer exits"), "UNKNOWN"),
        (StopIteration("done"), "UNKNOWN"),
        (_GaveUp("given up"), "GAVE_UP"),
        (BaseExceptionGroup("many", [SystemExit(2)]), "UNKNOWN"),
    ],
    ids=["SystemExit", "StopIteration", "own-subclass", "group"],
)
async def test_an_observer_base_exception_fails_the_turn_only(
    autojump_clock: trio.testing.MockClock, raised: BaseException, code: str
) -> None:
    """R4.8, R7.45, R7.48: the turn ends with a ``SessionError`` naming the observer, which
    ``agent/error`` reports caused by what was raised; ``step/start`` stays logged and is
    persisted with the rest, and the agent serves its next turn."""
    store = MemoryStore()
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model, store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors: list[BaseException] = []
        rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error), agent=agent)
        unsubscribe = agent.session.observe(_raising_on("step/start", raised))
        first = await agent.ask("go")
        assert (first.reason.kind, first.reason.code) == ("error", code)
        assert "session observer" in (first.reason.message or "")
        assert "raising_observer" in (first.reason.message or "")
        [error] = errors
        assert isinstance(error, SessionError)
        assert error.__cause__ is raised
        assert len(of_type(agent.session.events, "step/start")) == 1
        assert agent.status == "idle"
        unsubscribe()
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)
        await agent.dispose()
        assert store.statistics().committed_events == len(agent.session.events)


@pytest.mark.parametrize(
    "event_type", ["turn/start", "user/message", "step/start", "assistant/message", "step/end"]
)
async def test_an_observer_stop_iteration_on_a_boundary_keeps_the_log_balanced(
    autojump_clock: trio.testing.MockClock, event_type: str
) -> None:
    """R7.47, R7.48: wherever the observer raises, the turn ends as an error naming it, not
    'coroutine raised StopIteration', and the log stays balanced."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        unsubscribe = agent.session.observe(_raising_on(event_type, StopIteration()))
        first = await agent.ask("go")
        assert (first.reason.kind, first.reason.code) == ("error", "UNKNOWN")
        assert "raising_observer" in (first.reason.message or "")
        assert "raised StopIteration" in (first.reason.message or "")
        assert len(of_type(agent.session.events, event_type)) == 1
        unsubscribe()
        assert (await agent.ask("again")).reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_an_observer_system_exit_on_turn_end_leaves_the_turn_as_it_ended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.44, R7.48: a raising observer on ``turn/end`` is logged and swallowed: the turn
    keeps its reason and the agent serves its next turn."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.session.observe(_raising_on("turn/end", SystemExit("observer exits")))
        assert (await agent.ask("go")).reason.kind == "completed"
        assert (await agent.ask("again")).reason.kind == "completed"
        assert len(of_type(agent.session.events, "turn/end")) == 2
        check_session_invariants(agent.session.events)


async def test_a_turn_end_observer_raising_every_turn_never_restarts_or_disposes_the_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.44, R7.48: a ``turn/end`` observer raising an ``Exception`` on every turn is logged
    and contained: no ``agent/error``, no driver restart, and the agent serves turn after turn
    (a driver crash a turn would dispose it at the second, by the default restart policy)."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    with trio.fail_after(60):
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            errors: list[BaseException] = []
            restarts: list[BaseException] = []
            rt.hooks.on("agent/error", lambda *args: errors.append(args[-1]), agent=agent)
            rt.hooks.on("agent/restarted", lambda *args: restarts.append(args[-1]), agent=agent)
            agent.session.observe(_raising_on("turn/end", RuntimeError("turn/end observer")))
            for turn, prompt in enumerate(("one", "two", "three"), start=1):
                result = await agent.ask(prompt)
                assert (result.turn, result.reason.kind) == (turn, "completed")
            await agent.wait_idle()
            assert errors == []
            assert restarts == []
            assert agent.status == "idle"
            assert len(of_type(agent.session.events, "turn/end")) == 3
            check_session_invariants(agent.session.events)
