"""A step whose stream ends ``finish{error}`` or ``finish{aborted}`` logs no message to carry its
usage (R7.36); the turn's usage still counts what its logged usage chunk says (R10.5)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

import retinue
from retinue._request import ModelRequest
from retinue._stream import (
    ABORTED,
    TOOL_CALLS,
    Errored,
    Finish,
    FinishReason,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from retinue.loop import summarize_turn
from retinue.testing import check_session_invariants
from tests.helpers import OPTIONS, echo, of_type, runtime


class FailsSecondStep:
    """Calls a tool with usage (2, 1), then streams text and usage (5, 3) and ends *failed*."""

    def __init__(self, failed: FinishReason) -> None:
        self.failed = failed
        self.steps = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        self.steps += 1
        if self.steps == 1:
            yield ToolCallDelta(0, "c1", "echo", '{"text": "x"}')
            yield UsageChunk(Usage(2, 1))
            yield Finish(TOOL_CALLS)
            return
        yield TextDelta(0, "partial")
        yield UsageChunk(Usage(5, 3))
        yield Finish(self.failed)


@pytest.mark.parametrize(
    ("failed", "code"),
    [(Errored("overloaded", "OVERLOADED"), "OVERLOADED"), (ABORTED, "ABORTED")],
    ids=["error", "aborted"],
)
async def test_a_failed_step_s_usage_counts_in_the_turn_s_usage(
    autojump_clock: trio.testing.MockClock, failed: FinishReason, code: str
) -> None:
    """R7.36, R10.5: the turn ends error and its usage sums both steps' usage, the failed
    step's read from its logged usage chunk, as the log's summary of the turn reads it."""
    async with runtime(FailsSecondStep(failed), tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        events = agent.session.events
        assert (result.reason.kind, result.reason.code) == ("error", code)
        assert len(of_type(events, "assistant/message")) == 1
        assert result.usage == Usage(7, 4)
        assert summarize_turn(events, 1) == (result.text, result.usage)
        check_session_invariants(events)


class _FailsThen:
    """Streams usage (1, 5) and ``finish{error}``, at one virtual second a chunk; closed,
    it takes a second more (*raises*: then raises)."""

    def __init__(self, *, raises: bool) -> None:
        self.raises = raises

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        try:
            for chunk in (UsageChunk(Usage(1, 5)), Finish(Errored("overloaded", "OVERLOADED"))):
                await trio.sleep(1)
                yield chunk
        finally:
            await trio.sleep(1)
            if self.raises:
                raise ConnectionError("reset after the error event")


@pytest.mark.parametrize("how", ["cancelled", "raised"])
async def test_a_failed_finish_s_usage_counts_whatever_ends_the_stream_after_it(
    autojump_clock: trio.testing.MockClock, how: str
) -> None:
    """R7.36, R10.5: a cancel landing after the ``finish{error}`` chunk, or the stream raising
    past it, while the stream is closed, still counts the usage the log holds for the step,
    as the log's summary of the turn reads it (a crashed turn's answer), where the live
    result counted none."""
    async with runtime(_FailsThen(raises=how == "raised")) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        with trio.fail_after(10):
            if how == "cancelled":
                async with trio.open_nursery() as nursery:
                    asked: list[retinue.TurnResult] = []

                    async def ask() -> None:
                        asked.append(await agent.ask("go"))

                    nursery.start_soon(ask)
                    await trio.sleep(2.5)
                    agent.cancel("stop")
                (result,) = asked
            else:
                result = await agent.ask("go")
        events = agent.session.events
        assert result.reason.kind == ("aborted" if how == "cancelled" else "error")
        assert result.usage == Usage(1, 5)
        assert summarize_turn(events, 1)[1] == result.usage
        check_session_invariants(events)
