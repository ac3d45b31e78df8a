"""OpenAI Responses API wire format: request bodies (pure)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from itertools import groupby

from retinue._content import (
    ContentBlock,
    Message,
    OpaqueBlock,
    Reasoning,
    Text,
    ToolCall,
    ToolResultBlock,
)
from retinue._lossless import thaw_json
from retinue._request import ModelRequest, ToolSchema, messages_since

from ._replay import (
    EMPTY_ERROR_TEXT,
    UNNAMED_TOOL,
    ReplayIds,
    checked_tool_names,
    joined_text,
    opaque_part,
    replay_arguments,
    responses_reasoning_item,
    user_run_items,
)
from ._settled import Settled, keep_settled, set_aside, take_settled

__all__ = ["responses_request_body"]


JsonObject = dict[str, object]
MIN_OUTPUT_TOKENS = 16
"""The smallest ``max_output_tokens`` the Responses API accepts."""
MAX_CALL_ID_LENGTH = 64
"""The longest ``call_id`` the Responses API accepts."""


def _input_part(block: ContentBlock) -> JsonObject | None:
    """A user or tool-output part; ``None`` for a block that has nothing to send here."""
    if isinstance(block, Text):
        return {"type": "input_text", "text": block.text} if block.text else None
    if isinstance(block, OpaqueBlock):
        return opaque_part(block)
    return None


def _sends_input(block: ContentBlock) -> bool:
    """Whether :func:`_input_part` gives *block* a part (without building it)."""
    return isinstance(block, OpaqueBlock) or (isinstance(block, Text) and bool(block.text))


def _parts(content: Sequence[ContentBlock]) -> str | list[JsonObject]:
    """Text as one string (a line per block); content with a block retinue does not model
    (an image) as parts.
    """
    if not any(isinstance(block, OpaqueBlock) for block in content):
        return joined_text(content)
    return [part for part in map(_input_part, content) if part is not None]


def _function_output(block: ToolResultBlock, call_ids: ReplayIds) -> JsonObject:
    output = _parts(block.content)
    # The output has no error flag: a failure with no text to say so (blank, or an image
    # alone) would read as a tool that worked.
    if block.is_error and isinstance(output, str) and not output.strip():
        output = EMPTY_ERROR_TEXT
    elif block.is_error and isinstance(output, list) and not _says_anything(output):
        output = [{"type": "input_text", "text": EMPTY_ERROR_TEXT}, *output]
    return {
        "type": "function_call_output",
        "call_id": call_ids.result(block.tool_call_id),
        "output": output,
    }


def _says_anything(parts: list[JsonObject]) -> bool:
    """Whether *parts* hold text that is not only whitespace."""
    return any(
        part.get("type") == "input_text" and str(part.get("text", "")).strip() for part in parts
    )


def _user_message(message: Message) -> JsonObject | None:
    user = [b for b in message.content if _sends_input(b)]
    return {"role": "user", "content": _parts(user)} if user else None


def _function_call(block: ToolCall, call_ids: ReplayIds) -> JsonObject:
    return {
        "type": "function_call",
        "call_id": call_ids.call(block.id),
        "name": block.name or UNNAMED_TOOL,
        "arguments": replay_arguments(block.arguments),
    }


def _assistant_items(
    message: Message, call_ids: ReplayIds, *, with_reasoning: bool
) -> list[JsonObject]:
    """The message's text as one message item, then its calls.

    With *with_reasoning*, each reasoning item the API returned goes just
    before the first call that followed it, and those calls with the item ids
    the API gave them: the API pairs them by those ids, and refuses a
    reasoning item without its following item. Reasoning that no call
    followed (an answer's text did) is not sent.
    """
    text = joined_text(message.content)
    items: list[JsonObject] = [{"role": "assistant", "content": text}] if text else []
    waiting: list[tuple[JsonObject, dict[str, str]]] = []
    linked: dict[str, str] = {}  # call id -> item id, of the calls of the items sent
    for block in message.content:
        if isinstance(block, Reasoning):
            found = responses_reasoning_item(block.signature) if with_reasoning else None
            if found is not None and found[1]:
                waiting.append(found)
        elif isinstance(block, ToolCall):
            # The items this call followed go just before it, each once.
            for reasoning, calls in waiting:
                if block.id in calls:
                    items.append(reasoning)
                    linked.update(calls)
            waiting = [found for found in waiting if block.id not in found[1]]
            call = _function_call(block, call_ids)
            if block.id in linked:
                call["id"] = linked[block.id]
            items.append(call)
    return items


def _turn_start(messages: Sequence[Message], settled: Settled) -> int:
    """Where the current turn's messages start: after the latest prompt (a user message
    that is not only tool results).

    When the prompt *settled* found is among its settled messages, only the
    messages after them are searched: no prompt there leaves it the latest.
    """
    known = settled.turn <= settled.count
    for index in range(len(messages) - 1, settled.count - 1 if known else -1, -1):
        message = messages[index]
        if message.role == "user" and not (
            message.content and all(isinstance(b, ToolResultBlock) for b in message.content)
        ):
            return index + 1
    return settled.turn if known else 0


def _new_ids() -> ReplayIds:
    return ReplayIds.within(MAX_CALL_ID_LENGTH)


def responses_input(messages: Sequence[Message]) -> list[JsonObject]:
    """Map SPEC messages to Responses ``input`` items.

    Reasoning the API returned in the current turn (since the latest prompt)
    goes back with the calls that followed it, so that a reasoning model
    keeps its chain of thought through its tool loop; the API ignores the
    reasoning of earlier turns, which is not sent.

    A call that repeats the id of an earlier call is sent with a suffixed id,
    and its output with it: the API refuses a second output for one id. An
    id longer than the API accepts is sent shortened.

    Of a session's history only the messages since the last run of the
    previous request are mapped; once a prompt has ended a turn, that turn's
    messages are mapped once more, without their reasoning.
    """
    settled = take_settled(messages, "responses", _new_ids)
    turn_start = _turn_start(messages, settled)
    if turn_start < settled.turn:  # an older snapshot, of an earlier turn
        settled = set_aside(messages, "responses", settled, _new_ids)
        turn_start = _turn_start(messages, settled)
    elif turn_start > settled.turn:
        settled.cut_back(settled.turn_point)
    settled.turn = turn_start
    items = _mapped_since(messages, settled)
    keep_settled(messages, "responses", settled)
    return items


def _mapped_since(messages: Sequence[Message], settled: Settled) -> list[JsonObject]:
    """The items of *messages*, mapping those *settled* has not; then cut back to its last run."""
    call_ids, items, turn_start = settled.ids, settled.items, settled.turn
    output = functools.partial(_function_output, call_ids=call_ids)
    position = settled.count
    last_run = settled.point(position)
    for role, group in groupby(messages_since(messages, position), key=lambda m: m.role):
        # What maps before the turn's start stays as it is: a later prompt only moves it on.
        if position <= turn_start:
            call_ids.settle()
            settled.turn_point = settled.point(position)
        last_run = settled.point(position)
        run = list(group)
        if role == "user":
            items.extend(user_run_items(run, output, _user_message))
        elif role == "system":
            items.extend({"role": "developer", "content": joined_text(m.content)} for m in run)
        else:
            for offset, m in enumerate(run):
                current = position + offset >= turn_start
                items.extend(_assistant_items(m, call_ids, with_reasoning=current))
        position += len(run)
    out = items.copy()
    settled.cut_back(last_run)
    return out


def responses_tools(tools: Sequence[ToolSchema]) -> list[JsonObject]:
    """Map tool schemas to Responses function tools."""
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": thaw_json(tool.parameters),
            "strict": False,
        }
        for tool in checked_tool_names(tools, "Responses")
    ]


def responses_request_body(request: ModelRequest, *, stream: bool = True) -> JsonObject:
    """Build the Responses API request body for *request*; pure.

    ``stop`` has no Responses equivalent and is not sent; ``max_output_tokens``
    is at least :data:`MIN_OUTPUT_TOKENS`.

    Raises:
        ProviderError: ``INVALID_REQUEST``: a tool's name is one the API refuses.
    """
    body: JsonObject = {"model": request.model, "input": responses_input(request.messages)}
    if request.system:
        body["instructions"] = request.system
    if request.tools:
        body["tools"] = responses_tools(request.tools)
    limit = request.max_tokens
    if limit is not None:
        # The API refuses a positive limit below 16, though it only asks for a short answer.
        body["max_output_tokens"] = MIN_OUTPUT_TOKENS if 0 < limit < MIN_OUTPUT_TOKENS else limit
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if stream:
        body["stream"] = True
    return body
