"""Cancel in every window (SPEC 2.6, 7.6; T-C1..T-C9, T-X2, T-X11)."""

from __future__ import annotations

import enum

import pytest
import trio
import trio.testing

import retinue
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
    of_type,
    record_statuses,
    runtime,
    turn_ends,
    types_without_chunks,
)


@retinue.tool(parallel_safe=True)
async def slow(seconds: float) -> str:
    """Sleep, then answer.

    Args:
        seconds: How long to sleep.
    """
    await trio.sleep(seconds)
    return "slept"


async def test_idle_cancel_is_a_no_op(autojump_clock: trio.testing.MockClock) -> None:
    """T-C1 / R2.24: cancel on an idle agent with nothing pending changes nothing."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.cancel()
        result = await agent.ask("hello")
        assert result.reason.kind == "completed"
        assert turn_ends(agent.session.events) == ["completed"]


async def test_cancel_mid_stream_aborts_with_default_reason(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-C3 / R2.23, R2.26, R2.27: a mid-step cancel aborts the model call; the reason defaults to 'cancelled'."""
    model = ScriptedModel([Hang("partial", chunks=2), Reply("next")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(5)
        assert agent.status == "running"
        agent.cancel()
        await agent.wait_idle()
        end = of_type(agent.session.events, "turn/end")[-1]
        assert end.data.reason.kind == "aborted"  # type: ignore[union-attr]
        assert end.data.reason.reason == "cancelled"  # type: ignore[union-attr]
        assert types_without_chunks(agent.session.events)[-2:] == ["step/end", "turn/end"]
        result = await agent.ask("again")
        assert result.reason.kind == "completed"
        check_session_invariants(agent.session.events)


async def test_cancel_with_an_empty_reason_aborts_with_the_default_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.23: an empty reason is none: the turn's end and its cut-off call's synthetic result read
    'cancelled', not '' and 'cancelled ()'."""
    model = ScriptedModel([CallTools([ToolCallSpec("slow", '{"seconds": 100}')]), Reply("next")])
    async with runtime(model, tools=[slow]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(1)
        agent.cancel("")
        await agent.wait_idle()
        end = of_type(agent.session.events, "turn/end")[-1]
        assert end.data.reason.reason == "cancelled"  # type: ignore[union-attr]
        [result] = of_type(agent.session.events, "tool/result")
        assert "cancelled (cancelled)" in str(result.data.content)  # type: ignore[union-attr]
        check_session_invariants(agent.session.events)


async def test_cancel_before_start_leaves_no_trace(autojump_clock: trio.testing.MockClock) -> None:
    """T-C2 / R7.4, R7.6: a cancel between send and the driver waking drops the turn; waiters resolve."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("doomed")
        agent.cancel("never mind")
        await agent.wait_idle()
        assert list(agent.session.events) == []


async def test_cancel_inside_tool_gives_every_call_a_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X2 / R9.25: an abort during tools ends the turn aborted, every call has a result, no next step."""
    model = ScriptedModel(
        [
            CallTools(
                [ToolCallSpec("slow", '{"seconds": 100}'), ToolCallSpec("slow", '{"seconds": 100}')]
            ),
            Reply("never"),
        ]
    )
    async with runtime(model, tools=[slow]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(10)
        agent.cancel("stop it")
        events = await idle_events(agent)
        assert turn_ends(events) == ["aborted"]
        results = of_type(events, "tool/result")
        assert len(results) == 2
        assert all(r.data.is_error for r in results)  # type: ignore[union-attr]
        assert {r.data.error.code for r in results} == {"ABORTED"}  # type: ignore[union-attr]
        assert len(of_type(events, "step/start")) == 1
        assert model.statistics().calls == 1
        check_session_invariants(events)


async def test_cancel_clears_pending_prompts(autojump_clock: trio.testing.MockClock) -> None:
    """R2.25 / T-C9: cancel discards queued and steering messages; ask reports them aborted."""
    model = ScriptedModel([Hang(), Reply("after")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("first")
        await trio.sleep(1)
        agent.steer("steer me")
        async with trio.open_nursery() as nursery:
            results: list[retinue.TurnResult] = []

            async def ask() -> None:
                results.append(await agent.ask("queued"))

            nursery.start_soon(ask)
            await trio.sleep(1)
            agent.cancel("enough")
        assert results[0].reason.kind == "aborted"
        await agent.wait_idle()
        assert len(of_type(agent.session.events, "turn/start")) == 1
        assert of_type(agent.session.events, "steering/message") == []


async def test_dispose_mid_stream_ends_turn_disposed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.36, R2.38 / T-X5: disposal mid-stream ends the turn 'disposed' and emits status disposed."""
    model = ScriptedModel([Hang("x")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses = record_statuses(rt, agent)
        agent.send("go")
        await trio.sleep(1)
        await agent.dispose()
        assert agent.status == "disposed"
        assert turn_ends(agent.session.events) == ["disposed"]
        assert statuses[-1] == "disposed"
        assert rt.agents.get(agent.id) is None
        check_session_invariants(agent.session.events)


async def test_cancel_with_a_reason_that_is_not_text_is_refused_and_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.23: a refused cancel leaves the turn running and the queued prompt kept; the bad reason is
    not armed first, so the turn's end reason still builds."""
    model = ScriptedModel([Hang(), Reply("after")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("first")
        await trio.sleep(1)
        agent.send("queued")
        with pytest.raises(TypeError, match=r"^cancel reason must be a str or None, got 123$"):
            agent.cancel(123)  # type: ignore[arg-type]
        assert agent.status == "running"
        agent.cancel("really")
        agent.send("later")
        await agent.wait_idle()
        events = agent.session.events
        assert turn_ends(events) == ["aborted", "completed"]
        assert of_type(events, "turn/end")[0].data.reason.reason == "really"  # type: ignore[union-attr]
        check_session_invariants(events)


class _Why(enum.StrEnum):
    USER = "user"


class _Unprintable(str):
    __slots__ = ()

    def __str__(self) -> str:
        raise RuntimeError("no str of this reason")


@pytest.mark.parametrize("reason", [_Why.USER, _Unprintable("user")], ids=["StrEnum", "no str"])
async def test_cancel_with_a_str_subclass_logs_the_plain_str_a_reload_reads(
    autojump_clock: trio.testing.MockClock, reason: str
) -> None:
    """R2.23: a reason of a ``str`` subclass is taken as its plain text: the turn ends ``aborted``
    with the very ``str`` a reloaded log reads, its cut-off call's result says it, and the
    discarded prompt's ``ask`` gets it, where the subclass stayed in the live log only or its
    failing ``__str__`` ended the turn ``error``."""
    model = ScriptedModel([CallTools([ToolCallSpec("slow", '{"seconds": 100}')]), Reply("next")])
    async with runtime(model, tools=[slow]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(1)
        discarded: list[retinue.TurnResult] = []

        async def ask() -> None:
            discarded.append(await agent.ask("queued"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            agent.cancel(reason)
        await agent.wait_idle()
        [ended] = of_type(agent.session.events, "turn/end")
        end = ended.data.reason  # type: ignore[union-attr]
        assert (end.kind, end.reason, type(end.reason)) == ("aborted", "user", str)
        assert [(r.reason.kind, type(r.reason.reason)) for r in discarded] == [("aborted", str)]
        [result] = of_type(agent.session.events, "tool/result")
        assert "cancelled (user)" in str(result.data.content)  # type: ignore[union-attr]
        check_session_invariants(agent.session.events)
