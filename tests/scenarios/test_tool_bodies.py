"""Tool bodies as the registry runs them: sync bodies in worker threads and what they may call
on the trio thread, coroutines a body returns, and agent verbs called off the trio thread or
after the run (R9.2, R9.7, R2.10-R2.23, R2.37).
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine

import pytest
import trio
import trio.testing

import retinue
from retinue._content import content_text
from retinue.actors import Subscription
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from retinue.tools import Tool, ToolContext, tool
from tests.helpers import OPTIONS, of_type
from tests.scenarios._tool_bodies_kit import execute, outcome

# -- a sync body reaches its agent through the trio thread --------------------------------
# Sync bodies run in worker threads, where the virtual clock would jump past every deadline
# while the thread works: these tests run on the real clock, bounded in real time.


@pytest.mark.timeout(20)
async def test_a_sync_tool_calls_its_agent_on_the_trio_thread() -> None:
    """R9.7: a sync body's ``ctx.agent.inject`` runs on the trio thread: the append, its
    observers and the subscriber's wake-up never run on the worker (that deadlocked trio).
    """
    seen: list[str] = []

    @retinue.tool
    def note(ctx: ToolContext) -> str:
        """Note something for later."""
        ctx.agent.inject("remember this")
        return f"noted by {ctx.agent.id}"

    async def follow(feed: Subscription) -> None:
        async for event in feed:
            seen.append(event.type)
            if event.type == "turn/end":
                return

    async def ask(agent: retinue.Agent) -> retinue.TurnResult:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow, agent.subscribe())
            return await agent.ask("go")

    agent, result, observer_threads = await _call_once(note, ask)
    (tool_result,) = of_type(agent.session.events, "tool/result")
    assert result.reason.kind == "completed"
    assert content_text(tool_result.data.content) == f"noted by {agent.id}"  # type: ignore[union-attr]
    assert observer_threads == {threading.get_ident()}
    assert "context/message" in seen


async def _call_once(
    body: Tool, ask: Callable[[retinue.Agent], Awaitable[retinue.TurnResult]] | None = None
) -> tuple[retinue.Agent, retinue.TurnResult, set[int]]:
    """One turn calling *body* once: the agent, the turn's result, the threads observers ran on."""
    observer_threads: set[int] = set()
    model = ScriptedModel([CallTools([ToolCallSpec(body.name, "{}", id="c1")]), Reply("ok")])
    with trio.fail_after(10):
        async with retinue.open_runtime(models=model, tools=[body]) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            rt.hooks.on(
                "session/event",
                lambda *_: observer_threads.add(threading.get_ident()),
                agent=agent,
            )
            result = await ask(agent) if ask is not None else await agent.ask("go")
    return agent, result, observer_threads


@pytest.mark.timeout(20)
async def test_a_sync_tool_appends_to_its_session_on_the_trio_thread() -> None:
    """R9.7: ``ctx.agent.session`` seen from a sync body is wrapped like the handle: an
    append through it, and the observers it wakes, run on the trio thread, not the worker.
    """

    @retinue.tool
    def record(ctx: ToolContext) -> str:
        """Record a note in the session."""
        session = ctx.agent.session
        event = session.append_custom("note/recorded", {"by": "record"})
        return f"recorded at {event.seq} of {session.id}"

    agent, result, observer_threads = await _call_once(record)
    (note,) = of_type(agent.session.events, "note/recorded")
    (tool_result,) = of_type(agent.session.events, "tool/result")
    assert result.reason.kind == "completed"
    assert content_text(tool_result.data.content) == f"recorded at {note.seq} of {agent.id}"  # type: ignore[union-attr]
    assert observer_threads == {threading.get_ident()}


@pytest.mark.timeout(20)
async def test_a_session_appended_off_the_trio_thread_is_refused_before_it_is_logged() -> None:
    """R4.8: a sync body holding its agent's session itself (not ``ctx.agent.session``) that appends
    from its worker thread while a feed is parked on it is refused before the event is logged, as a
    ``SessionError`` coded ``WRONG_THREAD``; the log and the feed go on from the trio thread. Logged
    from the worker thread, the event would lose the feed's wake-up to a bare ``RuntimeError``, and
    the feed would never wake again.
    """
    sessions: list[retinue.session.Session] = []

    @retinue.tool
    def record() -> str:
        """Record a note in the session."""
        try:
            sessions[0].append_custom("note/recorded", {"by": "record"})
        except retinue.SessionError as exc:
            return f"{exc.code}: {exc}"
        return "recorded"

    seen: list[str] = []
    turn_read = trio.Event()
    model = ScriptedModel([CallTools([ToolCallSpec("record", "{}", id="c1")]), Reply("ok")])
    with trio.fail_after(10):
        async with retinue.open_runtime(models=model, tools=[record]) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            sessions.append(agent.session)
            feed = agent.subscribe()

            async def read() -> None:
                async for event in feed:
                    seen.append(event.type)
                    if event.type == "turn/end":
                        turn_read.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read)
                result = await agent.ask("go")
                await turn_read.wait()
                feed.close()
    events = agent.session.events
    (tool_result,) = of_type(events, "tool/result")
    text = content_text(tool_result.data.content)  # type: ignore[union-attr]
    assert text.startswith("WRONG_THREAD: session 'a-session-")
    assert "from a thread other than the one its observers run on" in text
    assert of_type(events, "note/recorded") == []
    assert result.reason.kind == "completed"
    assert seen == [event.type for event in events]


@pytest.mark.timeout(20)
@pytest.mark.parametrize("verb", ["ask", "wait_idle", "dispose"])
async def test_a_sync_tool_cannot_call_its_agents_async_verbs(verb: str) -> None:
    """R9.7: an async verb of the agent from a sync body raises TypeError saying to make the
    tool async, rather than handing back a coroutine nothing can await.
    """

    class Handle:
        async def ask(self, _content: str) -> None:
            await trio.lowlevel.checkpoint()

        async def wait_idle(self) -> None:
            await trio.lowlevel.checkpoint()

        async def dispose(self) -> None:
            await trio.lowlevel.checkpoint()

    @tool
    def waits(ctx: ToolContext) -> str:
        """Try to wait."""
        method = getattr(ctx.agent, verb)
        return str(method("x") if verb == "ask" else method())

    with trio.fail_after(10):
        text, error = outcome(await execute(waits, {}, agent=Handle()))
    assert (
        text
        == f"Error: agent.{verb} is async and a sync tool body cannot await it: make the tool async"
    )
    assert error is None


@pytest.mark.timeout(20)
async def test_a_sync_tool_using_its_agent_inside_a_trio_run_of_its_own_is_refused() -> None:
    """R9.7: a sync body that runs a trio.run of its own in its worker thread (a trio-based client
    library, say) and calls ``ctx.agent`` inside it is refused with an error saying so; the verb
    does not run in the worker thread, off the runtime's trio thread."""
    main_thread = threading.get_ident()
    injected: list[int] = []

    class Handle:
        def inject(self, _content: str) -> None:
            injected.append(threading.get_ident())

    @tool
    def fetch(ctx: ToolContext) -> str:
        """Fetch with a trio-based client."""
        assert ctx.agent is not None
        agent = ctx.agent

        async def inside() -> None:
            await trio.lowlevel.checkpoint()
            agent.inject("fetched")

        trio.run(inside)
        return "fetched"

    with trio.fail_after(10):
        text, error = outcome(await execute(fetch, {}, agent=Handle()))
    assert text.startswith("Error: agent.inject was used inside a trio.run of the tool body's own")
    assert error is None
    assert injected == []

    @tool
    def direct(ctx: ToolContext) -> str:
        """Inject from the worker thread itself."""
        assert ctx.agent is not None
        ctx.agent.inject("direct")
        return "direct"

    with trio.fail_after(10):
        assert outcome(await execute(direct, {}, agent=Handle())) == ("direct", None)
    assert injected == [main_thread]


def _logged(fn: Callable[..., object]) -> Callable[..., object]:
    """A plain sync decorator, as logging or metrics wrappers are written."""

    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> object:
        return fn(*args, **kwargs)

    return wrapper


@pytest.mark.timeout(20)
async def test_a_sync_wrapper_of_an_async_tool_is_awaited() -> None:
    """R9.7: a ``functools.wraps`` sync wrapper of an async function runs as async; in a
    worker thread its coroutine could never be awaited and every call failed.
    """

    @tool
    @_logged
    async def search(query: str) -> str:
        """Search."""
        await trio.lowlevel.checkpoint()
        return f"found {query}"

    with trio.fail_after(10):
        assert outcome(await execute(search, {"query": "trio"})) == ("found trio", None)


@pytest.mark.timeout(20)
async def test_a_sync_body_returning_a_coroutine_is_closed_and_reported() -> None:
    """R9.7: a sync body that returns a coroutine (its wrapper keeps no ``__wrapped__``) gets
    an error saying what to do; the coroutine is closed, never leaked.
    """
    started: list[str] = []

    async def _search(query: str) -> str:
        started.append(query)
        await trio.lowlevel.checkpoint()
        return query

    @tool
    def search(query: str) -> Awaitable[str]:
        """Search."""
        return _search(query)

    with trio.fail_after(10):
        text, _ = outcome(await execute(search, {"query": "trio"}))
    assert text.startswith('Error: tool "search" runs as a sync function in a worker thread')
    assert "returned a coroutine, which was closed unawaited: make the body async" in text
    assert started == []


async def test_an_async_body_returning_a_coroutine_is_closed_and_reported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.2: an async body that returns a coroutine (an ``await`` left out) gets an error
    saying so, not "the return value is not JSON"; the coroutine is closed, never leaked.
    """
    returned: list[Coroutine[object, object, str]] = []

    async def _lookup(city: str) -> str:
        await trio.lowlevel.checkpoint()
        return f"sunny in {city}"

    @tool
    async def weather(city: str) -> object:
        """The weather in *city*."""
        await trio.lowlevel.checkpoint()
        returned.append(_lookup(city))
        return returned[-1]

    with trio.fail_after(10):
        text, error = outcome(await execute(weather, {"city": "Oslo"}))
    assert text == (
        "Error: the return value is a coroutine, closed unawaited: an await is missing in "
        "the tool's body"
    )
    assert error is None
    assert inspect.getcoroutinestate(returned[0]) == inspect.CORO_CLOSED


@pytest.mark.timeout(20)
async def test_a_sync_body_raising_stop_iteration_is_reported_as_its_own_error() -> None:
    """R9.2: a sync body whose ``next()`` finds nothing (a ``StopIteration``) gets that error
    back, not Python's "coroutine raised StopIteration": the body has no coroutine.
    """

    @tool
    def first_match(word: str) -> str:
        """The first known word starting with *word*."""
        return next(known for known in ("trio", "anyio") if known.startswith(word))

    @tool
    def first_named(word: str) -> str:
        """The first known word starting with *word*, or a refusal naming it."""
        raise StopIteration(f"no known word starts with {word!r}")

    with trio.fail_after(10):
        assert outcome(await execute(first_match, {"word": "tr"})) == ("trio", None)
        assert outcome(await execute(first_match, {"word": "x"})) == ("Error: StopIteration", None)
        assert outcome(await execute(first_named, {"word": "x"})) == (
            "Error: no known word starts with 'x'",
            None,
        )


# -- an agent's verbs off the trio thread or after the run --------------------------------


@pytest.mark.parametrize("verb", ["send", "steer", "inject", "cancel"])
async def test_a_verb_called_off_the_trio_thread_is_refused_before_it_changes_anything(
    verb: str,
) -> None:
    """R2.10-R2.23: an agent's verbs wake trio tasks, which only the trio thread may do.

    A sync tool holding another agent's handle (not its own ``ctx.agent``) that calls ``send`` from
    its worker thread is refused first, and the agent still answers from the trio thread: queued
    from the thread, the prompt's wake-up of the driver would be lost, and the agent would never run
    again (nor the runtime close).
    """
    model = ScriptedModel([Reply("one"), Reply("two")])
    with trio.fail_after(30):  # real time: a worker thread runs
        async with retinue.open_runtime(models=model) as rt:
            other = await rt.create_agent("other", retinue.AgentOptions(model="scripted"))
            call = getattr(other, verb)
            with pytest.raises(RuntimeError, match=r"must be called from the trio thread"):
                await trio.to_thread.run_sync(call, "from a worker thread")
            assert [event.type for event in other.session.events] == []
            result = await other.ask("from the trio thread")
    assert (result.reason.kind, result.text) == ("completed", "one")


def test_a_disposed_agent_refuses_its_verbs_as_disposed_after_its_run() -> None:
    """R2.37: after ``trio.run`` returns, a disposed agent's ``send`` and ``inject`` raise
    ``AgentDisposedError`` and ``cancel`` does nothing, as inside the run (not the
    worker-thread refusal: no run is left to call them from)."""
    agents: list[retinue.Agent] = []

    async def main() -> None:
        async with retinue.open_runtime(models=ScriptedModel([Reply("one")])) as rt:
            agents.append(await rt.create_agent("a", retinue.AgentOptions(model="scripted")))

    trio.run(main)
    [agent] = agents
    for verb in (agent.send, agent.inject):
        with pytest.raises(retinue.AgentDisposedError):
            verb("late")
    agent.cancel("late")
    assert agent.status == "disposed"
