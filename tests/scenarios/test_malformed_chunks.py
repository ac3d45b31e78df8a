"""A model streaming a malformed chunk fails its step before the chunk is logged (R4.5, R7.44)."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator

import pytest
import trio

from retinue import ModelError, Text
from retinue._request import ModelRequest
from retinue._stream import (
    STOP,
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
)
from retinue.session._codec import decode_event, encode_event
from retinue.testing import check_session_invariants
from tests.helpers import OPTIONS, of_type, runtime


class BadIndexModel:
    """Streams one text block whose delta carries *index* instead of ``0``."""

    def __init__(self, index: object) -> None:
        self.index = index

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        yield BlockStart(0, "text")
        yield TextDelta(self.index, "hi")  # type: ignore[arg-type]
        yield BlockEnd(0, Text("hi"))
        yield Finish(STOP)


@pytest.mark.parametrize("index", [True, 0.0, 10**5000], ids=["bool", "float", "too-long-int"])
async def test_malformed_chunk_ends_the_turn_in_error_and_the_log_stays_loadable(
    autojump_clock: trio.testing.MockClock, index: object
) -> None:
    """The turn ends error with MALFORMED_CHUNK; every logged event encodes to a loadable line."""
    async with runtime(BadIndexModel(index)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hello")
        events = agent.session.events
        assert result.reason.kind == "error"
        assert result.reason.code == "MALFORMED_CHUNK"
        assert "text-delta.index" in (result.reason.message or "")
        # Only the well-formed chunk before it was logged.
        assert len(of_type(events, "assistant/chunk")) == 1
        for event in events:
            assert decode_event(encode_event(event)) == event
        check_session_invariants(events)


class MixedDeltasModel:
    """Streams a text delta and then a reasoning delta on the same block index."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        yield TextDelta(0, "a")
        yield ReasoningDelta(0, "b")
        yield Finish(STOP)


async def test_a_well_formed_chunk_the_assembler_refuses_is_still_logged(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.36, R4.3: every chunk is logged as it came; only a malformed one is kept out of the log."""
    async with runtime(MixedDeltasModel()) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hello")
        events = agent.session.events
        assert result.reason.code == "INVALID_STREAM"
        logged = [event.data.chunk for event in of_type(events, "assistant/chunk")]  # type: ignore[union-attr]
        assert logged == [TextDelta(0, "a"), ReasoningDelta(0, "b")]
        check_session_invariants(events)


class NotAStreamModel:
    """Its ``stream`` returns *returned* (the misuse) the first time, then streams a reply."""

    def __init__(self, returned: object) -> None:
        self.returned: object = returned

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        returned, self.returned = self.returned, None
        if returned is not None:
            return returned  # type: ignore[return-value]
        return BadIndexModel(0).stream(request)


async def _forgot_to_yield() -> list[StreamChunk]:
    return [Finish(STOP)]


@pytest.mark.parametrize("returned", [_forgot_to_yield, list], ids=["coroutine", "list"])
async def test_a_model_stream_that_is_no_async_iterator_ends_the_turn_naming_it(
    autojump_clock: trio.testing.MockClock, returned: object
) -> None:
    """R7.36, R7.45: a ``stream`` that returns no async iterator (an ``async def`` without a yield,
    most likely) ends the turn ``error``/NOT_A_STREAM naming what it returned, not with Python's
    uncoded "'async for' requires an object with __aiter__ method"; the coroutine is closed, not
    left to warn that it was never awaited."""
    value = returned() if callable(returned) else returned
    async with runtime(NotAStreamModel(value)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result = await agent.ask("go")
        assert (result.reason.kind, result.reason.code) == ("error", "NOT_A_STREAM")
        assert f"returned a {type(value).__name__}, not an async iterator" in str(
            result.reason.message
        )
        assert (await agent.ask("again")).text == "hi"
        check_session_invariants(agent.session.events)


class NotAChunkModel:
    """Streams one text delta, then *value*, which is no stream chunk."""

    def __init__(self, value: object) -> None:
        self.value = value

    async def stream(self, request: ModelRequest) -> AsyncIterator[object]:
        yield TextDelta(0, "hi")
        yield self.value
        yield Finish(STOP)


@pytest.mark.parametrize(
    "value",
    ["hi", {"type": "text-delta", "index": 0, "text": "hi"}, None],
    ids=["str", "dict", "none"],
)
async def test_a_value_that_is_no_chunk_ends_the_turn_malformed_naming_its_type(
    autojump_clock: trio.testing.MockClock, value: object
) -> None:
    """R7.36, R7.45: the turn ends error MALFORMED_CHUNK, a ModelError naming what the model
    streamed, which is not logged; not a bare TypeError without a code."""
    async with runtime(NotAChunkModel(value)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hello")
        assert result.reason.kind == "error"
        assert result.reason.code == "MALFORMED_CHUNK"
        assert f"of type {type(value).__name__}, which is no stream chunk" in (
            result.reason.message or ""
        )
        assert isinstance(result.error, ModelError)
        assert len(of_type(agent.session.events, "assistant/chunk")) == 1
        check_session_invariants(agent.session.events)
