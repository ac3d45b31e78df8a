"""Render mock replies as OpenAI Responses: a response object or numbered stream events."""

from __future__ import annotations

from collections.abc import Callable

from ._render_shared import JsonObject, call_id, reply_tag, split_text, sse_event, usage_counts
from ._values import MockCall, MockReply

__all__ = [
    "message_item_id",
    "numbered",
    "responses_object",
    "responses_stream",
    "text_delta_payload",
]

# The event sequence follows the recorded real streams: created, in_progress,
# then per output item added / part added / deltas / done events, each carrying
# item_id and a sequence_number; the official SDK's stream helper needs them.


def _responses_output(call: MockCall, reply: MockReply) -> list[JsonObject]:
    tag = reply_tag(call)
    output: list[JsonObject] = []
    if reply.reasoning:
        summary = [{"type": "summary_text", "text": reply.reasoning}]
        output.append({"id": f"rs_mock{tag}", "type": "reasoning", "summary": summary})
    if reply.text:
        output.append(
            {
                "id": message_item_id(call),
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
                "call_id": call_id(call, index, tool.id, "call"),
                "name": tool.name,
            }
        )
    if reply.finish_name == "length" and output and "status" in output[-1]:
        # The budget ran out inside the last item: the API marks that item unfinished too.
        output[-1] = {**output[-1], "status": "incomplete"}
    return output


def message_item_id(call: MockCall) -> str:
    """The id of the message item of *call*'s reply."""
    return f"msg_mock{reply_tag(call)}"


def text_delta_payload(item_id: object, position: int, piece: str) -> JsonObject:
    """The event carrying *piece* of the text of output item *position*, not yet numbered."""
    return {
        "type": "response.output_text.delta",
        "item_id": item_id,
        "output_index": position,
        "content_index": 0,
        "delta": piece,
        "logprobs": [],
    }


def _output_text(text: str) -> JsonObject:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def responses_object(call: MockCall, reply: MockReply) -> JsonObject:
    prompt, completion = usage_counts(call, reply)
    reasoning = min(completion, max(1, len(reply.reasoning) // 4)) if reply.reasoning else 0
    incomplete = reply.finish_name == "length"
    return {
        "id": f"resp_mock{reply_tag(call)}",
        "object": "response",
        "created_at": 0,
        "status": "incomplete" if incomplete else "completed",
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "model": call.model,
        "output": _responses_output(call, reply),
        **_tool_settings(call),
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt + completion,
        },
    }


def _tool_settings(call: MockCall) -> JsonObject:
    """The request's tool settings, echoed as the API does: defaulted when not given."""
    body = call.body
    tools = body.get("tools")
    choice = body.get("tool_choice")
    parallel = body.get("parallel_tool_calls")
    return {
        "parallel_tool_calls": parallel if parallel is not None else True,
        "tool_choice": choice if choice is not None else "auto",
        "tools": tools if isinstance(tools, list) else [],
    }


def responses_stream(call: MockCall, reply: MockReply) -> list[bytes]:
    return numbered(_responses_payloads(call, reply))


def _responses_payloads(call: MockCall, reply: MockReply) -> list[JsonObject]:
    """The stream's events, not yet numbered."""
    final = responses_object(call, reply)
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


def numbered(payloads: list[JsonObject], first: int = 0) -> list[bytes]:
    """Encode Responses events with consecutive sequence numbers from *first*."""
    return [
        sse_event({"type": p["type"], "sequence_number": first + n, **p}, str(p["type"]))
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
            *(text_delta_payload(item["id"], position, d) for d in deltas),
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
