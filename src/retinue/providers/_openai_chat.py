"""OpenAI Chat Completions wire format: request bodies (pure)."""

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
    TEXT_BLOCK_SEPARATOR,
    UNNAMED_TOOL,
    ReplayIds,
    checked_tool_names,
    joined_text,
    opaque_part,
    replay_arguments,
    user_run_items,
)
from ._settled import keep_settled, take_settled

__all__ = ["chat_request_body"]

JsonObject = dict[str, object]


def _user_part(block: ContentBlock) -> JsonObject | None:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, OpaqueBlock):
        return opaque_part(block)
    return None


def _user_content(parts: list[JsonObject]) -> str | list[JsonObject]:
    if all(part.get("type") == "text" for part in parts):
        return TEXT_BLOCK_SEPARATOR.join(str(part["text"]) for part in parts)
    return parts


NOT_TEXT_RESULT = "(the tool's result is not text and cannot be shown here)"
"""A ``tool`` message's content when the result has no text: the message carries text only."""

FAILED_NOT_TEXT_RESULT = "(the tool failed; its result is not text and cannot be shown here)"
""":data:`NOT_TEXT_RESULT` for an error result: the message has no error flag."""


MAX_CALL_ID_LENGTH = 40
"""The longest tool-call id OpenAI's Chat Completions API accepts."""


def _tool_message(block: ToolResultBlock, call_ids: ReplayIds) -> JsonObject:
    text = joined_text(block.content)
    # An error's blank text says nothing of the failure either: the model would read
    # it as a tool that worked.
    unread = not text.strip() if block.is_error else not text
    if unread and any(isinstance(b, OpaqueBlock) for b in block.content):
        text = FAILED_NOT_TEXT_RESULT if block.is_error else NOT_TEXT_RESULT
    elif unread and block.is_error:
        text = EMPTY_ERROR_TEXT
    return {"role": "tool", "tool_call_id": call_ids.result(block.tool_call_id), "content": text}


def _user_message(message: Message) -> JsonObject | None:
    parts = [p for p in map(_user_part, message.content) if p is not None]
    return {"role": "user", "content": _user_content(parts)} if parts else None


def _assistant_message(
    message: Message, call_ids: ReplayIds, *, replay_reasoning: bool
) -> JsonObject | None:
    text = joined_text(message.content)
    calls = [
        {
            "id": call_ids.call(b.id),
            "type": "function",
            "function": {
                "name": b.name or UNNAMED_TOOL,
                "arguments": replay_arguments(b.arguments),
            },
        }
        for b in message.content
        if isinstance(b, ToolCall)
    ]
    if not text and not calls:
        return None
    out: JsonObject = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = calls
    # A signature marks another provider's reasoning, which this API cannot check.
    if replay_reasoning:
        reasoning = [
            b.text for b in message.content if isinstance(b, Reasoning) and b.signature is None
        ]
        if reasoning:
            out["reasoning_content"] = "".join(reasoning)
    return out


def chat_messages(
    system: str | None, messages: Sequence[Message], *, replay_reasoning: bool = False
) -> list[JsonObject]:
    """Map a system prompt and SPEC messages to Chat Completions ``messages``.

    In each run of consecutive user messages the tool results become
    ``role: "tool"`` messages placed before any other user content. Unsigned
    reasoning goes back as ``reasoning_content`` only with *replay_reasoning*
    (DeepSeek's extension; OpenAI's API has no such field). A tool-call id
    longer than the API accepts, or repeating the id of a call in an earlier
    turn, is sent shortened or suffixed, in its call and its result alike.

    Of a session's history only the messages since the last run of the
    previous request are mapped: each run maps alone, and only the last run
    of a history may still go on.
    """
    key = ("chat", replay_reasoning)
    settled = take_settled(messages, key, lambda: ReplayIds.within(MAX_CALL_ID_LENGTH))
    call_ids, items = settled.ids, settled.items
    tool_message = functools.partial(_tool_message, call_ids=call_ids)
    position = settled.count
    last_run = settled.point(position)
    for role, group in groupby(messages_since(messages, position), key=lambda m: m.role):
        call_ids.settle()
        last_run = settled.point(position)
        run = list(group)
        position += len(run)
        if role == "user":
            items.extend(user_run_items(run, tool_message, _user_message))
        elif role == "system":
            items.extend({"role": "system", "content": joined_text(m.content)} for m in run)
        else:
            mapped = (
                _assistant_message(m, call_ids, replay_reasoning=replay_reasoning) for m in run
            )
            items.extend(m for m in mapped if m is not None)
    out: list[JsonObject] = [{"role": "system", "content": system}] if system else []
    out.extend(items)
    settled.cut_back(last_run)
    keep_settled(messages, key, settled)
    return out


def chat_tools(tools: Sequence[ToolSchema]) -> list[JsonObject]:
    """Map tool schemas to Chat Completions ``tools``."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": thaw_json(tool.parameters),
            },
        }
        for tool in checked_tool_names(tools, "Chat Completions")
    ]


def chat_request_body(
    request: ModelRequest,
    *,
    stream: bool = True,
    max_tokens_param: str = "max_completion_tokens",
    replay_reasoning: bool = False,
) -> JsonObject:
    """Build the Chat Completions request body for *request*; pure.

    Raises:
        ProviderError: ``INVALID_REQUEST``: a tool's name is one the API refuses.
    """
    messages = chat_messages(request.system, request.messages, replay_reasoning=replay_reasoning)
    body: JsonObject = {"model": request.model, "messages": messages}
    if request.tools:
        body["tools"] = chat_tools(request.tools)
    if request.max_tokens is not None:
        body[max_tokens_param] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.stop:
        body["stop"] = list(request.stop)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body
