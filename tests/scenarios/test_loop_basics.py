"""Basic turns end to end (SPEC 7, T-L1, T-L2, T-L4, T-L12)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import trio

from retinue import ModelError, Text
from retinue._request import ModelRequest
from retinue._stream import STOP, BlockEnd, BlockStart, Finish, StreamChunk, TextDelta
from retinue.providers import Usage
from retinue.session import AssistantMessage, Event, ToolResultEvent, TurnEnd
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import (
    OPTIONS,
    echo,
    of_type,
    record_statuses,
    runtime,
    texts,
    turn_ends,
    types_without_chunks,
)


async def test_simple_turn_event_order(autojump_clock: trio.testing.MockClock) -> None:
    """T-L1: a simple turn logs boundaries, header, chunks, message with usage; history is [user, assistant]."""
    model = ScriptedModel([Reply("hello there", chunks=3, usage=Usage(3, 2))])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hi")
        events = agent.session.events
        assert types_without_chunks(events) == [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        assert len(of_type(events, "assistant/chunk")) >= 3
        assert result.reason.kind == "completed"
        assert result.text == "hello there"
        assert result.usage == Usage(3, 2)
        roles = [message.role for message in agent.session.derive_messages()]
        assert roles == ["user", "assistant"]
        message = of_type(events, "assistant/message")[0]
        assert isinstance(message.data, AssistantMessage)
        assert message.data.usage == Usage(3, 2)
        check_session_invariants(events)


async def test_tool_round_trip_results_in_model_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-L2: tool calls run, results are logged in model order and the model sees them."""
    model = ScriptedModel(
        [
            CallTools(
                [ToolCallSpec("echo", '{"text": "one"}'), ToolCallSpec("echo", '{"text": "two"}')]
            ),
            Reply("done"),
        ]
    )
    async with runtime(model, tools=[echo]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
        assert result.reason.kind == "completed"
        results = [event.data for event in of_type(agent.session.events, "tool/result")]
        assert all(isinstance(data, ToolResultEvent) for data in results)
        texts = [data.content[0].text for data in results]  # type: ignore[union-attr]
        assert texts == ["echo: one", "echo: two"]
        second_request = model.requests[1]
        assert [m.role for m in second_request.messages] == ["user", "assistant", "user", "user"]
        check_session_invariants(agent.session.events)


async def test_consecutive_sends_are_separate_turns(autojump_clock: trio.testing.MockClock) -> None:
    """T-P2: settled sends each run their own turn, numbered 1..n."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        for index in range(3):
            agent.send(f"m{index}")
            await agent.wait_idle()
        starts = [event.data.turn for event in of_type(agent.session.events, "turn/start")]  # type: ignore[union-attr]
        assert starts == [1, 2, 3]
        assert turn_ends(agent.session.events) == ["completed"] * 3


async def test_sync_burst_is_one_turn(autojump_clock: trio.testing.MockClock) -> None:
    """T-P1 / R3.8: a synchronous burst of sends before the driver wakes is one turn, no
    message lost, and the agent's status goes idle, running, idle once."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        statuses = record_statuses(rt, agent)
        for index in range(4):
            agent.send(f"m{index}")
        await agent.wait_idle()
        assert len(of_type(agent.session.events, "turn/start")) == 1
        prompts = of_type(agent.session.events, "user/message")
        assert [texts(prompt.data.content) for prompt in prompts] == ["m0", "m1", "m2", "m3"]  # type: ignore[union-attr]
        assert statuses == ["running", "idle"]


class _PlainChunks:
    """An async iterator without ``aclose``: all the Model protocol asks of a stream."""

    def __init__(self, chunks: list[StreamChunk]) -> None:
        self._chunks = iter(chunks)

    def __aiter__(self) -> _PlainChunks:
        return self

    async def __anext__(self) -> StreamChunk:
        await trio.lowlevel.checkpoint()
        try:
            return next(self._chunks)
        except StopIteration:
            raise StopAsyncIteration from None


_PLAIN = (BlockStart(0, "text"), TextDelta(0, "plain"), BlockEnd(0, Text("plain")), Finish(STOP))


class _PlainModel:
    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        return _PlainChunks(list(_PLAIN))


async def test_a_model_stream_without_aclose_is_consumed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R10.1: a model may return any async iterator of chunks; only generators are closed."""
    async with runtime(_PlainModel()) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hi")
        assert (result.reason.kind, result.text) == ("completed", "plain")
        check_session_invariants(agent.session.events)


class _IterableModel:
    """A model whose stream is an async iterable, not an iterator: its ``__aiter__`` makes
    the generator. Each one is kept here, so that no collection closes it."""

    def __init__(self) -> None:
        self.made: list[AsyncIterator[StreamChunk]] = []
        self.closed = 0

    def stream(self, request: ModelRequest) -> _IterableModel:
        return self

    def __aiter__(self) -> AsyncIterator[StreamChunk]:
        chunks = self._chunks()
        self.made.append(chunks)
        return chunks

    async def _chunks(self) -> AsyncIterator[StreamChunk]:
        try:
            yield BlockStart(0, "text")
            for _ in range(100):
                yield TextDelta(0, "word ")
            yield Finish(STOP)
        finally:
            self.closed += 1


async def test_an_aborted_step_closes_the_iterator_of_an_iterable_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R7.22, R10.2: a stream that is an async iterable closes, when a cancel aborts the step,
    the iterator its ``__aiter__`` made and the step read, which holds the call, rather than
    the iterable, left open until the iterator is collected."""
    model = _IterableModel()
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)

        def cancel_at_the_third_chunk(event: Event) -> None:
            if len(of_type(agent.session.events, "assistant/chunk")) == 3:
                agent.cancel("enough")

        agent.session.observe(cancel_at_the_third_chunk)
        result = await agent.ask("hi")
        assert result.reason.kind == "aborted"
        assert (len(model.made), model.closed) == (1, 1)
        check_session_invariants(agent.session.events)


class _NextOnly:
    """An iterator with ``__anext__`` alone, and ``aclose``: ``async for`` over an iterable
    takes such an iterator from its ``__aiter__``."""

    def __init__(self) -> None:
        self._plain = _PlainChunks(list(_PLAIN))
        self.closed = 0

    async def __anext__(self) -> StreamChunk:
        return await self._plain.__anext__()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        self.closed += 1


class _StreamOf:
    """A model whose stream is an iterable whose ``__aiter__`` calls *make*, closed or not."""

    def __init__(self, make: Callable[[], object]) -> None:
        self.make = make
        self.closed = 0

    def stream(self, request: ModelRequest) -> _StreamOf:
        return self

    def __aiter__(self) -> object:
        return self.make()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        self.closed += 1


async def test_an_iterable_stream_whose_iterator_has_only_anext_is_read_and_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R10.1: as ``async for`` reads it, a stream whose ``__aiter__`` makes an iterator with
    ``__anext__`` alone is read to its end, and that iterator is closed."""
    iterator = _NextOnly()
    async with runtime(_StreamOf(lambda: iterator)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hi")
    assert (result.reason.kind, result.text, iterator.closed) == ("completed", "plain", 1)


def _raising() -> object:
    raise RuntimeError("no stream today")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_raising, "no stream today"),
        (object, "the model's stream's __aiter__ returned a object, not an async iterator"),
    ],
    ids=["aiter-raises", "aiter-returns-no-iterator"],
)
async def test_an_iterable_stream_that_makes_no_iterator_ends_the_turn_and_is_closed(
    autojump_clock: trio.testing.MockClock, make: Callable[[], object], message: str
) -> None:
    """R10.3: a stream whose ``__aiter__`` raises, or returns no async iterator, ends its
    turn ``error`` saying so, and the stream itself, the call it may hold, is closed."""
    model = _StreamOf(make)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hi")
    assert result.reason.kind == "error"
    assert message in (result.reason.message or "")
    assert model.closed == 1


class _FailingTwice:
    """A stream that fails after its first chunk, and whose close fails too."""

    def __init__(self) -> None:
        self._sent = False
        self.closed = 0

    def stream(self, request: ModelRequest) -> _FailingTwice:
        return self

    def __aiter__(self) -> _FailingTwice:
        return self

    async def __anext__(self) -> StreamChunk:
        await trio.lowlevel.checkpoint()
        if self._sent:
            raise ModelError("the stream broke", code="STREAM_ERROR")
        self._sent = True
        return BlockStart(0, "text")

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        self.closed += 1
        raise RuntimeError("the response would not release")


async def test_a_failed_close_of_a_failed_stream_leaves_the_streams_own_failure(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R7.45, R10.3: a stream that fails, and whose close fails as well, ends the turn with
    the stream's own failure (its code and message); the close's failure is logged."""
    model = _FailingTwice()
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hi")
    assert (result.reason.kind, result.reason.code) == ("error", "STREAM_ERROR")
    assert result.reason.message == "the stream broke"
    assert model.closed == 1
    assert "closing a failed model stream failed too" in caplog.text


class _HangingThenFailingClose(_FailingTwice):
    """A stream that hangs after its first chunk, and whose close fails."""

    async def __anext__(self) -> StreamChunk:
        if self._sent:
            await trio.sleep_forever()
        return await super().__anext__()

    async def aclose(self) -> None:
        # Failing at once: under the cancel, a checkpoint first would raise Cancelled instead.
        self.closed += 1
        raise RuntimeError("the response would not release")


async def test_a_failed_close_of_a_cancelled_stream_leaves_the_cancel(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R7.40, R10.2: a cancel that lands while the stream waits closes it; a close that fails
    then is logged, and the turn ends ``aborted`` as cancelled, not ``error``."""
    model = _HangingThenFailingClose()
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.ask, "hi")
            await trio.sleep(1)
            agent.cancel("enough")
        result = agent.session.events[-1].data
    assert isinstance(result, TurnEnd)
    assert (result.reason.kind, result.reason.reason) == ("aborted", "enough")
    assert model.closed == 1
    assert "closing a failed model stream failed too" in caplog.text
