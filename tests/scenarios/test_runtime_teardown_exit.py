"""The runtime's own exit: an error or group from its body, a cancelled scope around it,
and the bound on its agents' final detach (SPEC R2.36, R7.49, R12.9, R12.10)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue.loop import AgentCore
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    DelegatingStore,
    Hang,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import DEADLINE, OPTIONS, nap, turn_ends


class BodyError(Exception):
    """An error the body of ``async with open_runtime(...)`` raises."""


async def test_an_error_from_the_runtime_body_comes_out_as_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: the runtime's nursery is an implementation detail; an exception raised in
    the body of ``async with open_runtime(...)`` reaches ``except`` as itself, with its
    cause and context, once every agent has been disposed.
    """
    caught: BaseException | None = None
    agents: list[retinue.Agent] = []
    try:
        with trio.fail_after(600):
            async with retinue.open_runtime(models=ScriptedModel([Reply("hi")])) as rt:
                agents.append(await rt.create_agent("a", OPTIONS))
                try:
                    raise KeyError("context")
                except KeyError:
                    raise BodyError("boom") from ValueError("cause")
    except BodyError as exc:
        caught = exc
    except BaseException as exc:  # reported by the assertion below
        caught = exc
    assert isinstance(caught, BodyError), f"got {type(caught).__name__}: {caught!r}"
    assert isinstance(caught.__cause__, ValueError)
    assert isinstance(caught.__context__, KeyError)
    assert agents[0].status == "disposed"


class BodyGroup(ExceptionGroup[Exception]):
    """A group subclass with no ``derive`` of its own: its copies are plain groups."""


@pytest.mark.parametrize("raised", ["group", "subclass", "nursery"])
async def test_a_group_from_the_runtime_body_comes_out_as_raised(
    autojump_clock: trio.testing.MockClock, raised: str
) -> None:
    """R12.10: an exception group the body raises (its own, a subclass of it, or one of its
    nurseries') comes out as that group, not wrapped in the runtime nursery's group: the nursery
    hands back a copy of it, which must not be taken for another error."""
    leaf = BodyError("boom")
    caught: BaseException | None = None
    try:
        with trio.fail_after(600):
            async with retinue.open_runtime(models=ScriptedModel([Reply("hi")])):
                if raised == "group":
                    raise ExceptionGroup("mine", [leaf])
                if raised == "subclass":
                    raise BodyGroup("mine", [leaf])
                async with trio.open_nursery():
                    raise leaf
    except BaseException as exc:  # reported by the assertions below
        caught = exc
    assert isinstance(caught, ExceptionGroup), f"got {type(caught).__name__}: {caught!r}"
    assert caught.exceptions == (leaf,), f"wrapped: {caught!r}"
    assert isinstance(caught, BodyGroup) == (raised == "subclass")


async def test_a_group_of_ctrl_c_from_the_runtime_body_comes_out_as_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: a group the body raises holding only Ctrl-C is the body's own error and
    comes out as that group; only Ctrl-C landing in an agent's task comes out bare."""
    interrupt = KeyboardInterrupt()
    caught: BaseException | None = None
    try:
        with trio.fail_after(600):
            async with retinue.open_runtime(models=ScriptedModel([Reply("hi")])):
                raise BaseExceptionGroup("mine", [interrupt])
    except BaseException as exc:  # reported by the assertions below
        caught = exc
    assert isinstance(caught, BaseExceptionGroup), f"got {type(caught).__name__}: {caught!r}"
    assert (caught.message, caught.exceptions) == ("mine", (interrupt,))


async def test_a_queued_ask_is_settled_disposed_when_the_runtime_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.36, R12.10: cancelling the scope around the runtime disposes its agents; an
    ``ask`` made from outside that scope, queued behind the open turn, gets ``disposed``.
    """
    ready = trio.Event()
    box: dict[str, retinue.Agent] = {}
    results: list[retinue.TurnResult] = []
    settled = trio.Event()
    service_scope = trio.CancelScope()

    async def service() -> None:
        with service_scope:
            async with retinue.open_runtime(models=ScriptedModel([Hang("thinking")])) as rt:
                box["a"] = await rt.create_agent("a", OPTIONS)
                ready.set()
                await trio.sleep_forever()

    async def ask() -> None:
        results.append(await box["a"].ask("second"))
        settled.set()

    with trio.fail_after(600):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service)
            await ready.wait()
            box["a"].send("first")
            await trio.sleep(1)
            nursery.start_soon(ask)
            await trio.sleep(1)
            service_scope.cancel()
            with trio.move_on_after(60) as waited:
                await settled.wait()
            assert not waited.cancelled_caught, "the queued ask was never settled"
    assert [result.reason.kind for result in results] == ["disposed"]
    assert turn_ends(box["a"].session.events) == ["disposed"]


async def test_an_ask_queued_in_a_restart_pause_is_settled_when_the_runtime_is_cancelled(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R2.36, R12.10, DESIGN 4: an ``ask`` kept queued across driver crashes gets ``disposed``
    when the scope around the runtime is cancelled during the restart pause.

    Breaks ``AgentCore.set_status("running")`` twice, so the second restart
    waits out a back-off pause with the prompt still queued (a crash keeps
    it for the next driver). No driver runs when the cancel lands: the
    teardown itself must answer the asker.
    """
    real = AgentCore.set_status
    crashes: list[int] = []

    def set_status(self: AgentCore, status: Any) -> None:
        if status == "running" and len(crashes) < 2:
            crashes.append(1)
            raise RuntimeError(f"set_status bug #{len(crashes)}")
        real(self, status)

    monkeypatch.setattr(AgentCore, "set_status", set_status)
    ready = trio.Event()
    box: dict[str, retinue.Agent] = {}
    results: list[retinue.TurnResult] = []
    settled = trio.Event()
    service_scope = trio.CancelScope()
    policy = retinue.RestartPolicy(max_restarts=5, backoff=20)

    async def service() -> None:
        with service_scope:
            async with retinue.open_runtime(
                models=ScriptedModel([Reply("late")]), restart=policy
            ) as rt:
                box["a"] = await rt.create_agent("a", OPTIONS)
                ready.set()
                await trio.sleep_forever()

    async def ask() -> None:
        results.append(await box["a"].ask("stuck"))
        settled.set()

    with trio.fail_after(600):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service)
            await ready.wait()
            nursery.start_soon(ask)
            await trio.sleep(10)
            assert len(crashes) == 2
            assert not settled.is_set()
            service_scope.cancel()
            with trio.move_on_after(60) as waited:
                await settled.wait()
            assert not waited.cancelled_caught, "the queued ask was never settled"
    assert [result.reason.kind for result in results] == ["disposed"]
    assert list(box["a"].session.events) == []


async def test_open_turns_end_disposed_when_the_scope_around_the_runtime_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.36, R12.10: a cancellation from outside the runtime is its teardown; turns it
    interrupts (in a tool call, or waiting on the model) end ``disposed``, not ``aborted``.
    """
    model = ScriptedModel(
        {
            "tools": [CallTools([ToolCallSpec("nap", '{"seconds": 1000}', id="t1")])],
            "hang": [Hang("thinking")],
        }
    )
    agents: list[retinue.Agent] = []
    gone: list[str] = []
    with trio.fail_after(600), trio.move_on_after(10):
        async with retinue.open_runtime(models=model, tools=[nap]) as rt:
            rt.hooks.on("agent/disposed", lambda agent: gone.append(agent.id))
            for name in ("tools", "hang"):
                agents.append(await rt.create_agent(name, retinue.AgentOptions(model=name)))
                agents[-1].send("go")
            await trio.sleep_forever()
    for agent in agents:
        assert agent.status == "disposed"
        assert turn_ends(agent.session.events) == ["disposed"], agent.id
        check_session_invariants(agent.session.events)
    assert sorted(gone) == sorted(agent.id for agent in agents)


class _HangingDetach(DelegatingStore):
    """A memory store whose final detach never returns (a store that hangs)."""

    async def detach(self, session: Session) -> None:
        await trio.sleep_forever()


@pytest.mark.timeout(30)  # a hang inside the teardown's shield is out of the virtual clock's reach
async def test_a_store_that_hangs_on_the_final_detach_cannot_keep_the_runtime_open(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.9, R12.10: the final detach of a teardown is bounded by ``flush_timeout``, like
    every turn's flush, so leaving ``open_runtime`` ends even when the store hangs.
    """
    store = _HangingDetach(MemoryStore())
    with trio.fail_after(100):
        async with retinue.open_runtime(
            models=ScriptedModel([Reply("hi")]), store=store, flush_timeout=5
        ) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            await agent.ask("hello")
    assert trio.current_time() == pytest.approx(5, abs=0.5)
    assert agent.status == "disposed"


@pytest.mark.parametrize("bound", [0, -1.0, float("nan")])
async def test_open_runtime_refuses_a_flush_timeout_that_is_not_a_positive_number(
    autojump_clock: trio.testing.MockClock,
    bound: float,
) -> None:
    """R7.49, R12.9: ``flush_timeout`` bounds every flush and the final detach; zero, a
    negative number or NaN (which would silently mean no bound) is a ConfigError naming it.
    """
    with (
        trio.fail_after(DEADLINE),
        pytest.raises(retinue.ConfigError, match="flush_timeout must be a positive number"),
    ):
        async with retinue.open_runtime(models=ScriptedModel([]), flush_timeout=bound):
            pass  # pragma: no cover - refused before the body runs


@pytest.mark.parametrize("raised", ["error", "ctrl-c"])
async def test_what_the_body_raises_under_a_cancel_comes_out_as_raised(
    autojump_clock: trio.testing.MockClock, raised: str
) -> None:
    """R12.10: an error, or Ctrl-C, the body raises as a cancel around the runtime comes (a deadline
    passing as it fails, say) comes out as itself, as one raised without a cancel does. The store's
    close, cut short by the cancel, must not raise Cancelled in its place for the scope to swallow,
    leaving nothing to come out; nor may it come in the runtime nursery's group beside the Cancelled
    each agent's task ended with, which the scope takes out, leaving a group that ``except
    BodyError`` (or ``KeyboardInterrupt``) misses."""
    caught: BaseException | None = None
    try:
        with trio.fail_after(600), trio.CancelScope() as scope:
            async with retinue.open_runtime(models=ScriptedModel([Reply("hi")])) as rt:
                await (await rt.create_agent("a", OPTIONS)).ask("hello")
                scope.cancel()
                if raised == "error":
                    raise BodyError("boom")
                raise KeyboardInterrupt
    except BaseException as exc:  # reported by the assertion below
        caught = exc
    expected = BodyError if raised == "error" else KeyboardInterrupt
    assert type(caught) is expected, f"got {caught!r}"


async def test_ctrl_c_in_an_agent_under_a_cancel_comes_out_as_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.10: Ctrl-C landing in an agent's tool just as a cancel around the runtime comes out as
    the KeyboardInterrupt it is, not in nested groups beside the Cancelled of the body and of the
    other agent."""
    scope = trio.CancelScope()

    @retinue.tool(name="interrupted")
    async def interrupted() -> str:
        """Ctrl-C lands while this tool runs, as a cancel around the runtime comes."""
        await trio.sleep(1)
        scope.cancel()
        raise KeyboardInterrupt

    model = ScriptedModel({"work": [CallTools([ToolCallSpec("interrupted", "{}")])]})
    caught: BaseException | None = None
    try:
        with trio.fail_after(600), scope:
            async with retinue.open_runtime(models=model, tools=[interrupted]) as rt:
                idle = await rt.create_agent("idle", OPTIONS)
                worker = await rt.create_agent("worker", retinue.AgentOptions(model="work"))
                worker.send("go")
                await idle.wait_idle()
                await trio.sleep_forever()
    except BaseException as exc:  # reported by the assertion below
        caught = exc
    assert type(caught) is KeyboardInterrupt, f"got {caught!r}"
