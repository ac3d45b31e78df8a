"""The runtime's methods called inside another thread's ``trio.run`` (a sync tool body's,
say) are refused, and the runtime goes on (SPEC R12.1, R12.10)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio

import retinue
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS

# Real seconds: a refusal missed corrupts the run, which then hangs past any trio deadline.
pytestmark = pytest.mark.timeout(30)

Call = Callable[[retinue.Runtime, retinue.Agent], Awaitable[object]]

CALLS: dict[str, Call] = {
    "create_agent": lambda rt, _agent: rt.create_agent("b", OPTIONS),
    "resume_agent": lambda rt, agent: rt.resume_agent(agent.id, OPTIONS),
    "start_forked": lambda rt, agent: rt.start_forked(rt.fork_agent_session(agent.id, "fork")),
    "aclose": lambda rt, _agent: rt.aclose(),
}


@pytest.mark.parametrize("method", sorted(CALLS))
async def test_a_runtime_method_called_from_another_trio_run_is_refused(method: str) -> None:
    """R12.1, R12.10: refused before anything is done, naming the run to call from, as an agent's
    verbs are: ``create_agent`` and ``aclose`` end in no trio ``TrioInternalError`` that would leave
    an agent published from the wrong run, or the runtime closing with every agent left live."""
    call = CALLS[method]
    # Real time: a worker thread runs its own trio.run.
    with trio.fail_after(10):
        async with retinue.open_runtime(
            models=ScriptedModel([Reply("ok")], repeat_last=True)
        ) as rt:
            agent = await rt.create_agent("a", OPTIONS, session_id="a")
            await agent.ask("stored")
            if method == "resume_agent":
                await agent.dispose()

            async def in_its_own_run() -> None:
                await call(rt, agent)

            with pytest.raises(RuntimeError, match=r"from its own trio run, not from"):
                await trio.to_thread.run_sync(trio.run, in_its_own_run)
            assert not rt.closing
            live = rt.agents.list()
            assert live == ([] if method == "resume_agent" else [agent])
            again = await call(rt, agent)  # from the runtime's run: served
            if isinstance(again, retinue.Agent):
                assert (await again.ask("still served")).reason.kind == "completed"
