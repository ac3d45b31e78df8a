"""A sync body's agent handle acts only while its call lasts (R2.25, R9.7, R9.20, R9.25).

A sync body abandoned at its timeout or a cancel runs on in its worker thread after its
call was answered; its ``ctx.agent`` then refuses every method, raising in the thread,
so nothing it does reaches a later turn.

The bodies block real threads on ``threading.Event``s, never on time: under the virtual
clock the only deadline is a tool's own timeout, which fires while its body is blocked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import attrs
import pytest
import trio

import retinue
from retinue._content import content_text
from retinue.session import Event, ToolErrorInfo
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from retinue.tools import AgentHandle, ToolContext
from tests.helpers import OPTIONS, of_type

# The virtual clock jumps to a trio deadline at once while a worker thread works, so a
# deadline around the runtime would fire before the bodies are released: each test is
# bounded in real time instead.
pytestmark = pytest.mark.timeout(30)

# Real seconds a thread waits for its event: past them the test has failed anyway.
REAL_WAIT = 20.0

VERBS: dict[str, Callable[[AgentHandle], object]] = {
    "agent.inject": lambda agent: agent.inject("late context"),
    "agent.steer": lambda agent: agent.steer("late steering"),
    "agent.send": lambda agent: agent.send("late prompt"),
    "agent.cancel": lambda agent: agent.cancel("late cancel"),
    "session.append_custom": lambda agent: agent.session.append_custom("late/note", {}),
}


@attrs.define
class Blocked:
    """A sync body that blocks until released, then calls one *verb* of its ``ctx.agent``."""

    verb: str
    entered: threading.Event = attrs.field(factory=threading.Event)
    release: threading.Event = attrs.field(factory=threading.Event)
    done: threading.Event = attrs.field(factory=threading.Event)
    refusal: Exception | None = None
    agent_id: str | None = None

    def __call__(self, ctx: ToolContext) -> str:
        assert ctx.agent is not None
        self.entered.set()
        self.release.wait(REAL_WAIT)
        try:
            VERBS[self.verb](ctx.agent)
        except Exception as exc:
            self.refusal = exc
        finally:
            self.agent_id = ctx.agent.id  # a read, still answered
            self.done.set()
        return "late"


def _tools(body: Blocked, timeout: float | None) -> list[retinue.tools.Tool]:
    @retinue.tool(timeout=timeout)
    def late(ctx: ToolContext) -> str:
        """Work for a while, then act on the agent."""
        return body(ctx)

    @retinue.tool
    async def resume() -> str:
        """Let the abandoned body act now, in this turn, and wait for it."""
        body.release.set()
        await trio.to_thread.run_sync(body.done.wait, REAL_WAIT)
        return "resumed"

    return [late, resume]


def _script(*, first_turn_goes_on: bool) -> ScriptedModel:
    late = CallTools([ToolCallSpec("late", "{}", id="c1")])
    resume = CallTools([ToolCallSpec("resume", "{}", id="c2")])
    first = [late, Reply("one")] if first_turn_goes_on else [late]
    return ScriptedModel([*first, resume, Reply("two")], repeat_last=True)


@pytest.mark.parametrize("verb", list(VERBS))
async def test_a_cancelled_sync_calls_handle_refuses_its_thread_in_the_next_turn(
    verb: str, autojump_clock: trio.abc.Clock
) -> None:
    """R2.25, R9.20: a turn is cancelled while its sync body runs; the call is answered
    ``ABORTED`` and the body runs on. Its later ``ctx.agent`` calls landed in the next
    turn: a context or steering message mid-stream, a prompt queued, the turn aborted.
    Each is refused in the thread with ``AgentError`` coded ``CALL_ENDED`` and turn 2 is
    untouched.
    """
    body = Blocked(verb)
    async with retinue.open_runtime(
        models=_script(first_turn_goes_on=False), tools=_tools(body, None)
    ) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_once_entered, agent, body)
            first = await agent.ask("first")
        second = await agent.ask("second")
        await agent.wait_idle()
    assert first.reason.kind == "aborted"
    assert _results(agent.session.events)["c1"] == ToolErrorInfo("AbortedError", "ABORTED")
    _assert_refused_and_untouched(agent, body, second)


async def _cancel_once_entered(agent: retinue.Agent, body: Blocked) -> None:
    await trio.to_thread.run_sync(body.entered.wait, REAL_WAIT)
    agent.cancel("user")


@pytest.mark.parametrize("verb", list(VERBS))
async def test_a_timed_out_sync_calls_handle_refuses_its_thread_in_the_next_turn(
    verb: str, autojump_clock: trio.abc.Clock
) -> None:
    """R9.25: a sync call times out, answered ``TOOL_TIMEOUT``, and its turn goes on to
    the end; the body runs on. Its later ``ctx.agent`` calls are refused in the thread with
    ``AgentError`` coded ``CALL_ENDED`` and the next turn is untouched.
    """
    body = Blocked(verb)
    async with retinue.open_runtime(
        models=_script(first_turn_goes_on=True), tools=_tools(body, 5)
    ) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        first = await agent.ask("first")
        second = await agent.ask("second")
        await agent.wait_idle()
    assert (first.reason.kind, first.text) == ("completed", "one")
    assert _results(agent.session.events)["c1"] == ToolErrorInfo("ToolError", "TOOL_TIMEOUT")
    _assert_refused_and_untouched(agent, body, second)


def _assert_refused_and_untouched(
    agent: retinue.Agent, body: Blocked, second: retinue.TurnResult
) -> None:
    events = agent.session.events
    late = ("context/message", "steering/message", "late/note")
    assert [(e.type, e.seq) for e in events if e.type in late] == []
    assert (second.reason.kind, second.reason.reason, second.text) == ("completed", None, "two")
    assert [content_text(e.data.content) for e in of_type(events, "user/message")] == [
        "first",
        "second",
    ]
    assert [e.data.turn for e in of_type(events, "turn/start")] == [1, 2]
    assert _results(events) == {"c1": _results(events)["c1"], "c2": None}
    check_session_invariants(events)
    refusal = body.refusal
    assert isinstance(refusal, retinue.AgentError), refusal
    assert refusal.code == "CALL_ENDED"
    assert str(refusal).startswith(f'{body.verb} refused: call "c1" of tool "late" has ended')
    assert body.agent_id == agent.id


def _results(events: Sequence[Event]) -> dict[str, ToolErrorInfo | None]:
    return {e.data.call_id: e.data.error for e in of_type(events, "tool/result")}


# Where each verb's effect is logged: its event type and the turn it lands in.
LANDS = {
    "agent.inject": ("context/message", 1),
    "agent.steer": ("steering/message", 1),
    "agent.send": ("user/message", 2),  # queued behind the running turn
    "session.append_custom": ("late/note", 1),
}


@pytest.mark.parametrize("verb", list(VERBS))
async def test_a_sync_calls_handle_acts_while_its_call_lasts(
    verb: str, autojump_clock: trio.abc.Clock
) -> None:
    """R9.7: a verb from a sync body whose call is still awaited reaches the agent, in
    that call's turn (a prompt in the next), even one that ends the call itself
    (``cancel``), and raises nothing.
    """
    body = Blocked(verb)
    body.release.set()
    script = ScriptedModel(
        [CallTools([ToolCallSpec("late", "{}", id="c1")]), Reply("one")], repeat_last=True
    )
    async with retinue.open_runtime(models=script, tools=_tools(body, None)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        first = await agent.ask("first")
        await agent.wait_idle()
    events = agent.session.events
    check_session_invariants(events)
    assert body.refusal is None
    if verb == "agent.cancel":
        assert (first.reason.kind, first.reason.reason) == ("aborted", "late cancel")
        return
    kind, turn = LANDS[verb]
    (logged,) = [e for e in events if e.type == kind and e.seq > 1]
    assert _turn_of(events, logged) == turn


def _turn_of(events: Sequence[Event], event: Event) -> int:
    return len([e for e in events[: event.seq] if e.type == "turn/start"])


@pytest.mark.parametrize("verb", list(VERBS))
def test_a_sync_calls_handle_refuses_its_thread_once_the_runtime_has_ended(verb: str) -> None:
    """R2.25, R9.20: a body abandoned at a cancel runs on past the end of the runtime's
    ``trio.run``; its ``ctx.agent`` calls then raise ``AgentError`` coded ``CALL_ENDED``, as
    they do while the runtime lasts, not trio's ``RunFinishedError``."""
    entered, release, done = threading.Event(), threading.Event(), threading.Event()
    refusals: list[Exception] = []

    @retinue.tool
    def late(ctx: ToolContext) -> str:
        """Work for a while, then act on the agent."""
        assert ctx.agent is not None
        entered.set()
        release.wait(REAL_WAIT)
        try:
            VERBS[verb](ctx.agent)
        except Exception as exc:
            refusals.append(exc)
        finally:
            done.set()
        return "late"

    model = ScriptedModel([CallTools([ToolCallSpec("late", "{}", id="c1")]), Reply("done")])

    async def cancelled_while_the_body_runs() -> None:
        async with retinue.open_runtime(models=model, tools=[late]) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.ask, "first")
                await trio.to_thread.run_sync(entered.wait, REAL_WAIT)
                agent.cancel("user")

    trio.run(cancelled_while_the_body_runs)
    release.set()
    assert done.wait(REAL_WAIT)
    [refusal] = refusals
    assert isinstance(refusal, retinue.AgentError)
    assert refusal.code == "CALL_ENDED"
    # The session is read first, through the handle: that read is what is refused then.
    assert str(refusal).startswith(f"{verb if verb.startswith('agent') else 'agent.session'} ")
