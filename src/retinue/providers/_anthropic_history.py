"""Anthropic Messages wire format: a session's history as the request's ``messages`` (pure)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from retinue._content import (
    ContentBlock,
    Message,
    OpaqueBlock,
    Reasoning,
    RedactedReasoning,
    Text,
    ToolCall,
    ToolResultBlock,
)
from retinue._request import messages_since

from ._replay import (
    EMPTY_ERROR_TEXT,
    EMPTY_TURN_TEXT,
    UNNAMED_TOOL,
    ReplayIds,
    joined_text,
    opaque_part,
    replay_input,
    responses_reasoning_item,
)
from ._settled import Point, Settled, keep_settled, take_settled

__all__ = ["Transcript", "anthropic_transcript"]

JsonObject = dict[str, object]
_THINKING_BLOCKS = ("thinking", "redacted_thinking")


class Transcript(NamedTuple):
    """A history as the Messages API takes it."""

    messages: list[JsonObject]
    system_texts: list[str]
    """The text of each system message, sent in the body's ``system``."""
    thinkless_loop: bool
    """Whether the messages end on tool results within an assistant turn (a tool loop: the
    assistant messages since the last user message holding more than tool results) whose
    first message does not start with a thinking block: the loop began without thinking."""


class _LoopScan(NamedTuple):
    """A walk back from the end of a transcript's first :attr:`turns` turns over a tool loop."""

    turns: int
    first: JsonObject | None
    """The earliest assistant turn met before a prompt, a user turn holding no tool results
    (or before the transcript's start)."""


def _scanned(
    turns: Sequence[JsonObject], start: int, end: int, before: _LoopScan | None
) -> _LoopScan:
    """The walk back from *end* to *start*, then on as *before* went from *start* (if given)."""
    first = None
    for index in range(end - 1, start - 1, -1):
        turn = turns[index]
        if turn["role"] == "assistant":
            first = turn
        elif not _holds_results(turn):
            return _LoopScan(end, first)
    if before is None or before.first is None:
        return _LoopScan(end, first)
    return _LoopScan(end, before.first)


def _holds_results(turn: JsonObject) -> bool:
    """Whether *turn* is a user turn answering tool calls."""
    content = turn["content"]
    return (
        turn["role"] == "user"
        and isinstance(content, list)
        and any(isinstance(block, dict) and block.get("type") == "tool_result" for block in content)
    )


def _thinkless_loop(turns: list[JsonObject], settled: Settled) -> bool:
    """:attr:`Transcript.thinkless_loop` of *turns*, of which *settled* holds the first ones.

    The walk over the settled turns is kept in *settled*, so a long tool loop is
    not walked again at each of its requests: each walks the turns after them.
    """
    kept = len(settled.items)
    before = settled.scan
    if not isinstance(before, _LoopScan) or before.turns > kept:
        before = None
    settled.scan = _scanned(turns, 0 if before is None else before.turns, kept, before)
    if not turns or not _holds_results(turns[-1]):
        return False
    first = _scanned(turns, kept, len(turns), settled.scan).first
    if first is None:
        return False
    content = first["content"]
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return True
    return content[0].get("type") not in _THINKING_BLOCKS


_NOT_IN_ID = re.compile(r"[^A-Za-z0-9_-]")


def _in_id_alphabet(call_id: str) -> str:
    """*call_id* in the characters the API allows in ids: another provider's ids may hold
    others (``functions.lookup:0``)."""
    return _NOT_IN_ID.sub("_", call_id) or "_"


def _text(block: Text) -> JsonObject | None:
    # The API refuses a text block with no visible text; a whitespace-only answer
    # in the history would fail every later request of the session.
    return {"type": "text", "text": block.text} if block.text.strip() else None


def _result_part(block: ContentBlock) -> JsonObject | None:
    """A block inside a ``tool_result``: text, or a block retinue does not model (an image)."""
    if isinstance(block, Text):
        return _text(block)
    if isinstance(block, OpaqueBlock):
        return opaque_part(block)
    return None


def _tool_result(block: ToolResultBlock, tool_ids: ReplayIds) -> JsonObject:
    content = [part for part in map(_result_part, block.content) if part is not None]
    if not content and block.is_error:
        # The API refuses an error result with no content.
        content = [{"type": "text", "text": EMPTY_ERROR_TEXT}]
    out: JsonObject = {
        "type": "tool_result",
        "tool_use_id": tool_ids.result(block.tool_call_id),
        "content": content,
    }
    if block.is_error:
        out["is_error"] = True
    return out


def _block(block: ContentBlock, tool_ids: ReplayIds) -> JsonObject | None:
    """One SPEC block as an Anthropic content block; ``None`` when it cannot be sent."""
    if isinstance(block, Text):
        return _text(block)
    if isinstance(block, ToolCall):
        return {
            "type": "tool_use",
            "id": tool_ids.call(block.id),
            "name": block.name or UNNAMED_TOOL,
            "input": replay_input(block.arguments),
        }
    if isinstance(block, Reasoning):
        # Unsigned (or signed empty, as some servers send it), or signed by the Responses
        # API with its reasoning item: the API cannot verify it.
        if not block.signature or responses_reasoning_item(block.signature) is not None:
            return None
        return {"type": "thinking", "thinking": block.text, "signature": block.signature}
    if isinstance(block, RedactedReasoning):
        return {"type": "redacted_thinking", "data": block.data}
    if isinstance(block, ToolResultBlock):
        return _tool_result(block, tool_ids)
    return opaque_part(block)


_THINKING = ("thinking", "redacted_thinking")


def _end_assistant_turn(out: list[JsonObject]) -> None:
    """Drop the thinking that ends the last turn, the assistant's; the turn goes if emptied.

    The API refuses an assistant turn whose final block is thinking, which a
    history holds when the answer after it was blank or a truncated tool call.
    """
    content = out[-1]["content"]
    assert isinstance(content, list)
    while content and content[-1]["type"] in _THINKING:
        content.pop()
    if not content:
        out.pop()


def _merge(out: list[JsonObject], role: str, blocks: list[JsonObject]) -> None:
    if out and out[-1]["role"] == role:
        previous = out[-1]["content"]
        assert isinstance(previous, list)
        previous.extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def _empty_turn() -> JsonObject:
    return {"role": "user", "content": [{"type": "text", "text": EMPTY_TURN_TEXT}]}


def _seal_user_turns(turns: list[JsonObject]) -> None:
    """Put each user turn's ``tool_result`` blocks first, as Anthropic requires; fill an empty one."""
    for turn in turns:
        if turn["role"] == "user":
            content = turn["content"]
            assert isinstance(content, list)
            content.sort(key=lambda block: block.get("type") != "tool_result")
            if not content:
                content.append({"type": "text", "text": EMPTY_TURN_TEXT})


def anthropic_transcript(messages: Sequence[Message]) -> Transcript:
    """Map SPEC messages to Anthropic ``messages``, and the text of each system message
    (sent in the body's ``system``); and whether they end in a tool loop begun without thinking.

    Consecutive messages of one role merge into one turn (roles must
    alternate); in each user turn the ``tool_result`` blocks come first, as
    Anthropic requires; thinking blocks are replayed with their signature,
    redacted thinking verbatim; reasoning without a signature (or signed
    with a Responses API item) and whitespace-only text are dropped, and so is thinking that would end an
    assistant turn. An assistant turn left empty is left out; a user turn
    left empty holds :data:`EMPTY_TURN_TEXT`, and one holding only that
    stands before an assistant turn that would start the transcript and
    after one that would end it: the transcript neither starts nor ends on
    the assistant's side.

    Of a session's history only the messages since the last user message
    that began a turn after a kept assistant turn are mapped: later messages
    change only the last turn (merging into it, or dropping its thinking).
    """
    settled = take_settled(messages, "anthropic", lambda: ReplayIds(_in_id_alphabet))
    turns, systems = settled.items, settled.texts
    kept = settled.point(settled.count)
    ends_on_thinking = False  # the assistant turn being built; noted per assistant message
    for position, message in enumerate(messages_since(messages, settled.count), settled.count):
        if message.role == "system":
            systems.append(joined_text(message.content))  # sent in the body's ``system``
        elif message.role != "assistant":
            if ends_on_thinking:
                _end_assistant_turn(turns)
                ends_on_thinking = False
            if turns and turns[-1]["role"] == "assistant":
                kept = _settle(settled, position, kept)
            _merge(turns, "user", _blocks(message, settled.ids))
        elif blocks := _blocks(message, settled.ids):
            _merge(turns, "assistant", blocks)
            ends_on_thinking = blocks[-1]["type"] in _THINKING
    if ends_on_thinking:
        _end_assistant_turn(turns)
    out, texts = turns.copy(), systems.copy()
    _seal_user_turns(out[kept.items :])
    settled.cut_back(kept)
    thinkless_loop = _thinkless_loop(out, settled)
    keep_settled(messages, "anthropic", settled)
    # A transcript that ends on the assistant's side is a prefill, which thinking
    # and recent models refuse; the API has long wanted the user's turn first.
    if not out or out[-1]["role"] == "assistant":
        out.append(_empty_turn())
    if out[0]["role"] == "assistant":
        out.insert(0, _empty_turn())
    return Transcript(out, texts, thinkless_loop)


def _blocks(message: Message, tool_ids: ReplayIds) -> list[JsonObject]:
    return [out_block for b in message.content if (out_block := _block(b, tool_ids))]


def _settle(settled: Settled, position: int, last: Point) -> Point:
    """Settle every turn so far: a user message starts a turn after a kept assistant turn.

    No later message changes a turn before the last one, so these are as
    the request sends them (those since the *last* point sealed now).
    """
    _seal_user_turns(settled.items[last.items :])
    settled.ids.settle()
    return settled.point(position)
