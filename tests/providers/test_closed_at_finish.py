"""A stream its reader closes right after its finish is a completed call (R10.2).

``manage`` counts such a call as one that ended by itself: a success for its
admission lane, which grows a cut concurrency limit back, and no failure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import attrs
import trio
import trio.testing

from retinue import Text
from retinue.providers import (
    AdmissionController,
    AdmissionLimits,
    BlockEnd,
    BlockStart,
    Finish,
    ModelRequest,
    Stop,
    StreamChunk,
    TextDelta,
    Usage,
    UsageChunk,
    manage,
)
from tests.providers.support import make_request

USAGE = Usage(input_tokens=5, output_tokens=3)


@attrs.define
class _HeldOpen:
    """Streams an answer and its finish, then stays open until closed."""

    provider: str = "held"
    closed: int = 0

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[StreamChunk]:
        try:
            for chunk in (
                BlockStart(0, "text"),
                TextDelta(0, "hello"),
                BlockEnd(0, Text("hello")),
                UsageChunk(USAGE),
                Finish(Stop()),
            ):
                await trio.lowlevel.checkpoint()
                yield chunk
            await trio.sleep_forever()
        finally:
            self.closed += 1


def _cut_admission(provider: str) -> AdmissionController:
    """A controller whose lane for *provider*'s model ``m`` a 429 cut to one request:
    a success grows it back to two, a call that fails or is abandoned leaves it."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=8))
    admission.rate_limited(provider, "m", 0.0)
    assert admission.statistics().lanes[0].concurrency_limit == 1.0
    return admission


async def _up_to_finish(model: Any, request: ModelRequest) -> list[StreamChunk]:
    """The chunks a step reads: up to the finish, the stream then closed."""
    chunks: list[StreamChunk] = []
    async with aclosing(model.stream(request)) as stream:
        async for chunk in stream:
            chunks.append(chunk)
            if isinstance(chunk, Finish):
                break
    return chunks


async def test_a_managed_stream_read_up_to_its_finish_and_closed_is_a_success(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Closed right after its finish, the attempt leaves its lane as a success (the cut
    limit grows back) with nothing in flight and no failure counted, where it left it as
    an abandoned call."""
    model = _HeldOpen()
    admission = _cut_admission(model.provider)
    managed = manage(model, admission=admission)
    with trio.fail_after(60):
        chunks = await _up_to_finish(managed, make_request("hi", model="m"))
    assert isinstance(chunks[-1], Finish)
    assert model.closed == 1
    (lane,) = admission.statistics().lanes
    assert (lane.in_flight, lane.admitted, lane.concurrency_limit) == (0, 1, 2.0)
    assert managed.statistics().failures == 0


async def test_a_managed_stream_closed_before_its_finish_is_no_success(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A reader that stops before the finish abandons the call: the lane's cut limit stays."""
    admission = _cut_admission("held")
    managed = manage(_HeldOpen(), admission=admission)
    request = make_request("hi", model="m")
    with trio.fail_after(60):
        stream = managed.stream(request)
        chunk = await stream.__anext__()
        assert isinstance(chunk, BlockStart)
        await stream.aclose()
    (lane,) = admission.statistics().lanes
    assert (lane.in_flight, lane.concurrency_limit) == (0, 1.0)
