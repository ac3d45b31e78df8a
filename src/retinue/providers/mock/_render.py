"""Render neutral mock replies in the three wire formats (pure; bytes out)."""

from __future__ import annotations

import json
from collections.abc import Callable

from ._values import Api, MockCall, MockReply

__all__ = [
    "endless_event",
    "endless_prologue",
    "error_body",
    "render_json",
    "render_stream",
    "stream_error_event",
]

JsonObject = dict[str, object]
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def split_text(text: str, pieces: int) -> list[str]:
    """Split *text* into at most *pieces* non-empty parts (cutting anywhere)."""
    if not text:
        return []
    pieces = max(1, min(pieces, len(text)))
    size, extra = divmod(len(text), pieces)
    parts, start = [], 0
    for index in range(pieces):
        end = start + size + (1 if index < extra else 0)
        parts.append(text[start:end])
        start = end
    return parts


def _event(payload: JsonObject, name: str | None = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {_dumps(payload)}\n\n".encode()


def _tag(call: MockCall) -> str:
    """The id suffix of *call*'s reply.

    Ids come back in later requests (tool call ids, thinking signatures), so
    they derive from the request, not from its arrival order, to keep the
    next request's key stable from run to run.
    """
    base = call.key[:16]
    return f"{base}_{call.occurrence}" if call.occurrence else base


def _call_id(call: MockCall, index: int, given: str | None, prefix: str) -> str:
    return given or f"{prefix}_{_tag(call)}_{index}"


def _usage_counts(call: MockCall, reply: MockReply) -> tuple[int, int]:
    output = reply.output_tokens
    if output is None:
        text = reply.text + reply.reasoning + "".join(c.arguments for c in reply.tool_calls)
        output = max(1, len(text) // 4)
    return (reply.input_tokens or call.input_tokens), output


# -- Chat Completions ---------------------------------------------------------------


def _chat_chunk(call: MockCall, delta: JsonObject, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    payload = {
        "id": f"chatcmpl-mock{_tag(call)}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": call.model,
        "choices": [choice],
    }
    return f"data: {_dumps(payload)}\n\n".encode()


def _chat_stream(call: MockCall, reply: MockReply) -> list[bytes]:
    # OpenAI opens a reply that has only tool calls with null content, any other with ""
    content = None if reply.tool_calls and not reply.text else ""
    events = [_chat_chunk(call, {"role": "assistant", "content": content, "refusal": None})]
    events += [_chat_chunk(call, {"reasoning_content": p}) for p in split_text(reply.reasoning, 3)]
    events += [_chat_chunk(call, {"content": p}) for p in split_text(reply.text, reply.chunks)]
    for index, tool in enumerate(reply.tool_calls):
        head = {
            "index": index,
            "id": _call_id(call, index, tool.id, "call"),
            "type": "function",
            "function": {"name": tool.name, "arguments": ""},
        }
        events.append(_chat_chunk(call, {"tool_calls": [head]}))
        for part in split_text(tool.arguments, 3):
            fragment = {"index": index, "function": {"arguments": part}}
            events.append(_chat_chunk(call, {"tool_calls": [fragment]}))
    events.append(_chat_chunk(call, {}, reply.finish_name))
    if call.include_usage:
        events.append(f"data: {_dumps(_chat_usage_chunk(call, reply))}\n\n".encode())
    events.append(b"data: [DONE]\n\n")
    return events


def _chat_usage(call: MockCall, reply: MockReply) -> JsonObject:
    prompt, completion = _usage_counts(call, reply)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def _chat_usage_chunk(call: MockCall, reply: MockReply) -> JsonObject:
    return {
        "id": f"chatcmpl-mock{_tag(call)}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": call.model,
        "choices": [],
        "usage": _chat_usage(call, reply),
    }


def _chat_json(call: MockCall, reply: MockReply) -> JsonObject:
    message: JsonObject = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": _call_id(call, index, tool.id, "call"),
                "type": "function",
                "function": {"name": tool.name, "arguments": tool.arguments},
            }
            for index, tool in enumerate(reply.tool_calls)
        ]
    return {
        "id": f"chatcmpl-mock{_tag(call)}",
        "object": "chat.completion",
        "created": 0,
        "model": call.model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_name}],
        "usage": _chat_usage(call, reply),
    }


# -- Responses --------------------------------------------------------------------
# The event sequence follows the recorded real streams: created, in_progress,
# then per output item added / part added / deltas / done events, each carrying
# item_id and a sequence_number; the official SDK's stream helper needs them.


def _responses_output(call: MockCall, reply: MockReply) -> list[JsonObject]:
    tag = _tag(call)
    output: list[JsonObject] = []
    if reply.reasoning:
        summary = [{"type": "summary_text", "text": reply.reasoning}]
        output.append({"id": f"rs_mock{tag}", "type": "reasoning", "summary": summary})
    if reply.text:
        output.append(
            {
                "id": f"msg_mock{tag}",
                "type": "message",
                "status": "completed",
                "content": [_output_text(reply.text)],
                "role": "assistant",
            }
        )
    for index, tool in enumerate(reply.tool_calls):
        output.append(
            {
                "id": f"fc_mock{tag}_{index}",
                "type": "function_call",
                "status": "completed",
                "arguments": tool.arguments,
                "call_id": _call_id(call, index, tool.id, "call"),
                "name": tool.name,
            }
        )
    if reply.finish_name == "length" and output and "status" in output[-1]:
        # The budget ran out inside the last item: the API marks that item unfinished too.
        output[-1] = {**output[-1], "status": "incomplete"}
    return output


def _output_text(text: str) -> JsonObject:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _responses_object(call: MockCall, reply: MockReply) -> JsonObject:
    prompt, completion = _usage_counts(call, reply)
    reasoning = min(completion, max(1, len(reply.reasoning) // 4)) if reply.reasoning else 0
    incomplete = reply.finish_name == "length"
    return {
        "id": f"resp_mock{_tag(call)}",
        "object": "response",
        "created_at": 0,
        "status": "incomplete" if incomplete else "completed",
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "model": call.model,
        "output": _responses_output(call, reply),
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt + completion,
        },
    }


def _responses_stream(call: MockCall, reply: MockReply) -> list[bytes]:
    return _numbered(_responses_payloads(call, reply))


def _responses_payloads(call: MockCall, reply: MockReply) -> list[JsonObject]:
    """The stream's events, not yet numbered."""
    final = _responses_object(call, reply)
    # Until the end the API cannot know the output will be cut: no incomplete_details yet.
    started = {
        **final,
        "status": "in_progress",
        "incomplete_details": None,
        "output": [],
        "usage": None,
    }
    payloads: list[JsonObject] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    output = final["output"]
    assert isinstance(output, list)
    for position, item in enumerate(output):
        assert isinstance(item, dict)
        payloads += _responses_item_events(reply, position, item)
    kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    payloads.append({"type": kind, "response": final})
    return payloads


def _numbered(payloads: list[JsonObject], first: int = 0) -> list[bytes]:
    """Encode Responses events with consecutive sequence numbers from *first*."""
    return [
        _event({"type": p["type"], "sequence_number": first + n, **p}, str(p["type"]))
        for n, p in enumerate(payloads)
    ]


def _responses_item_events(reply: MockReply, position: int, item: JsonObject) -> list[JsonObject]:
    def event(kind: str, **fields: object) -> JsonObject:
        return {"type": kind, "item_id": item["id"], "output_index": position, **fields}

    if item["type"] == "message":
        started = {**item, "status": "in_progress", "content": []}
        deltas = split_text(reply.text, reply.chunks)
        part: JsonObject = {"content_index": 0}
        middle = [
            event("response.content_part.added", **part, part=_output_text("")),
            *(event("response.output_text.delta", **part, delta=d, logprobs=[]) for d in deltas),
            event("response.output_text.done", **part, text=reply.text, logprobs=[]),
            event("response.content_part.done", **part, part=_output_text(reply.text)),
        ]
    elif item["type"] == "reasoning":
        started = {**item, "summary": []}
        middle = _summary_events(event, reply.reasoning)
    else:
        started = {**item, "status": "in_progress", "arguments": ""}
        arguments = str(item["arguments"])
        middle = [
            *(
                event("response.function_call_arguments.delta", delta=part)
                for part in split_text(arguments, 3)
            ),
            event("response.function_call_arguments.done", arguments=arguments),
        ]
    added = {"type": "response.output_item.added", "output_index": position, "item": started}
    done = {"type": "response.output_item.done", "output_index": position, "item": item}
    return [added, *middle, done]


def _summary_events(event: Callable[..., JsonObject], text: str) -> list[JsonObject]:
    index: JsonObject = {"summary_index": 0}
    part = {"type": "summary_text", "text": ""}
    return [
        event("response.reasoning_summary_part.added", **index, part=part),
        *(
            event("response.reasoning_summary_text.delta", **index, delta=piece)
            for piece in split_text(text, 3)
        ),
        event("response.reasoning_summary_text.done", **index, text=text),
        event("response.reasoning_summary_part.done", **index, part={**part, "text": text}),
    ]


# -- Anthropic Messages -------------------------------------------------------------

_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def _is_json(arguments: str) -> bool:
    try:
        json.loads(arguments or "{}")
    except ValueError:
        return False
    return True


def _raw_arguments(reply: MockReply, blocks: int) -> list[str | None]:
    """Per block, a tool call's arguments when they are not JSON, else ``None``.

    Scripts give such arguments to test how clients handle them; a stream can
    carry them as partial JSON, where a ``tool_use`` object cannot.
    """
    raw = [None if _is_json(t.arguments) else t.arguments for t in reply.tool_calls]
    return [None] * (blocks - len(raw)) + raw


def _anthropic_blocks(call: MockCall, reply: MockReply) -> list[JsonObject]:
    blocks: list[JsonObject] = []
    if reply.reasoning:
        blocks.append(
            {"type": "thinking", "thinking": reply.reasoning, "signature": f"sig-mock{_tag(call)}"}
        )
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for index, tool in enumerate(reply.tool_calls):
        blocks.append(
            {
                "type": "tool_use",
                "id": _call_id(call, index, tool.id, "toolu"),
                "name": tool.name,
                "input": json.loads(tool.arguments or "{}") if _is_json(tool.arguments) else {},
            }
        )
    return blocks


def _anthropic_message(call: MockCall, reply: MockReply, *, final: bool) -> JsonObject:
    prompt, completion = _usage_counts(call, reply)
    return {
        "id": f"msg_mock{_tag(call)}",
        "type": "message",
        "role": "assistant",
        "model": call.model,
        "content": _anthropic_blocks(call, reply) if final else [],
        "stop_reason": _STOP_REASONS.get(reply.finish_name, reply.finish_name) if final else None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": completion if final else 1,
        },
    }


def _anthropic_block_events(
    index: int, block: JsonObject, chunks: int, raw_arguments: str | None = None
) -> list[bytes]:
    def event(kind: str, **fields: object) -> bytes:
        return _event({"type": kind, "index": index, **fields}, kind)

    kind = block["type"]
    start: JsonObject
    deltas: list[JsonObject]
    if kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": p} for p in split_text(str(block["thinking"]), 3)
        ]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in split_text(str(block["text"]), chunks)]
    else:
        start = {**block, "input": {}}
        arguments = _dumps(block["input"]) if raw_arguments is None else raw_arguments
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in split_text(arguments, 3)]
    events = [event("content_block_start", content_block=start)]
    events += [event("content_block_delta", delta=delta) for delta in deltas]
    events.append(event("content_block_stop"))
    return events


def _anthropic_stream(call: MockCall, reply: MockReply) -> list[bytes]:
    final = _anthropic_message(call, reply, final=True)
    events = [
        _event(
            {"type": "message_start", "message": _anthropic_message(call, reply, final=False)},
            "message_start",
        )
    ]
    blocks = final["content"]
    assert isinstance(blocks, list)
    raw = _raw_arguments(reply, len(blocks))
    for index, block in enumerate(blocks):
        events += _anthropic_block_events(index, block, reply.chunks, raw[index])
    delta = {"stop_reason": final["stop_reason"], "stop_sequence": None}
    events.append(
        _event({"type": "message_delta", "delta": delta, "usage": final["usage"]}, "message_delta")
    )
    events.append(_event({"type": "message_stop"}, "message_stop"))
    return events


# -- dispatch --------------------------------------------------------------------

_STREAMS: dict[Api, Callable[[MockCall, MockReply], list[bytes]]] = {
    "chat": _chat_stream,
    "responses": _responses_stream,
    "messages": _anthropic_stream,
}
_OBJECTS: dict[Api, Callable[[MockCall, MockReply], JsonObject]] = {
    "chat": _chat_json,
    "responses": _responses_object,
    "messages": lambda call, reply: _anthropic_message(call, reply, final=True),
}


def render_stream(call: MockCall, reply: MockReply) -> list[bytes]:
    """The SSE events (each a complete ``...\\n\\n`` block) of *reply* for *call*'s API."""
    return _STREAMS[call.api](call, reply)


def render_json(call: MockCall, reply: MockReply) -> bytes:
    """The non-streaming JSON body of *reply* for *call*'s API."""
    return _dumps(_OBJECTS[call.api](call, reply)).encode()


_ERRORS: dict[int, tuple[str, str, str]] = {
    400: ("invalid_request_error", "invalid_request_error", "The request body is not valid JSON."),
    404: ("not_found_error", "not_found", "Not found."),
    405: ("invalid_request_error", "invalid_request_error", "Method not allowed; use POST."),
    429: ("rate_limit_error", "rate_limit_exceeded", "Rate limit reached; try again later."),
    500: ("api_error", "server_error", "The server had an error processing the request."),
    529: ("overloaded_error", "overloaded", "Overloaded"),
}


def error_body(api: Api, status: int, message: str | None = None) -> bytes:
    """A provider-shaped JSON error body for *status* (with *message*, if given)."""
    anthropic_type, openai_code, default = _ERRORS.get(
        status, ("api_error", "server_error", "error")
    )
    message = message or default
    if api == "messages":
        payload: JsonObject = {
            "type": "error",
            "error": {"type": anthropic_type, "message": message},
            "request_id": "req_mock",
        }
    else:
        payload = {
            "error": {"message": message, "type": openai_code, "param": None, "code": openai_code}
        }
    return _dumps(payload).encode()


def stream_error_event(api: Api, sent: int) -> bytes:
    """An in-stream error event (the provider failed after sending 200).

    *sent* is how many events of the stream went out before it: a Responses
    error event carries the next sequence number, as every event there does.
    """
    if api == "messages":
        error = {"type": "overloaded_error", "message": "Overloaded", "details": None}
        return _event({"type": "error", "error": error}, "error")
    if api == "responses":
        payload: JsonObject = {
            "type": "error",
            "code": "server_error",
            "message": "The server had an error",
            "param": None,
        }
        return _numbered([payload], sent)[0]
    return _event(
        {
            "error": {
                "message": "The server had an error",
                "type": "server_error",
                "code": "server_error",
            }
        }
    )


def _first_text_delta(call: MockCall) -> int:
    """Where the first text delta sits in a one-chunk text stream of *call*'s API."""
    return {"chat": 1, "responses": 4, "messages": 2}[call.api]


def endless_prologue(call: MockCall) -> list[bytes]:
    """The events that open a stream that never ends (message and block starts)."""
    events = render_stream(call, MockReply(text="tick", chunks=1))
    return events[: _first_text_delta(call)]


def endless_event(call: MockCall, number: int) -> bytes:
    """One text delta of a stream that never ends."""
    reply = MockReply(text=f"tick {number} ", chunks=1)
    position = _first_text_delta(call)
    if call.api == "responses":
        payload = _responses_payloads(call, reply)[position]
        return _numbered([payload], position + number)[0]
    return render_stream(call, reply)[position]
