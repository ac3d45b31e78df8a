"""An emoji a server split between two deltas, as two ``\\u`` escapes of UTF-16 halves, reaches
the consumer of the deltas whole: each delta is text UTF-8 can carry."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from retinue._content import Text, ToolCall
from retinue._stream import ReasoningDelta, StreamChunk, TextDelta, ToolCallDelta
from tests.providers._wire_edge_kit import MESSAGE_END, MESSAGE_START, typed_event
from tests.providers.support import serve_once, sse_body

# What a JSON decoder gives for the two escapes of one emoji, each in an event of its own.
HIGH, LOW = json.loads('"\\ud83d"'), json.loads('"\\ude00"')
EMOJI = "\U0001f600"


def _chat(*deltas: dict[str, Any], finish: str = "stop") -> bytes:
    def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        payload = {"id": "c", "object": "chat.completion.chunk", "choices": [choice]}
        return json.dumps(payload).encode()

    return sse_body(*map(chunk, deltas), chunk({}, finish), b"[DONE]")


def _anthropic(block: dict[str, Any], *deltas: dict[str, Any]) -> bytes:
    events: list[dict[str, Any]] = [
        MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": block},
        *({"type": "content_block_delta", "index": 0, "delta": delta} for delta in deltas),
        {"type": "content_block_stop", "index": 0},
        *MESSAGE_END,
    ]
    return b"".join(map(typed_event, events))


def _responses(*texts: str) -> bytes:
    events = [
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": t}
        for t in texts
    ]
    events.append({"type": "response.completed", "response": {"status": "completed"}})
    return b"".join(map(typed_event, events))


def _texts(chunks: list[StreamChunk]) -> list[str]:
    texts: list[str] = []
    for chunk in chunks:
        if isinstance(chunk, TextDelta | ReasoningDelta):
            texts.append(chunk.text)
        elif isinstance(chunk, ToolCallDelta):
            texts.append(chunk.arguments_delta)
    return texts


def _utf8(texts: list[str]) -> list[bytes]:
    return [text.encode("utf-8") for text in texts]


TEXT_STREAMS = {
    "chat": _chat({"content": "smile " + HIGH}, {"content": LOW + "!"}),
    "responses": _responses("smile " + HIGH, LOW + "!"),
    "messages": _anthropic(
        {"type": "text", "text": ""},
        {"type": "text_delta", "text": "smile " + HIGH},
        {"type": "text_delta", "text": LOW + "!"},
    ),
}


@pytest.mark.parametrize("api", sorted(TEXT_STREAMS))
async def test_a_pair_split_between_two_text_deltas_goes_out_whole_in_the_second(
    api: str,
) -> None:
    """R10.1: the deltas are ``smile `` and the emoji with what follows it, not the first
    holding the emoji's high half and the second its low half, neither of which UTF-8
    can write."""
    collected = await serve_once(api, TEXT_STREAMS[api])
    texts = _texts(collected.chunks)
    assert _utf8(texts) == [b"smile ", (EMOJI + "!").encode()]
    assert collected.message.content == (Text("smile " + EMOJI + "!"),)


async def test_a_pair_split_between_two_thinking_deltas_goes_out_whole() -> None:
    """R10.1: a thinking block's deltas are text of their own too."""
    body = _anthropic(
        {"type": "thinking", "thinking": ""},
        {"type": "thinking_delta", "thinking": HIGH},
        {"type": "thinking_delta", "thinking": LOW},
        {"type": "signature_delta", "signature": "sig"},
    )
    collected = await serve_once("messages", body)
    assert b"".join(_utf8(_texts(collected.chunks))) == EMOJI.encode()


async def test_a_pair_split_between_two_argument_deltas_goes_out_whole() -> None:
    """R10.2: a tool call's raw argument text is split only between whole characters."""
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "say"}}
    first = {**call, "function": {"name": "say", "arguments": '{"text": "' + HIGH}}
    second = {"index": 0, "function": {"arguments": LOW + '"}'}}
    body = _chat({"tool_calls": [first]}, {"tool_calls": [second]}, finish="tool_calls")
    collected = await serve_once("chat", body)
    assert _utf8(_texts(collected.chunks)) == [b'{"text": "', (EMOJI + '"}').encode()]
    assert collected.message.content == (ToolCall("call_1", "say", '{"text": "' + EMOJI + '"}'),)


@pytest.mark.parametrize("api", sorted(TEXT_STREAMS))
async def test_a_half_whose_pair_never_came_still_reaches_the_deltas(api: str) -> None:
    """R10.1: a lone half at a block's end is held back only until that end: the deltas
    still add up to the block's text."""
    bodies = {
        "chat": _chat({"content": "a" + HIGH}),
        "responses": _responses("a" + HIGH),
        "messages": _anthropic(
            {"type": "text", "text": ""}, {"type": "text_delta", "text": "a" + HIGH}
        ),
    }
    with trio.fail_after(5):
        collected = await serve_once(api, bodies[api])
    assert "".join(_texts(collected.chunks)) == "a" + HIGH
    assert collected.message.content == (Text("a" + HIGH),)


def _responses_counted_from_one(complete: dict[str, Any]) -> bytes:
    """Deltas whose ``content_index`` counts from 1, an emoji split between them, then
    *complete*: the part or item as the API sends it whole, counted from 0."""
    message = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": message},
        *(
            {
                "type": "response.output_text.delta",
                "output_index": 0,
                "content_index": 1,
                "delta": d,
            }
            for d in ("smile " + HIGH, LOW + "!")
        ),
        complete,
        {"type": "response.completed", "response": {"status": "completed"}},
    ]
    return b"".join(map(typed_event, events))


WHOLE_PART = {"type": "output_text", "text": "smile " + EMOJI + "!", "annotations": []}


@pytest.mark.parametrize(
    "complete",
    [
        {
            "type": "response.content_part.done",
            "output_index": 0,
            "content_index": 0,
            "part": WHOLE_PART,
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [WHOLE_PART],
            },
        },
    ],
    ids=["content_part.done", "output_item.done"],
)
async def test_a_complete_part_matches_the_deltas_that_split_its_emoji(
    complete: dict[str, Any],
) -> None:
    """R10.6: the part the deltas streamed, keyed otherwise, is found by its text, its emoji
    whole in both, so the text does not come twice, the deltas holding it split and
    matching nothing."""
    collected = await serve_once("responses", _responses_counted_from_one(complete))
    assert collected.message.content == (Text("smile " + EMOJI + "!"),)


async def test_a_held_half_repeats_no_signature() -> None:
    """R10.1: a thinking text ending in a lone half, then its signature: the deltas carry
    the signature once, the held half not carrying it too."""
    body = _anthropic(
        {"type": "thinking", "thinking": ""},
        {"type": "thinking_delta", "thinking": "hm" + HIGH},
        {"type": "signature_delta", "signature": "sig"},
    )
    collected = await serve_once("messages", body)
    deltas = [chunk for chunk in collected.chunks if isinstance(chunk, ReasoningDelta)]
    assert [delta.signature for delta in deltas if delta.signature] == ["sig"]
    assert "".join(delta.text for delta in deltas) == "hm" + HIGH


async def test_a_held_half_repeats_no_call_id_or_name() -> None:
    """R10.2: a call's first argument delta ending in a lone half: its id and name go out
    once, with the rest of that delta; the held half does not repeat them."""
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "say"}}
    first = {**call, "function": {"name": "say", "arguments": '{"text": "' + HIGH}}
    body = _chat({"tool_calls": [first]}, finish="tool_calls")
    collected = await serve_once("chat", body)
    deltas = [chunk for chunk in collected.chunks if isinstance(chunk, ToolCallDelta)]
    assert [(delta.id, delta.name) for delta in deltas if delta.id or delta.name] == [
        ("call_1", "say")
    ]
    assert "".join(delta.arguments_delta for delta in deltas) == '{"text": "' + HIGH


async def test_a_block_whose_first_delta_is_only_a_half_opens_in_its_place() -> None:
    """R10.6: reasoning whose first delta is only the high half of an emoji, and text in
    the same event: the reasoning block still opens first, its delta empty."""
    body = _chat({"reasoning_content": HIGH, "content": "x"}, {"reasoning_content": LOW})
    collected = await serve_once("chat", body)
    first = next(c for c in collected.chunks if isinstance(c, TextDelta | ReasoningDelta))
    assert isinstance(first, ReasoningDelta)
    assert [type(block).__name__ for block in collected.message.content] == ["Reasoning", "Text"]
