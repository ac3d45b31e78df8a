"""The per-step tool scheduler's internal failures and the late aborts and replacements around
them: every call is answered and the driver survives (SPEC 9.3; T-S6; DESIGN 5).

Tools record their bodies in a :class:`Probe`; orderings are forced with virtual sleeps of
distinct lengths, as in test_scheduler.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import Deny, Text
from retinue.session import Event, Session, ToolCallEvent, ToolResultEvent
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from retinue.tools import ToolExecution
from tests.helpers import OPTIONS, Next, idle_events, of_type, raises_ctrl_c, runtime, turn_ends
from tests.scenarios._scheduler_kit import (
    Probe,
    call_seq,
    check_pairing,
    codes,
    result_ids,
    results,
    spec,
    timed_tool,
)

# -- T-S6: internal failure --------------------------------------------------------------------


@pytest.mark.parametrize("cap", [1, 2])
async def test_scheduler_internal_failure_answers_every_call_and_the_driver_survives(
    autojump_clock: trio.testing.MockClock, cap: int
) -> None:
    """T-S6 / R9.22, R4.8, DESIGN 5: a failure inside the scheduler ends the turn ``error``, no call dangles.

    A ``session/event`` listener raises when c1's ``tool/result`` is appended;
    R4.8 surfaces that raise to the scheduler (the result is in the log). The
    scheduler starts nothing more but lets the bodies already running finish
    (T-S6: none is cut off halfway), and they keep their own results; calls
    never started get their ``tool/call`` record and ``ABORTED_BEFORE_DISPATCH``.
    The turn ends ``error`` carrying the listener's message, no body outlives
    the turn, ``agent/error`` reports it, and the next turn runs normally.
    """
    probe = Probe()
    read = timed_tool("read", probe)
    durations = {"c0": 1, "c1": 2, "c2": 5, "c3": 5, "c4": 5}
    model = ScriptedModel(
        [CallTools([spec("read", k, d) for k, d in durations.items()]), Reply("after")]
    )
    errors: list[BaseException] = []

    def explode(_session: object, event: Event) -> None:
        if (
            isinstance(event.data, ToolResultEvent)
            and event.data.call_id == "c1"
            and not event.data.is_error
        ):
            raise RuntimeError("observer exploded")

    async with runtime(model, tools=[read], max_parallel_tool_calls=cap) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        remove = rt.hooks.on("session/event", explode, agent=agent)
        rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error), agent=agent)
        result = await agent.ask("go")
        events = agent.session.events
        assert result.reason.kind == "error"
        assert len(errors) == 1
        found = codes(events)
        assert list(found) == list(durations)
        assert found["c0"] is None
        assert found["c1"] is None, "the raising append is in the log (R4.8)"
        failed_at = next(
            e.seq
            for e in of_type(events, "tool/result")
            if isinstance(e.data, ToolResultEvent) and e.data.call_id == "c1"
        )
        for call_id in ("c2", "c3", "c4"):
            started = call_seq(events, call_id) < failed_at
            expected = None if started else "ABORTED_BEFORE_DISPATCH"
            assert found[call_id] == expected, call_id
            assert (call_id in probe.ends) == started, call_id
        assert probe.cancelled == []
        assert sum(probe.in_flight.values()) == 0
        assert model.statistics().calls == 1
        check_pairing(events)
        remove()
        again = await agent.ask("again")
        assert again.reason.kind == "completed"
        assert agent.status == "idle"
        check_session_invariants(agent.session.events)
        # R7.45: the turn's error names the failure, not the nursery that carried it.
        assert result.reason.message is not None
        assert "observer exploded" in result.reason.message
        assert "observer exploded" in str(errors[0])


@pytest.mark.parametrize("appends_first", [False, True], ids=["raises", "appends-then-raises"])
@pytest.mark.parametrize("safe", [False, True], ids=["exclusive", "parallel"])
async def test_scheduler_failure_on_a_tool_call_append_logs_one_record_per_call(
    autojump_clock: trio.testing.MockClock, safe: bool, appends_first: bool
) -> None:
    """T-S6 / R4.8, R4.15, R9.21: a raise from c1's ``tool/call`` observer keeps one record per call.

    The ``tool/call`` event is in the log when its observer raises (R4.8), even
    when the observer appended an event of its own after it first; the
    synthetic answers must reuse it rather than log a second ``tool/call`` for
    the same id, and every call still gets exactly one result.
    """
    probe = Probe()
    tool = timed_tool("work", probe, safe=safe)

    def explode(session: Session, event: Event) -> None:
        if isinstance(event.data, ToolCallEvent) and event.data.call_id == "c1":
            if appends_first:
                session.append_custom("plugin/note", {"saw": "c1"})
            raise RuntimeError("call observer exploded")

    model = ScriptedModel(
        [CallTools([spec("work", "c0"), spec("work", "c1"), spec("work", "c2")]), Reply("after")]
    )
    async with runtime(model, tools=[tool]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        remove = rt.hooks.on("session/event", explode, agent=agent)
        result = await agent.ask("go")
        assert result.reason.kind == "error"
        events = agent.session.events
        call_ids = [e.data.call_id for e in of_type(events, "tool/call")]  # type: ignore[union-attr]
        assert sorted(call_ids) == ["c0", "c1", "c2"], call_ids
        assert sorted(result_ids(events)) == ["c0", "c1", "c2"]
        check_pairing(events)
        remove()
        assert (await agent.ask("again")).reason.kind == "completed"


async def test_scheduler_abort_answers_calls_whose_record_observer_appended_and_raised(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-S5 / R4.8, R4.15, R9.21, DESIGN 5: aborted before dispatch, each call's ``tool/call``
    record is logged once and answered, though its observer appended a note and raised.
    """
    probe = Probe()
    read = timed_tool("read", probe)
    model = ScriptedModel([CallTools([spec("read", "c1"), spec("read", "c2")]), Reply("next")])
    async with runtime(model, tools=[read]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def observer(session: Session, event: Event) -> None:
            if event.type == "assistant/message":
                agent.cancel("changed my mind")
            if isinstance(event.data, ToolCallEvent):
                session.append_custom("plugin/note", {"saw": event.data.call_id})
                raise RuntimeError("call observer exploded")

        rt.hooks.on("session/event", observer, agent=agent)
        assert (await agent.ask("go")).reason.kind == "aborted"
        events = agent.session.events
        assert [e.data.call_id for e in of_type(events, "tool/call")] == ["c1", "c2"]  # type: ignore[union-attr]
        assert codes(events) == dict.fromkeys(["c1", "c2"], "ABORTED_BEFORE_DISPATCH")
        assert probe.starts == {}
        check_pairing(events)
        check_session_invariants(events)


@pytest.mark.parametrize("post_execute", [False, True])
async def test_scheduler_abort_keeps_the_result_of_a_body_that_had_finished(
    autojump_clock: trio.testing.MockClock, post_execute: bool
) -> None:
    """R9.20, DESIGN 5: c1 (10 s) and c2 (0 s) run in parallel; c2's result waits for c1's
    in model order when a cancel lands. c1 was cancelled mid-run (``ABORTED``); c2's body
    had finished, so it keeps its own result, unless a post-execute listener has yet to
    see that result (it cannot run once the step is over), and then it is ``ABORTED`` too.
    """
    probe = Probe()
    read = timed_tool("read", probe)
    model = ScriptedModel([CallTools([spec("read", "c1", 10), spec("read", "c2", 0)]), Reply("x")])
    async with runtime(model, tools=[read], max_parallel_tool_calls=2) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        if post_execute:
            rt.hooks.on("tools/post-execute", lambda _e, _r, next_: next_(), agent=agent)
        agent.send("go")
        await probe.wait_until(lambda p: "c2" in p.starts)
        await trio.sleep(1)
        assert "c2" in probe.ends
        agent.cancel("enough")
        events = await idle_events(agent)
    assert turn_ends(events) == ["aborted"]
    assert probe.cancelled == ["c1"]
    assert result_ids(events) == ["c1", "c2"]
    assert codes(events) == {"c1": "ABORTED", "c2": "ABORTED" if post_execute else None}
    check_pairing(events)


async def test_scheduler_abort_keeps_a_denial_waiting_behind_an_earlier_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.20, T-S4: c2 is denied by pre-execute while c1 (10 s) runs; the denial waits for
    c1's result in model order when a cancel lands. The model is told c2 was refused, not
    that it was aborted before it started (it would only ask for it again)."""
    probe = Probe()
    read = timed_tool("read", probe)

    async def deny_second(execution: ToolExecution, next_: Next) -> Any:
        if execution.call_id == "c2":
            return Deny("not now")
        return await next_()

    model = ScriptedModel([CallTools([spec("read", "c1", 10), spec("read", "c2", 0)]), Reply("x")])
    async with runtime(model, tools=[read], max_parallel_tool_calls=2) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("tools/pre-execute", deny_second, agent=agent)
        agent.send("go")
        await probe.wait_until(lambda p: "c1" in p.starts)
        await trio.sleep(1)
        agent.cancel("enough")
        events = await idle_events(agent)
    assert turn_ends(events) == ["aborted"]
    assert "c2" not in probe.starts
    assert result_ids(events) == ["c1", "c2"]
    assert codes(events)["c1"] == "ABORTED"
    denial = results(events)[1]
    assert (denial.is_error, denial.content) == (True, (Text("Error: not now"),))
    check_pairing(events)


async def test_scheduler_checks_the_arguments_again_for_a_tool_replaced_after_classification(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.3, R9.13: a call runs the tool its name resolves to when it starts; arguments found
    valid by the tool that classified it are checked again by a replacement.

    w2's pre-execute listener replaces ``work`` for the agent, once w1's body
    has started, with a tool that takes other parameters: w2 gets an ``INVALID_ARGUMENTS`` result and the
    replacement's body never runs.
    """
    probe = Probe()
    ran: list[str] = []

    @retinue.tool(name="work", parallel_safe=True)
    async def other_work(path: str) -> str:
        """Work on a path.

        Args:
            path: Where to work.
        """
        ran.append(path)
        await trio.lowlevel.checkpoint()
        return path

    holder: dict[str, retinue.Agent] = {}

    async def replace_before_w2(execution: ToolExecution, next_: Next) -> Any:
        if execution.call_id == "w2":
            await trio.sleep(1)  # w1's body has started with the tool it was classified by
            rt.tools.add(other_work, agent=holder["agent"])
        return await next_()

    model = ScriptedModel(
        [CallTools([spec("work", "w1", 2), spec("work", "w2", 1)]), Reply("done")]
    )
    async with runtime(model, tools=[timed_tool("work", probe)]) as rt:
        agent = holder["agent"] = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("tools/pre-execute", replace_before_w2, agent=agent)
        assert (await agent.ask("go")).reason.kind == "completed"
        assert list(probe.starts) == ["w1"]
        assert ran == []
        assert codes(agent.session.events) == {"w1": None, "w2": "INVALID_ARGUMENTS"}
        check_pairing(agent.session.events)


async def test_scheduler_a_call_whose_step_aborted_before_its_task_ran_never_enters_its_body(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.20, R7.40: the body is a cancel point on entry: c1 was started, but the cancel from
    c2's ``tool/call`` observer came before its task ran, so a body with no await of its
    own does not run to completion behind the abort."""
    ran: list[str] = []

    @retinue.tool(parallel_safe=True)
    async def mark(label: str) -> str:
        """Note that the body ran, without awaiting anything.

        Args:
            label: Which call this is.
        """
        ran.append(label)
        return label

    model = ScriptedModel(
        [
            CallTools(
                [
                    ToolCallSpec("mark", '{"label": "c1"}', id="c1"),
                    ToolCallSpec("mark", '{"label": "c2"}', id="c2"),
                ]
            ),
            Reply("next"),
        ]
    )
    async with runtime(model, tools=[mark]) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def cancel_on_second_call(_session: object, event: Event) -> None:
            if isinstance(event.data, ToolCallEvent) and event.data.call_id == "c2":
                agent.cancel("changed my mind")

        rt.hooks.on("session/event", cancel_on_second_call, agent=agent)
        assert (await agent.ask("go")).reason.kind == "aborted"
        assert ran == []
        assert codes(agent.session.events) == {"c1": "ABORTED", "c2": "ABORTED_BEFORE_DISPATCH"}
        check_pairing(agent.session.events)


async def test_scheduler_starts_no_call_after_a_body_interrupted_by_ctrl_c(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.20, R9.21, DESIGN 5: Ctrl-C raised in c1's body ends the group: c2, next in a
    pool of one, is never started, and is answered as never dispatched, not as cut off."""
    probe = Probe()
    read = timed_tool("read", probe)

    @retinue.tool(parallel_safe=True)
    async def interrupted() -> str:
        """Be interrupted by Ctrl-C."""
        await trio.sleep(1)
        raise KeyboardInterrupt

    model = ScriptedModel(
        [
            CallTools(
                [spec("read", "c0"), ToolCallSpec("interrupted", "{}", id="c1"), spec("read", "c2")]
            )
        ]
    )
    sessions: list[Session] = []
    with raises_ctrl_c():
        async with runtime(model, tools=[read, interrupted], max_parallel_tool_calls=1) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            sessions.append(agent.session)
            await agent.ask("go")
    events = sessions[0].events
    assert list(probe.starts) == ["c0"]
    assert codes(events) == {"c0": None, "c1": "ABORTED", "c2": "ABORTED_BEFORE_DISPATCH"}
    assert turn_ends(events) == ["disposed"]
    check_pairing(events)


async def test_a_scheduler_failure_is_not_lost_to_an_abort_landing_while_started_bodies_finish(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.22, R7.39, R7.45: the scheduler fails (an observer raising on c2's ``tool/call``)
    while c1's body runs; a cancel landing while the scheduler waits for that body does not
    replace the failure: it is reported on ``agent/error`` and the turn ends ``error``."""
    probe = Probe()
    read = timed_tool("read", probe)
    model = ScriptedModel(
        [CallTools([spec("read", "c1", 10), spec("read", "c2", 0)]), Reply("after")]
    )
    errors: list[BaseException] = []

    def explode(_session: object, event: Event) -> None:
        if isinstance(event.data, ToolCallEvent) and event.data.call_id == "c2":
            raise RuntimeError("observer exploded")

    async with runtime(model, tools=[read]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        rt.hooks.on("session/event", explode, agent=agent)
        rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error), agent=agent)
        answers: list[retinue.TurnResult] = []

        async def ask() -> None:
            answers.append(await agent.ask("go"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await trio.sleep(1)
            agent.cancel("user stop")
        assert [str(error) for error in errors] == ["observer exploded"]
        assert answers[0].reason.kind == "error"
        assert answers[0].reason.message == "observer exploded"
        check_session_invariants(agent.session.events)
