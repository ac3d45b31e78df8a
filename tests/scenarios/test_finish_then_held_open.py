"""A stream ends at its finish (R10.2): one held open after it holds no turn (R7.36).

A proxy keeping the connection, a keep-alive or a broken gateway may leave a
model's stream open after its finish chunk. The step reads no further than
the finish and closes the stream there, so the turn ends as the model said.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import attrs
import pytest
import trio
import trio.testing

from retinue import Text
from retinue.providers import (
    BlockEnd,
    BlockStart,
    Errored,
    Finish,
    ModelRequest,
    Stop,
    StreamChunk,
    TextDelta,
    Usage,
    UsageChunk,
)
from retinue.testing import RawChunks, ScriptedModel, check_session_invariants
from tests.helpers import OPTIONS, of_type, runtime

USAGE = Usage(input_tokens=7, output_tokens=2)


def _answer(text: str, finish: Finish) -> list[StreamChunk]:
    return [
        BlockStart(0, "text"),
        TextDelta(0, text),
        BlockEnd(0, Text(text)),
        UsageChunk(USAGE),
        finish,
    ]


@attrs.define
class HeldOpen:
    """A model whose stream yields *chunks*, then *after* (which break R10.2), then waits for
    good; it notes whether the code past its last chunk ran and whether it was closed."""

    chunks: list[StreamChunk]
    after: list[StreamChunk] = attrs.field(factory=list)
    went_on: bool = False
    closed_at: float | None = None

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        try:
            for chunk in self.chunks:
                yield chunk
            self.went_on = True
            for chunk in self.after:
                yield chunk
            await trio.sleep_forever()
        finally:
            self.closed_at = trio.current_time()


async def test_a_turn_ends_at_a_finish_whose_stream_stays_open(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The model's text and usage are the turn's, and its stream was closed at the finish,
    where the step waited on the open stream until the turn was cancelled."""
    model = HeldOpen(_answer("hello there", Finish(Stop())))
    with trio.fail_after(60):
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            result = await agent.ask("hi")
    assert result.reason.kind == "completed"
    assert result.text == "hello there"
    assert result.usage == USAGE
    assert model.closed_at is not None
    assert not model.went_on
    check_session_invariants(agent.session.events)


async def test_a_scripted_stream_held_open_after_its_finish_ends_its_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``RawChunks(..., hang=True)`` streams a finish and stays open: the turn completes."""
    model = ScriptedModel([RawChunks(_answer("done", Finish(Stop())), hang=True)])
    with trio.fail_after(60):
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            result = await agent.ask("hi")
    assert (result.reason.kind, result.text) == ("completed", "done")
    assert model.statistics().calls == 1


async def test_a_failed_finish_of_a_stream_held_open_ends_its_turn_in_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A ``finish{error}`` ends the turn with its code as when the stream ends there."""
    model = HeldOpen(_answer("partial", Finish(Errored("upstream broke", code="UPSTREAM"))))
    with trio.fail_after(60):
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            result = await agent.ask("hi")
    assert result.reason.kind == "error"
    assert result.reason.code == "UPSTREAM"  # type: ignore[union-attr]
    assert model.closed_at is not None


async def test_chunks_after_a_finish_are_never_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A model that streams on past its finish (R10.2 forbids it) is closed at the finish:
    the chunks after it are neither logged nor part of the answer, a second finish included."""
    model = HeldOpen(
        _answer("kept", Finish(Stop())),
        after=[TextDelta(0, " and more"), UsageChunk(Usage(1, 1)), Finish(Errored("late"))],
    )
    with trio.fail_after(60):
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            result = await agent.ask("hi")
    assert (result.reason.kind, result.text, result.usage) == ("completed", "kept", USAGE)
    assert not model.went_on
    chunks = [event.data.chunk for event in of_type(agent.session.events, "assistant/chunk")]  # type: ignore[union-attr]
    assert chunks == model.chunks
    check_session_invariants(agent.session.events)


def test_raw_chunks_take_only_a_bool_for_hang() -> None:
    """A truthy str would be taken as yes."""
    with pytest.raises(TypeError, match=r"RawChunks\.hang must be a bool"):
        RawChunks([Finish(Stop())], hang="no")  # type: ignore[arg-type]
