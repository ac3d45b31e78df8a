"""ScriptedModel: script forms, step streams, timing, recording and the tool loop."""

from __future__ import annotations

import subprocess
import sys

import pytest
import trio
import trio.testing

import retinue
from retinue._content import Message, Reasoning, Text, ToolCall, ToolResultBlock
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
    RawChunks,
    Reply,
    ScriptedModel,
    ScriptExhaustedError,
    Step,
    ToolCallSpec,
)
from tests.unit._scripted_model_kit import play, request


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


async def test_scripted_model_empty_reasoning_streams_no_block() -> None:
    """An empty reasoning streams no block, as an empty text does: a delta holds at least one
    character. An empty delta would leave the message an empty reasoning block, which every later
    request would send back."""
    chunks = await play(ScriptedModel([Reply("hi", reasoning="")]))
    assert chunks == [
        BlockStart(0, "text"),
        TextDelta(0, "hi"),
        BlockEnd(0, Text("hi")),
        Finish(STOP),
    ]
    assert assembled(chunks).message().content == (Text("hi"),)


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


async def test_scripted_model_generated_call_ids_skip_the_ids_its_step_names() -> None:
    """A call without an id never gets the id another call of its step names: ids stay unique
    in the stream (a repeated id fails the turn DUPLICATE_TOOL_CALL_ID), the named one kept."""
    step = CallTools([ToolCallSpec("a", id="call_1_1"), ToolCallSpec("b"), ToolCallSpec("c")])
    model = ScriptedModel([step])
    content = assembled(await play(model)).message().content
    ids = [block.id for block in content if isinstance(block, ToolCall)]
    assert ids[0] == "call_1_1"
    assert ids[2] == "call_1_2"
    assert len(set(ids)) == 3


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
    with pytest.raises(ScriptExhaustedError, match="2 step") as exhausted:
        await play(model)
    assert "asked by session" not in str(exhausted.value)
    asked = ModelRequest(LlmCallConfig("m"), MessageHistory([]), session_id="worker-3")
    with pytest.raises(
        ScriptExhaustedError, match=r"all were played \(asked by session 'worker-3'\)"
    ):
        await play(model, asked)


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


async def test_scripted_model_splits_text_between_code_points() -> None:
    """A delta holds at least one code point: a letter and its combining mark, or the parts of
    an emoji sequence, may land in different deltas, and the deltas join back to the text."""
    text = "e\u0301\U0001f469\u200d\U0001f467"  # e + combining acute, woman ZWJ girl
    chunks = await play(ScriptedModel([Reply(text, chunks=9)]))
    deltas = [c.text for c in chunks if isinstance(c, TextDelta)]
    assert deltas == ["e", "\u0301", "\U0001f469", "\u200d", "\U0001f467"]
    assert "".join(deltas) == text


async def test_scripted_model_assert_complete_names_each_script_with_steps_left() -> None:
    """``assert_complete`` names each script with steps left, how many and the next one, not a bare
    ``unplayed script steps: {None: 2}``."""
    model = ScriptedModel({"x": [Reply("a")], "y": [Reply("b"), Reply("c")]})
    await play(model, request("x"))
    await play(model, request("y"))
    with pytest.raises(AssertionError) as raised:
        model.assert_complete()
    assert str(raised.value) == (
        "unplayed script steps: the script for model 'y' has 1 left, the next "
        "Reply(text='c', chunks=1, usage=None, reasoning=None, delay=0.0, chunk_delay=0.0)"
    )
    single = ScriptedModel([Reply("a"), Reply("b")])
    with pytest.raises(AssertionError, match=r"^unplayed script steps: the script has 2 left, "):
        single.assert_complete()


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
    """``keep_requests`` reads the record's bound, and refuses a change that would not apply:
    ``model.keep_requests = 2`` is not taken and read back while every request is still kept, nor a
    negative count taken.
    """
    model = ScriptedModel([Reply("x")], repeat_last=True, keep_requests=3)
    with pytest.raises(AttributeError):
        model.keep_requests = 2  # type: ignore[misc]
    for _ in range(5):
        await play(model)
    assert (model.keep_requests, len(model.requests)) == (3, 3)
    assert ScriptedModel([Reply("x")], keep_requests=None).keep_requests is None


async def test_a_tool_loop_model_keeps_the_requests_it_is_told_to() -> None:
    """``tool_loop`` takes ``keep_requests`` as the constructor does: a long run of resumed
    sessions would otherwise hold a thousand rebuilt histories."""
    model = ScriptedModel.tool_loop(["fetch"], keep_requests=1)
    sent = [request(f"m{index}") for index in range(3)]
    for one in sent:
        await play(model, one)
    assert (model.keep_requests, model.requests) == (1, sent[-1:])
    assert ScriptedModel.tool_loop(["fetch"]).keep_requests == 1000
    with pytest.raises(ValueError, match="keep_requests"):
        ScriptedModel.tool_loop(["fetch"], keep_requests=-1)


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
    """R9.18 puts hook context after the results; ``tool_loop`` still answers after them (the
    history shows context as R5.2 wraps it)."""
    model = ScriptedModel.tool_loop(["t"], answer="done")
    context = (Text('<context source="plugin">'), Text("data may be stale"), Text("</context>"))
    history = (
        Message("user", (Text("go"),)),
        Message("assistant", (ToolCall("c", "t", "{}"),)),
        Message("user", (ToolResultBlock("c", (Text("ok"),)),)),
        Message("user", context),
    )
    chunks = await play(model, request("m", *history))
    assert assembled(chunks).message().content == (Text("done"),)


async def test_scripted_model_tool_loop_takes_a_prompt_opening_like_context_for_a_prompt() -> None:
    """A prompt after results is new input even when its text opens as context's envelope does:
    an envelope is told by its closing block too."""
    model = ScriptedModel.tool_loop(["t"], calls_per_step=1)
    history = (
        Message("user", (Text("go"),)),
        Message("assistant", (ToolCall("c", "t", "{}"),)),
        Message("user", (ToolResultBlock("c", (Text("ok"),)),)),
        Message("user", (Text('<context source="user"> what is the weather?'),)),
    )
    chunks = await play(model, request("m", *history))
    assert [type(block) for block in assembled(chunks).message().content] == [ToolCall]


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
