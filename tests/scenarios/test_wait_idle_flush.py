"""``wait_idle()`` after an idle ``inject``: the turn's background flush is waited for (R7.2, R2.21)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import retinue
from retinue import StoreError
from retinue.hooks import HookTimeoutError
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import DelegatingStore, Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime


def _model() -> ScriptedModel:
    return ScriptedModel([Reply("answer")], repeat_last=True)


class _SlowStore(DelegatingStore):
    """A durable store whose flush takes a second (a disk or database round trip)."""

    durable = True

    def __init__(self, store: MemoryStore, *, fail: bool = False) -> None:
        super().__init__(store)
        self.fail = fail
        self.flushed_turn_ends = 0

    async def flush(self, session: Session) -> None:
        await trio.sleep(1)
        if self.fail:
            raise StoreError("the disk is full", code="WRITE_FAILED")
        await self.store.flush(session)
        self.flushed_turn_ends = sum(event.type == "turn/end" for event in session.events)


async def test_wait_idle_after_an_idle_inject_returns_once_its_turn_is_flushed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.2, R2.21, R11.7: the inject's flush runs in the background, but ``wait_idle`` after it
    means the injection turn is durably checkpointed, as after any other turn.
    """
    store = _SlowStore(MemoryStore())
    async with runtime(_model(), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("hi")
        agent.inject("a note")
        await agent.wait_idle()
        assert (agent.session.last_turn, store.flushed_turn_ends) == (2, 2)


async def test_wait_idle_waits_for_an_inject_made_while_a_flush_was_in_flight(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.2: a flush already running may miss a later injection; ``wait_idle`` waits for
    the flush that covers it, not just for the one in flight.
    """
    store = _SlowStore(MemoryStore())
    async with runtime(_model(), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.inject("first note")
        await trio.sleep(0.5)
        agent.inject("second note")
        await agent.wait_idle()
        assert (agent.session.last_turn, store.flushed_turn_ends) == (2, 2)


async def test_wait_idle_returns_after_a_failed_inject_flush_which_is_reported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.21, R7.49: a failing background flush is reported on ``agent/error`` only;
    ``wait_idle`` returns once it has ended, it does not wait for a success.
    """
    store = _SlowStore(MemoryStore(), fail=True)
    async with runtime(_model(), store=store) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors: list[tuple[object, ...]] = []
        rt.hooks.on("agent/error", lambda *args: errors.append(args[1:]), agent=agent)
        agent.inject("a note")
        started = trio.current_time()
        await agent.wait_idle()
        assert trio.current_time() - started == pytest.approx(1)
        ((turn, step, error),) = errors
        assert (turn, step) == (1, 0)
        assert isinstance(error, StoreError)
        store.fail = False  # the final flush at disposal commits it


async def test_wait_idle_returns_after_an_inject_flush_that_timed_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.49: a background flush that hangs is cut at ``flush_timeout`` and reported;
    ``wait_idle`` returns then instead of hanging with it.
    """
    errors: list[object] = []
    async with runtime(_model(), flush_timeout=5) as rt:

        async def hang(_agent: object, _session: Session) -> None:
            await trio.sleep_forever()

        agent = await rt.create_agent("a", OPTIONS)
        stop_hanging = rt.hooks.on("session/flush", hang, agent=agent)
        rt.hooks.on("agent/error", lambda *args: errors.append(args[-1]), agent=agent)
        agent.inject("a note")
        started = trio.current_time()
        await agent.wait_idle()
        assert trio.current_time() - started == pytest.approx(5)
        assert [type(error) for error in errors] == [HookTimeoutError]
        stop_hanging()  # or the final flush at disposal times out as well


async def test_wait_idle_from_the_flush_listener_of_an_inject_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An agent's own background flush cannot wait for itself: ``wait_idle`` from its
    ``session/flush`` listener raises ``WAITS_FOR_ITSELF`` at once, rather than waiting
    out the flush timeout, and an outside ``wait_idle`` returns once the flush ended.
    """
    codes: list[str | None] = []
    async with runtime(_model(), flush_timeout=30) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        async def on_flush(flushed: retinue.Agent, _session: Session) -> None:
            try:
                await flushed.wait_idle()
                codes.append(None)
            except retinue.AgentError as exc:
                codes.append(exc.code)

        rt.hooks.on("session/flush", on_flush, agent=agent)
        agent.inject("a note")
        started = trio.current_time()
        await agent.wait_idle()
        assert trio.current_time() - started < 1, "the flush waited out its timeout"
        assert codes == ["WAITS_FOR_ITSELF"]


async def test_wait_idle_on_an_inject_flush_ends_with_a_disposal_meanwhile(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.30: an agent disposed while ``wait_idle`` waits for its background flush makes
    the wait end with the teardown, after the flush and the final checkpoint.
    """
    store = _SlowStore(MemoryStore())
    async with runtime(_model(), store=store) as rt, trio.open_nursery() as nursery:
        agent = await rt.create_agent("a", OPTIONS)
        agent.inject("a note")
        returned: list[float] = []

        async def wait() -> None:
            await agent.wait_idle()
            returned.append(trio.current_time())

        nursery.start_soon(wait)
        await trio.sleep(0.5)
        await agent.dispose()
        disposed = trio.current_time()
    assert returned == [pytest.approx(disposed)]
    assert store.flushed_turn_ends == 1
