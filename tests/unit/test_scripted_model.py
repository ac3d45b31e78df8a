"""ScriptedModel: script forms, step streams, timing, recording and the tool loop."""

from __future__ import annotations

import math
import subprocess
import sys
import traceback
from typing import Any, Self

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue._content import Message, Reasoning, Text, ToolCall, ToolResultBlock
from retinue._errors import ModelError
from retinue._request import LlmCallConfig, MessageHistory, ModelRequest
from retinue._stream import (
    ABORTED,
    MAX_TOKENS,
    STOP,
    TOOL_CALLS,
    BlockEnd,
    BlockStart,
    Errored,
    Finish,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from retinue.loop._assembler import BlockAssembler
from retinue.providers import Model
from retinue.testing import (
    CallTools,
    CutAtMaxTokens,
    FinishAborted,
    FinishWithError,
    Hang,
    RaiseMidStream,
    RawChunks,
    Reply,
    ScriptedModel,
    ScriptExhaustedError,
    Step,
    ToolCallSpec,
)


def request(model: str = "m", *messages: Message) -> ModelRequest:
    return ModelRequest(LlmCallConfig(model), MessageHistory(list(messages)))


async def play(model: ScriptedModel, req: ModelRequest | None = None) -> list[StreamChunk]:
    return [chunk async for chunk in model.stream(req or request())]


def assembled(chunks: list[StreamChunk]) -> BlockAssembler:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler


async def test_scripted_model_reply_streams_text_in_n_deltas_then_usage_then_finish() -> None:
    """R10.2: a reply streams start, N deltas, end, then usage before finish, nothing after."""
    model = ScriptedModel([Reply("abcdefgh", chunks=4, usage=Usage(3, 5))])
    chunks = await play(model)
    assert chunks == [
        BlockStart(0, "text"),
        TextDelta(0, "ab"),
        TextDelta(0, "cd"),
        TextDelta(0, "ef"),
        TextDelta(0, "gh"),
        BlockEnd(0, Text("abcdefgh")),
        UsageChunk(Usage(3, 5)),
        Finish(STOP),
    ]


async def test_scripted_model_reply_with_reasoning_and_short_text() -> None:
    """A reply's reasoning block comes first; text shorter than ``chunks`` gets one delta per char."""
    chunks = await play(ScriptedModel([Reply("hi", chunks=10, reasoning="hmm")]))
    message = assembled(chunks).message()
    assert message.content == (Reasoning("hmm"), Text("hi"))
    assert sum(isinstance(c, TextDelta) for c in chunks) == 2
    assert chunks[-1] == Finish(STOP)


async def test_scripted_model_empty_reply_streams_only_usage_and_finish() -> None:
    """An empty reply carries no block, only usage and finish (an empty message hosting usage)."""
    chunks = await play(ScriptedModel([Reply("", usage=Usage(1, 0))]))
    assert chunks == [UsageChunk(Usage(1, 0)), Finish(STOP)]


async def test_scripted_model_call_tools_splits_arguments_and_finishes_tool_calls() -> None:
    """R10.2: tool arguments stream as raw JSON text split across deltas; finish is tool-calls."""
    step = CallTools(
        [ToolCallSpec("lookup", '{"city": "Paris"}', id="c1"), ToolCallSpec("clock")],
        chunks_per_call=3,
        text="Let me check.",
    )
    chunks = await play(ScriptedModel([step]))
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta) and c.index == 1]
    assert len(deltas) == 3
    assert "".join(d.arguments_delta for d in deltas) == '{"city": "Paris"}'
    assert deltas[0].name == "lookup"
    assert [d.id for d in deltas] == ["c1", None, None]
    assembler = assembled(chunks)
    assert assembler.finish == TOOL_CALLS
    text, first, second = assembler.message().content
    assert text == Text("Let me check.")
    assert first == ToolCall("c1", "lookup", '{"city": "Paris"}')
    assert isinstance(second, ToolCall)
    assert (second.name, second.arguments) == ("clock", "{}")
    assert chunks[-1] == Finish(TOOL_CALLS)


async def test_scripted_model_generated_call_ids_are_unique_per_stream() -> None:
    """Calls without an id get ids unique across streams, matching in delta and block-end."""
    model = ScriptedModel([CallTools([ToolCallSpec("a"), ToolCallSpec("b")])], repeat_last=True)
    first = assembled(await play(model)).message().content
    second = assembled(await play(model)).message().content
    first_ids = [b.id for b in first if isinstance(b, ToolCall)]
    second_ids = [b.id for b in second if isinstance(b, ToolCall)]
    assert len({*first_ids, *second_ids}) == 4
    chunks = await play(model)
    delta_ids = [c.id for c in chunks if isinstance(c, ToolCallDelta)]
    end_ids = [
        c.block.id for c in chunks if isinstance(c, BlockEnd) and isinstance(c.block, ToolCall)
    ]
    assert delta_ids == end_ids


async def test_scripted_model_cut_at_max_tokens_leaves_tool_calls_unclosed() -> None:
    """R7.36: a max-tokens step streams truncated, unclosed tool calls and finishes max-tokens."""
    step = CutAtMaxTokens("partial", tool_calls=[ToolCallSpec("t", '{"x": ', id="c")])
    chunks = await play(ScriptedModel([step]))
    assert not any(isinstance(c, BlockEnd) and isinstance(c.block, ToolCall) for c in chunks)
    assembler = assembled(chunks)
    assert assembler.finish == MAX_TOKENS
    assert assembler.message().content == (Text("partial"), ToolCall("c", "t", '{"x": '))


async def test_scripted_model_finish_with_error_and_aborted() -> None:
    """R10.3: a stream may end with finish error (message, code) or finish aborted."""
    model = ScriptedModel([FinishWithError("overloaded", "E529", text="so"), FinishAborted()])
    errored = await play(model)
    assert errored[-1] == Finish(Errored("overloaded", "E529"))
    assert assembled(errored).message().content == (Text("so"),)
    assert await play(model) == [Finish(ABORTED)]


async def test_scripted_model_raise_mid_stream_yields_then_raises_the_error() -> None:
    """R10.3: a stream may raise after some chunks; the exact error propagates."""
    boom = ConnectionError("reset")
    model = ScriptedModel([RaiseMidStream(boom, after_chunks=3, text="abcd", chunks=4)])
    seen: list[StreamChunk] = []

    async def consume() -> None:
        async for chunk in model.stream(request()):
            seen.append(chunk)

    with pytest.raises(ConnectionError) as caught:
        await consume()
    assert caught.value is boom
    assert seen == [BlockStart(0, "text"), TextDelta(0, "a"), TextDelta(0, "b")]


async def test_scripted_model_raise_mid_stream_raises_a_fresh_copy_on_each_replay() -> None:
    """R10.3: a replayed raising step raises a fresh copy (same type, args, attributes, notes).

    The first play raises the given instance; later plays never share one
    error between streams or agents, so its traceback does not grow per play.
    """
    boom = ModelError("reset", code="RESET")
    boom.add_note("scripted")
    model = ScriptedModel([RaiseMidStream(boom, after_chunks=1)], repeat_last=True)
    raised: list[BaseException] = []
    for _ in range(3):
        with pytest.raises(ModelError) as caught:
            await play(model)
        raised.append(caught.value)
    assert raised[0] is boom
    assert len({id(error) for error in raised}) == 3
    for error in raised:
        assert type(error) is ModelError
        assert (error.args, error.code, error.__notes__) == (("reset",), "RESET", ["scripted"])
    depths = [len(traceback.extract_tb(error.__traceback__)) for error in raised]
    assert depths == [depths[0]] * 3
    raised[1].add_note("only on the copy")
    assert boom.__notes__ == ["scripted"]


def test_scripted_model_raise_mid_stream_rejects_more_chunks_than_the_text_has() -> None:
    """``after_chunks`` beyond the reply's chunk count is refused at construction."""
    with pytest.raises(ValueError, match="after_chunks"):
        RaiseMidStream(RuntimeError("x"), after_chunks=4, text="ab", chunks=1)


async def test_scripted_model_hang_streams_then_waits_until_cancelled(autojump_clock) -> None:
    """A hanging step yields its chunks and then blocks until its caller cancels."""
    seen: list[StreamChunk] = []
    with trio.fail_after(1000):
        with trio.move_on_after(500) as scope:
            async for chunk in ScriptedModel([Hang("typing", chunks=2)]).stream(request()):
                seen.append(chunk)
        assert scope.cancelled_caught
        assert trio.current_time() == pytest.approx(500)
    assert seen == [BlockStart(0, "text"), TextDelta(0, "typ"), TextDelta(0, "ing")]


async def test_scripted_model_delay_before_first_chunk_and_between_chunks(autojump_clock) -> None:
    """``delay`` passes before the first chunk; ``chunk_delay`` before every chunk."""
    model = ScriptedModel([Reply("abc", chunks=3, delay=2.0, chunk_delay=0.5)])
    times: list[float] = []
    with trio.fail_after(100):
        start = trio.current_time()
        async for _ in model.stream(request()):
            times.append(trio.current_time() - start)
    assert times == pytest.approx([2.5, 3.0, 3.5, 4.0, 4.5, 5.0])


async def test_scripted_model_zero_delay_checkpoints_once_per_stream() -> None:
    """With zero delays the stream checkpoints before its first chunk and never again."""
    stream = ScriptedModel([Reply("abcdefghij", chunks=10)]).stream(request())
    with trio.testing.assert_checkpoints():
        await stream.__anext__()
    with trio.testing.assert_no_checkpoints():
        rest = [chunk async for chunk in stream]
    assert len(rest) == 12


async def test_scripted_model_sequence_past_the_end_raises_clear_error() -> None:
    """A sequence script plays in order and refuses a call past its end."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    assert assembled(await play(model)).message().content == (Text("one"),)
    assert assembled(await play(model)).message().content == (Text("two"),)
    with pytest.raises(ScriptExhaustedError, match="2 step"):
        await play(model)


async def test_scripted_model_repeat_last_replays_the_final_step() -> None:
    """With ``repeat_last=True`` the final step repeats forever."""
    model = ScriptedModel([Reply("one"), Reply("last")], repeat_last=True)
    texts = [assembled(await play(model)).message().content for _ in range(4)]
    assert texts == [(Text("one"),), (Text("last"),), (Text("last"),), (Text("last"),)]


async def test_scripted_model_function_script_sees_each_request() -> None:
    """A callable script chooses each step from the request it is given."""

    def echo(req: ModelRequest) -> Step:
        return Reply(f"{req.model}:{len(req.messages)}")

    model = ScriptedModel(echo)
    msg = Message("user", (Text("hi"),))
    chunks = await play(model, request("gpt", msg, msg))
    assert assembled(chunks).message().content == (Text("gpt:2"),)


async def test_scripted_model_per_model_scripts_have_independent_cursors() -> None:
    """A mapping script keeps one cursor per model name; unknown names are refused."""
    model = ScriptedModel({"a": [Reply("a1"), Reply("a2")], "b": [Reply("b1")]})
    assert assembled(await play(model, request("a"))).message().content == (Text("a1"),)
    assert assembled(await play(model, request("b"))).message().content == (Text("b1"),)
    assert assembled(await play(model, request("a"))).message().content == (Text("a2"),)
    with pytest.raises(ScriptExhaustedError, match="'c'"):
        await play(model, request("c"))
    with pytest.raises(ScriptExhaustedError, match="model 'b'"):
        await play(model, request("b"))


async def test_scripted_model_records_requests_and_statistics() -> None:
    """Every request is recorded in order; statistics count calls, chunks and steps left."""
    model = ScriptedModel([Reply("ab", chunks=2), RawChunks([Finish(STOP)]), Reply("x")])
    first, second = request("m1"), request("m2")
    await play(model, first)
    await play(model, second)
    assert model.requests == [first, second]
    stats = model.statistics()
    assert (stats.calls, stats.chunks, stats.remaining) == (2, 6, 1)
    with pytest.raises(AssertionError, match="unplayed"):
        model.assert_complete()
    await play(model)
    model.assert_complete()


async def test_scripted_model_keeps_only_the_latest_requests() -> None:
    """A long load test holds at most ``keep_requests`` requests; statistics count them all."""
    model = ScriptedModel([Reply("x")], repeat_last=True, keep_requests=2)
    sent = [request(f"m{index}") for index in range(5)]
    for one in sent:
        await play(model, one)
    assert model.requests == sent[-2:]
    assert model.statistics().calls == 5
    everything = ScriptedModel([Reply("x")], repeat_last=True, keep_requests=None)
    for one in sent:
        await play(everything, one)
    assert everything.requests == sent


async def test_scripted_model_keep_requests_is_the_bound_it_was_built_with() -> None:
    """``keep_requests`` reads the record's bound, and refuses a change that would not apply.

    Before, ``model.keep_requests = 2`` was taken and read back while every
    request was still kept, and a negative count was taken as well.
    """
    model = ScriptedModel([Reply("x")], repeat_last=True, keep_requests=3)
    with pytest.raises(AttributeError):
        model.keep_requests = 2  # type: ignore[misc]
    for _ in range(5):
        await play(model)
    assert (model.keep_requests, len(model.requests)) == (3, 3)
    assert ScriptedModel([Reply("x")], keep_requests=None).keep_requests is None


async def test_scripted_model_statistics_remaining_is_none_for_function_scripts() -> None:
    """A function script has no finite remainder."""
    model = ScriptedModel(lambda _request: Reply("x"))
    await play(model)
    assert model.statistics().remaining is None
    model.assert_complete()


def test_testing_kit_is_not_imported_by_import_retinue() -> None:
    """The test kit stays out of ``import retinue``, like ``trio.testing``."""
    code = "import sys, retinue; print(sorted(m for m in sys.modules if m.startswith('retinue.testing')))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_scripted_model_implements_the_model_protocol() -> None:
    """R10.7: a ScriptedModel can stand wherever a ``Model`` is expected."""
    assert isinstance(ScriptedModel([]), Model)


def test_scripted_steps_are_frozen_comparable_values() -> None:
    """Steps compare by their fields, not by their pre-built chunks, and cannot be mutated."""
    assert Reply("x", chunks=2) == Reply("x", chunks=2)
    assert CallTools([ToolCallSpec("a")]) == CallTools((ToolCallSpec("a"),))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Reply("x").text = "y"  # type: ignore[misc]


@pytest.mark.parametrize(
    "build",
    [
        lambda: Reply("x", delay=-1),
        lambda: Reply("x", chunks=0),
        lambda: CallTools([ToolCallSpec("a")], chunks_per_call=0),
        lambda: Hang(chunk_delay=-0.1),
    ],
)
def test_scripted_steps_reject_negative_delays_and_zero_chunks(build) -> None:
    """Delays must be non-negative and chunk counts positive."""
    with pytest.raises(ValueError):
        build()


async def test_scripted_model_tool_loop_calls_tools_after_a_prompt() -> None:
    """``tool_loop`` answers a prompt with ``calls_per_step`` calls cycling through the tools."""
    model = ScriptedModel.tool_loop(
        ["search", "fetch"], calls_per_step=3, arguments={"search": '{"q": "x"}'}
    )
    chunks = await play(model, request("m", Message("user", (Text("go"),))))
    assembler = assembled(chunks)
    calls = [b for b in assembler.message().content if isinstance(b, ToolCall)]
    assert [(c.name, c.arguments) for c in calls] == [
        ("search", '{"q": "x"}'),
        ("fetch", "{}"),
        ("search", '{"q": "x"}'),
    ]
    assert len({c.id for c in calls}) == 3
    assert assembler.finish == TOOL_CALLS


async def test_scripted_model_tool_loop_answers_after_tool_results() -> None:
    """``tool_loop`` answers in ``answer_chunks`` deltas once the last message holds results."""
    model = ScriptedModel.tool_loop(["t"], answer_chunks=5, answer="0123456789", usage=Usage(2, 3))
    results = Message("user", (ToolResultBlock("c", (Text("ok"),)),))
    chunks = await play(model, request("m", Message("user", (Text("go"),)), results))
    assert sum(isinstance(c, TextDelta) for c in chunks) == 5
    assembler = assembled(chunks)
    assert assembler.message().content == (Text("0123456789"),)
    assert assembler.usage == Usage(2, 3)
    assert assembler.finish == STOP
    assert chunks[-2:] == [UsageChunk(Usage(2, 3)), Finish(STOP)]


async def test_scripted_model_tool_loop_answers_when_context_follows_the_results() -> None:
    """R9.18 puts hook context after the results; ``tool_loop`` still answers after them."""
    model = ScriptedModel.tool_loop(["t"], answer="done")
    history = (
        Message("user", (Text("go"),)),
        Message("assistant", (ToolCall("c", "t", "{}"),)),
        Message("user", (ToolResultBlock("c", (Text("ok"),)),)),
        Message("user", (Text("note: data may be stale"),)),
    )
    chunks = await play(model, request("m", *history))
    assert assembled(chunks).message().content == (Text("done"),)


async def test_scripted_model_tool_loop_calls_tools_again_after_a_new_prompt() -> None:
    """Results before the last assistant message belong to an earlier round: a new prompt calls."""
    model = ScriptedModel.tool_loop(["t"], calls_per_step=1)
    history = (
        Message("user", (Text("go"),)),
        Message("assistant", (ToolCall("c", "t", "{}"),)),
        Message("user", (ToolResultBlock("c", (Text("ok"),)),)),
        Message("assistant", (Text("done"),)),
        Message("user", (Text("again"),)),
    )
    chunks = await play(model, request("m", *history))
    assert assembled(chunks).finish == TOOL_CALLS


@retinue.tool(parallel_safe=True)
async def lookup(city: str) -> str:
    """Look up the weather.

    Args:
        city: The city.
    """
    await trio.lowlevel.checkpoint()
    return f"{city}: sunny"


async def test_scripted_model_tool_loop_turn_ends_when_a_hook_adds_context_after_results(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Through the runtime: one tool round, then the answer, though post-execute adds context."""
    model = ScriptedModel.tool_loop(
        ["lookup"], calls_per_step=1, arguments={"lookup": '{"city": "Oslo"}'}, delay=1.0
    )
    async with retinue.open_runtime(models=model, tools=[lookup]) as rt:

        def add_context(_execution: object, _result: object, _proceed: object) -> retinue.Accept:
            return retinue.Accept(additional_context=retinue.HookContext("note: may be stale"))

        rt.hooks.on("tools/post-execute", add_context)
        agent = await rt.create_agent("a", retinue.AgentOptions(model="m"))
        with trio.fail_after(100):
            result = await agent.ask("weather?")
    assert result.reason.kind == "completed"
    assert result.text == "All tools returned; here is the answer."
    assert model.statistics().calls == 2


class _StatusError(Exception):
    """An error its args alone cannot rebuild, shaped like the SDK errors (keyword-only fields)."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


async def test_scripted_model_replays_an_error_its_args_cannot_rebuild_as_fresh_copies() -> None:
    """R10.3: each replay raises a fresh copy with the type, args, attributes and notes kept.

    Such an error's ``__init__`` wants more than its args, so the copy is built
    without it; agents sharing the step never share one error object.
    """
    boom = _StatusError("unavailable", status=503)
    boom.add_note("scripted")
    model = ScriptedModel([RaiseMidStream(boom)], repeat_last=True)
    raised: list[_StatusError] = []
    for _ in range(3):
        with pytest.raises(_StatusError) as caught:
            await play(model)
        raised.append(caught.value)
    assert raised[0] is boom
    assert len({id(error) for error in raised}) == 3
    for error in raised:
        assert type(error) is _StatusError
        assert (error.args, error.status, error.__notes__) == (("unavailable",), 503, ["scripted"])
    depths = [len(traceback.extract_tb(error.__traceback__)) for error in raised]
    assert depths == [depths[0]] * 3
    raised[1].add_note("only on the copy")
    assert boom.__notes__ == ["scripted"]


class _ErrnoError(OSError):
    """An ``OSError`` with its own ``__init__``: the built-in fields come from the args."""

    def __init__(self, code: int, message: str, *, host: str) -> None:
        super().__init__(code, message)
        self.host = host


async def test_scripted_model_replayed_copies_keep_the_fields_a_builtin_base_sets() -> None:
    """A copy made without the error's ``__init__`` still has ``errno`` and ``strerror``."""
    boom = _ErrnoError(104, "reset", host="api")
    model = ScriptedModel([RaiseMidStream(boom)], repeat_last=True)
    with pytest.raises(_ErrnoError):
        await play(model)
    with pytest.raises(_ErrnoError) as caught:
        await play(model)
    copy = caught.value
    assert copy is not boom
    assert (copy.errno, copy.strerror, copy.args) == (104, "reset", (104, "reset"))
    assert copy.host == "api"


class _SlottedError(Exception):
    """An error keeping a field in ``__slots__``, outside its instance ``__dict__``."""

    __slots__ = ("status",)

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


async def test_scripted_model_replayed_copies_keep_slotted_fields() -> None:
    """A copy made without the error's ``__init__`` keeps the fields its ``__slots__`` hold."""
    boom = _SlottedError("unavailable", status=503)
    model = ScriptedModel([RaiseMidStream(boom)], repeat_last=True)
    with pytest.raises(_SlottedError):
        await play(model)
    with pytest.raises(_SlottedError) as caught:
        await play(model)
    assert caught.value is not boom
    assert (caught.value.args, caught.value.status) == (("unavailable",), 503)


class _UncreatableError(Exception):
    """An error built in ``__new__``, which refuses its args alone (it wants ``status`` too)."""

    status: int

    def __new__(cls, message: str, *, status: int) -> Self:
        error = super().__new__(cls, message)
        error.status = status
        return error

    def __init__(self, message: str, **_fields: object) -> None:
        super().__init__(message)


async def test_scripted_model_replays_an_uncreatable_error_as_itself() -> None:
    """Only an error that cannot be created again is raised again as itself, traceback cleared."""
    boom = _UncreatableError("unavailable", status=503)
    model = ScriptedModel([RaiseMidStream(boom)], repeat_last=True)
    depths = []
    for _ in range(3):
        with pytest.raises(_UncreatableError) as caught:
            await play(model)
        assert caught.value is boom
        depths.append(len(traceback.extract_tb(caught.value.__traceback__)))
    assert depths == [depths[0]] * 3


@pytest.mark.parametrize(
    ("build", "error", "field", "value"),
    [
        (lambda: Reply("hello", delay=math.nan), ValueError, "delay", "nan"),
        (lambda: Reply("hello", chunk_delay=math.nan), ValueError, "chunk_delay", "nan"),
        (lambda: Hang(delay=math.nan), ValueError, "delay", "nan"),
        (lambda: RawChunks([], delay=math.inf), ValueError, "delay", "inf"),
        (lambda: FinishAborted(delay=True), TypeError, "delay", "True"),
        (
            lambda: FinishWithError("x", chunk_delay="1"),  # type: ignore[arg-type]
            TypeError,
            "chunk_delay",
            "'1'",
        ),
        (
            lambda: Reply("x", chunks=2.5),  # type: ignore[arg-type]
            TypeError,
            "chunks",
            "2.5",
        ),
        (lambda: Reply("hello", chunks=True), TypeError, "chunks", "True"),
        (
            lambda: CallTools([ToolCallSpec("a")], text_chunks=2.0),  # type: ignore[arg-type]
            TypeError,
            "text_chunks",
            "2.0",
        ),
        (
            lambda: CutAtMaxTokens("x", chunks=None),  # type: ignore[arg-type]
            TypeError,
            "chunks",
            "None",
        ),
        (
            lambda: RaiseMidStream(ValueError(), after_chunks=True),
            TypeError,
            "after_chunks",
            "True",
        ),
        (lambda: RaiseMidStream(ValueError(), after_chunks=-1), ValueError, "after_chunks", "-1"),
    ],
)
def test_scripted_steps_reject_non_finite_delays_and_non_int_counts_naming_the_field(
    build: Any, error: type[Exception], field: str, value: str
) -> None:
    """Delays are finite numbers >= 0 and counts ints (not bools); the error names field and value."""
    with pytest.raises(error, match=rf"^{field} must .*, got {value}$"):
        build()


@pytest.mark.parametrize(
    ("calls_per_step", "error"),
    [(0, ValueError), (-3, ValueError), (1.5, TypeError), (True, TypeError)],
)
def test_scripted_model_tool_loop_refuses_a_step_without_calls(
    calls_per_step: Any, error: type[Exception]
) -> None:
    """``tool_loop`` needs at least one call per step, or the turn would neither call nor answer."""
    with pytest.raises(error, match=rf"^calls_per_step must .*, got {calls_per_step!r}$"):
        ScriptedModel.tool_loop(["t"], calls_per_step=calls_per_step)


def test_scripted_call_tools_refuses_an_empty_list_pointing_to_raw_chunks() -> None:
    """A ``CallTools`` step asks for at least one call; ``RawChunks`` covers the edge case."""
    with pytest.raises(ValueError, match=r"calls must hold at least one call.*RawChunks"):
        CallTools([])


def test_scripted_model_repeat_last_refuses_an_empty_sequence() -> None:
    """``repeat_last=True`` with no step to repeat is refused at construction, naming the script."""
    with pytest.raises(
        ValueError, match=r"repeat_last=True needs a last step.*the script is empty"
    ):
        ScriptedModel([], repeat_last=True)
    with pytest.raises(ValueError, match=r"the script for model 'b' is empty"):
        ScriptedModel({"a": [Reply("a")], "b": []}, repeat_last=True)
    assert ScriptedModel([], repeat_last=False).statistics().remaining == 0


def test_scripted_model_refuses_a_sequence_holding_a_non_step() -> None:
    """A sequence script is checked when built: the error names the step, script and type."""
    with pytest.raises(TypeError, match=r"step 1 of the script for model 'm': got a str"):
        ScriptedModel({"m": [Reply("ok"), "not a step"]})  # type: ignore[list-item]


async def test_scripted_model_function_returning_a_non_step_raises_type_error() -> None:
    """A step function's result must be a step: the error names the function and the type."""

    def junk(_request: ModelRequest) -> Step:
        return "not a step"  # type: ignore[return-value]

    model = ScriptedModel(junk)
    with pytest.raises(TypeError, match=r"step function .*junk of the script: got a str"):
        await play(model)


async def test_scripted_model_non_step_ends_the_turn_with_an_error_naming_it(
    autojump_clock,
) -> None:
    """Through the runtime, the turn ends ``error`` with a message naming the function and type."""
    model = ScriptedModel(lambda _request: "not a step")  # type: ignore[arg-type,return-value]
    async with retinue.open_runtime(models=model) as rt:
        agent = await rt.create_agent("a", retinue.AgentOptions(model="m"))
        with trio.fail_after(10):
            result = await agent.ask("hi")
    assert result.reason.kind == "error"
    assert result.reason.message is not None
    assert "step function" in result.reason.message
    assert "got a str ('not a step'), not a script step" in result.reason.message
