"""One ``open_runtime(...)`` opens one runtime, once (SPEC R12.1, R12.10)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import retinue
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS

ENTERED = r"^this open_runtime\(\.\.\.\) was entered already: each call opens one runtime, once"


async def test_entering_an_open_runtime_twice_is_refused_saying_so(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.1: entered again inside itself or after its exit, it raises a RuntimeError saying to call
    open_runtime again, not ``'_AsyncGeneratorContextManager' object has no attribute 'args'``; the
    runtime it opened runs on undisturbed."""
    with trio.fail_after(600):
        opening = retinue.open_runtime(models=ScriptedModel([Reply("ok")], repeat_last=True))
        async with opening as rt:
            with pytest.raises(RuntimeError, match=ENTERED):
                await opening.__aenter__()
            agent = await rt.create_agent("a", OPTIONS)
            assert (await agent.ask("still open?")).reason.kind == "completed"
        assert agent.status == "disposed"
        with pytest.raises(RuntimeError, match=ENTERED):
            await opening.__aenter__()


async def test_an_open_runtime_decorates_a_function_opening_a_runtime_per_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.1: ``@open_runtime(...)`` on an async function runs each call inside a runtime of its
    own, as a generator-made context manager does; calling it raises no ``'_EnteredOnce' object is
    not callable``."""
    ran: list[int] = []
    decorating = retinue.open_runtime(models=ScriptedModel([Reply("ok")], repeat_last=True))

    @decorating  # type: ignore[operator]
    async def in_a_runtime(number: int) -> None:
        ran.append(number)

    with trio.fail_after(600):
        await in_a_runtime(1)
        await in_a_runtime(2)
    assert ran == [1, 2]
