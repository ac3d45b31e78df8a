"""A UTF-16 surrogate pair held as two code points is joined into its character before it is
logged: written to JSON it would read back as that character, and the stored log would not
be the logged one (R1.6, R4.5, R11.16)."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

import retinue
from retinue import Reasoning, Text, ToolCall
from retinue._stream import (
    STOP,
    BlockEnd,
    BlockStart,
    Finish,
    OtherFinish,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
)
from retinue.config import AgentEntry
from retinue.session import InvalidJsonError, Session, TurnStart, TurnTrigger
from retinue.session._codec import decode_event, encode_event
from retinue.testing import (
    CallTools,
    RawChunks,
    Reply,
    ScriptedModel,
    ToolCallSpec,
    check_session_invariants,
)
from tests.helpers import OPTIONS, of_type, runtime

# What a JSON decoder gives for each of two deltas split inside the emoji (one \u escape each).
HIGH, LOW = json.loads('"\\ud83d"'), json.loads('"\\ude00"')
EMOJI = "\U0001f600"


def _split_emoji(*, closed: bool) -> list[StreamChunk]:
    """A text block streamed as ``smile `` + the emoji's high half, then its low half."""
    chunks: list[StreamChunk] = [
        BlockStart(0, "text"),
        TextDelta(0, "smile " + HIGH),
        TextDelta(0, LOW),
    ]
    if closed:
        # An adapter's closing block, built from the deltas it joined itself.
        chunks.append(BlockEnd(0, Text("smile " + HIGH + LOW)))
    return [*chunks, Finish(STOP)]


@pytest.mark.parametrize("closed", [True, False], ids=["closed-by-the-adapter", "left-open"])
async def test_an_emoji_split_across_two_deltas_is_logged_and_stored_whole(
    tmp_path: Path, *, closed: bool
) -> None:
    """R1.6, R11.16: the assistant's message holds the emoji, and the history resumed from an SQLite
    file equals the live one, rather than the live message holding the two halves, which the file
    gives back as the emoji."""
    model = ScriptedModel([RawChunks(_split_emoji(closed=closed)), Reply("x")])
    # Real time: the SQLite store works in threads.
    with trio.fail_after(30):
        async with retinue.open_runtime(
            models=model, store=retinue.SQLiteStore(tmp_path / "s.db")
        ) as rt:
            agent = await rt.create_agent("a", OPTIONS, session_id="s")
            result = await agent.ask("hi")
            live = list(agent.session.derive_messages())
            await agent.dispose()
            resumed = await rt.resume_agent("s")
            stored = list(resumed.session.derive_messages())
    assert result.text == "smile " + EMOJI
    assert stored == live
    check_session_invariants(agent.session.events)


async def test_a_prompt_holding_a_pair_is_logged_whole_and_a_lone_half_as_it_is(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R1.6: a prompt's pair is its character; a lone surrogate reads back as itself, so
    it is kept."""
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        await agent.ask("hi " + HIGH + LOW)
        await agent.ask("half " + HIGH)
        prompts = [
            message.content[0]
            for message in agent.session.derive_messages()
            if message.role == "user"
        ]
    assert prompts == [Text("hi " + EMOJI), Text("half " + HIGH)]


def test_custom_data_holding_a_pair_is_stored_whole_and_refused_beside_its_character() -> None:
    """R4.5: a pair in a value is its character; as a key beside that character's own it is the same
    key twice, refused, so no stored line keeps one of the two entries and loses the other."""
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    event = session.append_custom("plugin/note", {"text": HIGH + LOW})
    assert event.data.data == {"text": EMOJI}
    with pytest.raises(InvalidJsonError, match="twice"):
        session.append_custom("plugin/index", {HIGH + LOW: 1, EMOJI: 2})


@retinue.tool
async def grin() -> str:
    """Answer with an emoji held as two code points."""
    return "out " + HIGH + LOW


@retinue.tool
async def wince() -> str:
    """Fail with one."""
    raise ValueError("bad " + HIGH + LOW)


async def test_every_block_holding_a_pair_is_logged_as_it_is_stored(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R1.6, R4.5: a block built with a pair (an injected Text, a tool's result or its error's
    message) holds the character, so each event reads back from its stored line as it was logged,
    not only a prompt given as a str."""
    model = ScriptedModel(
        [CallTools([ToolCallSpec("grin", "{}"), ToolCallSpec("wince", "{}")]), Reply("ok")],
        repeat_last=True,
    )
    async with runtime(model, tools=[grin, wince]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.inject(Text("note " + HIGH + LOW))
        agent.inject([Text("list " + HIGH + LOW)])
        await agent.ask("go")
        events = list(agent.session.events)
    assert [decode_event(encode_event(event)) for event in events] == events
    assert EMOJI in repr([event.data for event in of_type(events, "tool/result")])
    check_session_invariants(events)


async def test_stream_chunks_holding_pairs_are_logged_as_they_are_stored(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R1.6, R4.5: a model's deltas, block kinds and finish name built with a pair hold the
    character, so each chunk reads back from its stored line as it was logged, rather than the
    logged chunks holding the pair and their stored lines the character."""
    chunks: list[StreamChunk] = [
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "think " + HIGH + LOW, signature="sig" + HIGH + LOW),
        BlockEnd(0, Reasoning("think " + EMOJI, signature="sig" + EMOJI)),
        BlockStart(1, "text"),
        TextDelta(1, "smile " + HIGH + LOW),
        BlockEnd(1, Text("smile " + EMOJI)),
        Finish(OtherFinish("done" + HIGH + LOW)),
    ]
    model = ScriptedModel([RawChunks(chunks)], repeat_last=True)
    with trio.fail_after(30):
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            result = await agent.ask("go")
            events = of_type(agent.session.events, "assistant/chunk")
    assert result.text == "smile " + EMOJI
    assert len(events) == len(chunks)
    assert [decode_event(encode_event(event)) for event in events] == events
    assert EMOJI in repr([event.data.chunk for event in events])


class _Tagged(str):
    """A str subclass, as a provider SDK's wrapper of a text may be."""

    __slots__ = ()


async def test_stream_chunks_built_from_a_str_subclass_hold_its_pair_as_the_character(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R1.6, R4.5: a delta's strings of a str subclass are joined as a block's are, not only an
    exact str's, so each chunk reads back from its stored line as it was logged, rather than the
    logged chunks holding the pair where their stored lines hold the character."""
    pair = _Tagged(HIGH + LOW)
    chunks: list[StreamChunk] = [
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, _Tagged("think " + pair), signature=_Tagged("sig" + pair)),
        BlockEnd(0, Reasoning("think " + EMOJI, signature="sig" + EMOJI)),
        BlockStart(1, "text"),
        TextDelta(1, _Tagged("smile " + pair)),
        BlockEnd(1, Text("smile " + EMOJI)),
        BlockStart(2, "tool-call"),
        ToolCallDelta(2, _Tagged("call-" + pair), _Tagged("{}"), name=_Tagged("grin" + pair)),
        Finish(STOP),
    ]
    model = ScriptedModel([RawChunks(chunks), Reply("done")])
    with trio.fail_after(30):
        async with runtime(model) as rt:
            agent = await rt.create_agent("a", OPTIONS)
            result = await agent.ask("go")
            events = of_type(agent.session.events, "assistant/chunk")
    assert result.reason.kind == "completed", result.reason
    assert [decode_event(encode_event(event)) for event in events] == events
    deltas = [event.data.chunk for event in events if "delta" in event.data.chunk.type]
    assert deltas[:3] == [
        ReasoningDelta(0, "think " + EMOJI, signature="sig" + EMOJI),
        TextDelta(1, "smile " + EMOJI),
        ToolCallDelta(2, "call-" + EMOJI, "{}", name="grin" + EMOJI),
    ]


async def test_a_tool_call_whose_id_holds_a_pair_resumes_with_the_history_it_ran_with(
    tmp_path: Path,
) -> None:
    """R1.6, R11.16: the call's id holds the emoji in the live history, and the history
    resumed from a JSONL store equals it; the live one held the two halves, which the
    store gave back as the emoji, so the resumed agent's history differed."""
    call = ToolCallSpec("grin", "{}", id="call-" + HIGH + LOW)
    model = ScriptedModel([CallTools([call]), Reply("done")], repeat_last=True)
    # Real time: the JSONL store writes in threads.
    with trio.fail_after(30):
        async with retinue.open_runtime(
            models=model, tools=[grin], store=retinue.JSONLStore(tmp_path)
        ) as rt:
            agent = await rt.create_agent("a", OPTIONS, session_id="s")
            result = await agent.ask("go")
            live = list(agent.session.derive_messages())
            await agent.dispose()
            resumed = await rt.resume_agent("s")
            stored = list(resumed.session.derive_messages())
            await resumed.ask("again")
    assert result.reason.kind == "completed"
    assert stored == live
    assert live[1].content == (ToolCall("call-" + EMOJI, "grin", "{}"),)
    check_session_invariants(resumed.session.events)


async def test_two_calls_whose_ids_are_a_pair_and_its_character_share_one_id(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.15: a stored log would hold the two as one id, so the step ends the turn as any two calls
    of one id do, rather than running the two as distinct calls and storing a log that breaks
    R4.15."""
    calls = [
        ToolCallSpec("grin", "{}", id=HIGH + LOW),
        ToolCallSpec("grin", "{}", id=EMOJI),
    ]
    model = ScriptedModel([CallTools(calls), Reply("done")], repeat_last=True)
    async with runtime(model, tools=[grin]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("go")
    assert (result.reason.kind, result.reason.code) == ("error", "DUPLICATE_TOOL_CALL_ID")
    assert of_type(agent.session.events, "tool/call") == []


async def test_a_system_prompt_tool_and_cwd_holding_pairs_resume_with_the_header_they_ran_with(
    tmp_path: Path,
) -> None:
    """R8.8, R11.16: the resumed session's header and request header equal the live ones, and its
    next request is sent with the same system prompt, rather than the stored ones holding the emoji
    where the live ones hold the two halves."""
    described = attrs.evolve(grin, description="Grin " + HIGH + LOW)
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    with trio.fail_after(30):
        async with retinue.open_runtime(
            models=model,
            tools=[described],
            store=retinue.JSONLStore(tmp_path),
            system_prompt="Be brief " + HIGH + LOW,
        ) as rt:
            agent = await rt.create_agent("a", OPTIONS, session_id="s", cwd="/work/" + HIGH + LOW)
            await agent.ask("hi")
            live = agent.session
            await agent.dispose()
            resumed = await rt.resume_agent("s")
            await resumed.ask("again")
    assert (resumed.session.header, resumed.session.current_header) == (
        live.header,
        live.current_header,
    )
    assert model.requests[0].system == model.requests[1].system
    assert model.requests[0].tools == model.requests[1].tools


@pytest.mark.parametrize("store", ["memory", "jsonl"])
async def test_options_whose_cwd_holds_a_pair_resume_the_session_created_with_them(
    tmp_path: Path, store: str
) -> None:
    """R11.16, R13.1: an agent's options and a configured agent's entry hold their cwd as the
    session header does, the pair joined, so resuming with the options the session was created with
    finds the cwd it stored, not the character in the header and the two halves in the options,
    failing with CWD_MISMATCH."""
    options = attrs.evolve(OPTIONS, cwd="/work/" + HIGH + LOW)
    assert options.cwd == "/work/" + EMOJI
    entry = AgentEntry("a", model="scripted", cwd="/work/" + HIGH + LOW)
    assert entry.cwd == "/work/" + EMOJI
    opened = retinue.MemoryStore() if store == "memory" else retinue.JSONLStore(tmp_path)
    with trio.fail_after(30):
        async with retinue.open_runtime(
            models=ScriptedModel([Reply("ok")], repeat_last=True), store=opened
        ) as rt:
            agent = await rt.create_agent("a", options, session_id="s")
            await agent.ask("hi")
            await agent.dispose()
            resumed = await rt.resume_agent("s", options)
            assert resumed.session.header.cwd == "/work/" + EMOJI
            assert (await resumed.ask("again")).reason.kind == "completed"


async def test_a_cwd_given_both_ways_with_a_pair_is_one_cwd(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """create_agent's cwd keyword and options.cwd naming one path, a pair in it, are one cwd:
    the options hold it joined, so comparing it with the keyword as given read a conflict."""
    pair_path = "/work/" + HIGH + LOW
    options = attrs.evolve(OPTIONS, cwd=pair_path)
    with trio.fail_after(30):
        async with runtime(ScriptedModel([Reply("ok")], repeat_last=True)) as rt:
            agent = await rt.create_agent("a", options, cwd=pair_path)
            assert agent.session.header.cwd == "/work/" + EMOJI
