"""Render mock replies as OpenAI Chat Completions: a JSON object or stream chunks."""

from __future__ import annotations

from ._render_shared import JsonObject, call_id, dumps, reply_tag, split_text, usage_counts
from ._values import MockCall, MockReply

__all__ = ["chat_json", "chat_stream", "chat_text_delta"]


def _chat_chunk(call: MockCall, delta: JsonObject, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    payload = {
        "id": f"chatcmpl-mock{reply_tag(call)}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": call.model,
        "choices": [choice],
    }
    return f"data: {dumps(payload)}\n\n".encode()


def chat_text_delta(call: MockCall, piece: str) -> bytes:
    """The chunk carrying *piece* of a reply's text."""
    return _chat_chunk(call, {"content": piece})


def chat_stream(call: MockCall, reply: MockReply) -> list[bytes]:
    # OpenAI opens a reply that has only tool calls with null content, any other with ""
    content = None if reply.tool_calls and not reply.text else ""
    events = [_chat_chunk(call, {"role": "assistant", "content": content, "refusal": None})]
    events += [_chat_chunk(call, {"reasoning_content": p}) for p in split_text(reply.reasoning, 3)]
    events += [chat_text_delta(call, p) for p in split_text(reply.text, reply.chunks)]
    for index, tool in enumerate(reply.tool_calls):
        head = {
            "index": index,
            "id": call_id(call, index, tool.id, "call"),
            "type": "function",
            "function": {"name": tool.name, "arguments": ""},
        }
        events.append(_chat_chunk(call, {"tool_calls": [head]}))
        for part in split_text(tool.arguments, 3):
            fragment = {"index": index, "function": {"arguments": part}}
            events.append(_chat_chunk(call, {"tool_calls": [fragment]}))
    events.append(_chat_chunk(call, {}, reply.finish_name))
    if call.include_usage:
        events.append(f"data: {dumps(_chat_usage_chunk(call, reply))}\n\n".encode())
    events.append(b"data: [DONE]\n\n")
    return events


def _chat_usage(call: MockCall, reply: MockReply) -> JsonObject:
    prompt, completion = usage_counts(call, reply)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def _chat_usage_chunk(call: MockCall, reply: MockReply) -> JsonObject:
    return {
        "id": f"chatcmpl-mock{reply_tag(call)}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": call.model,
        "choices": [],
        "usage": _chat_usage(call, reply),
    }


def chat_json(call: MockCall, reply: MockReply) -> JsonObject:
    message: JsonObject = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        # Where DeepSeek puts it, as in the streamed deltas.
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id(call, index, tool.id, "call"),
                "type": "function",
                "function": {"name": tool.name, "arguments": tool.arguments},
            }
            for index, tool in enumerate(reply.tool_calls)
        ]
    return {
        "id": f"chatcmpl-mock{reply_tag(call)}",
        "object": "chat.completion",
        "created": 0,
        "model": call.model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_name}],
        "usage": _chat_usage(call, reply),
    }
