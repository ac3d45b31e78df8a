"""A stream its reader closes right after its finish is a completed call (R10.2).

The step reads a model's stream up to its finish and closes it there, so a
stream held open after its finish holds no turn. ``manage`` counts such a
call as one that ended by itself: a success for its admission lane, which
grows a cut concurrency limit back, and no failure. Through the real HTTP
path too: the mock server holds each stream open after its last event.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, Text
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
from retinue.providers.mock import MockReply, MockServer, ReplayPolicy, ScriptedPolicy, Timing
from tests.providers.support import ALL_FIXTURES, collect, load, make_request, mock_adapter

OPTIONS = AgentOptions(model="m")
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


async def test_a_turn_whose_managed_stream_stays_open_after_its_finish_completes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The turn completes with the answer, the stream was closed, and the lane counts the
    call a success with nothing left in flight, where the turn waited on the open stream."""
    model = _HeldOpen()
    admission = _cut_admission(model.provider)
    managed = manage(model, admission=admission)
    with trio.fail_after(60):
        async with retinue.open_runtime(models=managed) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            result = await agent.ask("hi")
    assert (result.reason.kind, result.text, result.usage) == ("completed", "hello", USAGE)
    assert model.closed == 1
    (lane,) = admission.statistics().lanes
    assert (lane.in_flight, lane.admitted, lane.concurrency_limit) == (0, 1, 2.0)
    assert managed.statistics().failures == 0


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_an_http_stream_held_open_after_its_last_event_completes_its_turn(
    autojump_clock: trio.testing.MockClock, api: str
) -> None:
    """A server holding the connection open after its last event: through the adapter and
    ``manage``, the turn completes with the answer and its usage, and the lane counts a
    success with nothing in flight. (An adapter stops reading at the terminal event and
    its stream ends after a second of draining; closed at the finish, the call counts
    the same.)"""
    reply = MockReply(text="hello there", input_tokens=5, output_tokens=3)
    server = MockServer(ScriptedPolicy([reply]), timing=Timing(linger=math.inf))
    with trio.fail_after(60):
        async with mock_adapter(api, server) as adapter:
            admission = _cut_admission(adapter.provider)
            managed = manage(adapter, admission=admission)
            async with retinue.open_runtime(models=managed) as rt:
                agent = await rt.create_agent("a", OPTIONS)
                result = await agent.ask("hi")
    assert (result.reason.kind, result.text) == ("completed", "hello there")
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (5, 3)
    (lane,) = admission.statistics().lanes
    assert (lane.in_flight, lane.admitted, lane.concurrency_limit) == (0, 1, 2.0)
    assert managed.statistics().failures == 0
    stats = server.statistics()
    # Held open after its last event, the body was closed by the client, never ended.
    assert (stats.streams_started, stats.streams_aborted) == (1, 1)


def _streamed_fixtures() -> list[str]:
    names = []
    for path in ALL_FIXTURES:
        response = json.loads(path.read_text(encoding="utf-8"))["response"]
        kind = str(response["headers"].get("content-type", ""))
        if response["status"] == 200 and kind.startswith("text/event-stream"):
            names.append(path.name)
    return names


@pytest.mark.parametrize("name", _streamed_fixtures())
async def test_a_recorded_stream_read_up_to_its_finish_loses_nothing(
    autojump_clock: trio.testing.MockClock, name: str
) -> None:
    """Each adapter yields its finish last, after the usage: a recorded stream held open
    after its last event, read up to its finish, gives every chunk read to its end."""
    exchange = load(name)
    api = {"chat.completions": "chat"}.get(exchange["api"], exchange["api"])
    request = make_request("hello")
    with trio.fail_after(60):
        async with mock_adapter(api, MockServer(ReplayPolicy.of(exchange))) as model:
            whole = (await collect(model, request)).chunks
        held = MockServer(ReplayPolicy.of(exchange), timing=Timing(linger=math.inf))
        async with mock_adapter(api, held) as model:
            read = await _up_to_finish(model, request)
    assert read == whole
    assert any(isinstance(chunk, UsageChunk) for chunk in read)
