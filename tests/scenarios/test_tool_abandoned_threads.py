"""Sync tool bodies abandoned at their timeout: the threads they keep are bounded (R9.2, R9.7)."""

from __future__ import annotations

import threading

import pytest
import trio

from retinue._content import content_text
from retinue.hooks import HookBus
from retinue.session import ToolErrorInfo
from retinue.tools import ToolExecution, ToolExecutionResult, ToolRegistry, tool
from retinue.tools._body import ABANDONED_THREADS, TOOL_THREADS

# The bodies block real threads, where the virtual clock would jump past every deadline
# while the threads work: these tests run on the real clock, bounded in real time.
pytestmark = pytest.mark.timeout(30)

EXHAUSTED = ToolErrorInfo("ToolError", "TOOL_THREADS_EXHAUSTED")


class Hang:
    """A sync body that blocks on a thread event, counting the calls that entered it.

    Built in the trio thread; ``all_entered`` is set there once *expected* calls entered.
    """

    def __init__(self, expected: int) -> None:
        self.release = threading.Event()
        self.entered = 0
        self.all_entered = trio.Event()
        self._expected = expected
        self._token = trio.lowlevel.current_trio_token()
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            self.entered += 1
            if self.entered == self._expected:
                self._token.run_sync_soon(self.all_entered.set)
        self.release.wait(20)
        return "late"


async def run(registry: ToolRegistry, name: str, index: int) -> ToolExecutionResult:
    return await registry.execute(ToolExecution(f"{name}-{index}", name, {}))


async def test_abandoned_sync_bodies_keep_a_bounded_number_of_threads() -> None:
    """R9.2: a sync tool that hangs on every call and times out each time keeps at most
    ABANDONED_THREADS threads beyond TOOL_THREADS; later sync calls, of any sync tool, fail
    at once with TOOL_THREADS_EXHAUSTED naming the limit instead of starting a thread each.
    An async tool still runs, and sync tools run again once the abandoned bodies return.
    """
    limit = TOOL_THREADS + ABANDONED_THREADS
    hang = Hang(expected=limit)

    @tool(timeout=0.01)
    def stuck() -> str:
        """Block like a request without a timeout."""
        return hang()

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @tool
    async def ping() -> str:
        """Answer from the trio thread."""
        await trio.lowlevel.checkpoint()
        return "pong"

    registry = ToolRegistry(HookBus(), [stuck, add, ping])
    try:
        with trio.fail_after(20):
            results = [await run(registry, "stuck", index) for index in range(limit)]
            # Each abandoned body enters on its own thread, whenever the machine runs it.
            await hang.all_entered.wait()
            results += [await run(registry, "stuck", index) for index in range(limit, limit + 20)]
            refused_add = await registry.execute(ToolExecution("a-1", "add", {"a": 1, "b": 2}))
            pinged = await run(registry, "ping", 0)
            entered = hang.entered
    finally:
        hang.release.set()
    assert entered == limit, "a refused call started a body of its own"
    assert {result.error for result in results[:limit]} == {
        ToolErrorInfo("ToolError", "TOOL_TIMEOUT")
    }
    assert {result.error for result in results[limit:]} == {EXHAUSTED}
    assert refused_add.error == EXHAUSTED
    assert f"all {limit} worker threads" in content_text(refused_add.content)
    assert content_text(pinged.content) == "pong"

    with trio.fail_after(20):
        while (
            added := await registry.execute(ToolExecution("a-2", "add", {"a": 1, "b": 2}))
        ).error:
            assert added.error == EXHAUSTED
            await trio.sleep(0.01)
    assert content_text(added.content) == "3"


async def test_sync_bodies_that_return_in_time_never_count_as_abandoned() -> None:
    """R9.2: sync calls that finish within their timeout leave no thread behind: many more
    of them than the thread limit all run.
    """

    @tool(timeout=5)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    registry = ToolRegistry(HookBus(), [add])
    with trio.fail_after(20):
        for index in range(3 * (TOOL_THREADS + ABANDONED_THREADS)):
            result = await registry.execute(
                ToolExecution(f"a-{index}", "add", {"a": index, "b": 1})
            )
            assert content_text(result.content) == str(index + 1)
