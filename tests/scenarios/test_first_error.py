"""The first error of a turn is its end reason and is reported once (R7.45)."""

from __future__ import annotations

import trio
import trio.testing

import retinue
from retinue.session import Event
from retinue.testing import RaiseMidStream, Reply, ScriptedModel, check_session_invariants
from tests.helpers import OPTIONS, last_end_reason, runtime


async def test_a_step_error_wins_over_an_observer_failing_as_the_step_closes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.45: the model fails mid-stream, then an observer raises on the step/end that closes the
    step: the turn ends with the model's error, reported once (the observer's failure does not take
    its place)."""
    boom = retinue.ModelError("provider exploded", code="UPSTREAM_500")
    model = ScriptedModel([RaiseMidStream(boom, after_chunks=2), Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        reported: list[BaseException] = []
        rt.hooks.on("agent/error", lambda _a, _t, _s, error: reported.append(error), agent=agent)

        def observer(event: Event) -> None:
            if event.data.type == "step/end":
                raise RuntimeError("observer broke")

        agent.session.observe(observer)
        result = await agent.ask("go")
    reason = last_end_reason(agent.session.events)
    assert (reason.kind, reason.code) == ("error", "UPSTREAM_500")
    assert result.reason == reason
    assert reported == [boom]
    check_session_invariants(agent.session.events)
