"""Tool-call ids that compatible servers send empty or repeated: every call keeps an id of its own.

Some servers (DeepSeek, GLM and Kimi endpoints among them) give parallel calls of
one message the same id, and some (Gemini's and LM Studio's OpenAI endpoints) an
empty one. Results are matched to calls by id, so the adapter keeps the first
call's id and gives a repeat a fresh one; the step then runs every call.
Each body is served verbatim by the in-process mock server (a ``RawReply``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions
from retinue._content import ToolCall
from retinue.providers.mock import MockServer, RawReply, ScriptedPolicy
from retinue.providers.openai import OpenAIModel
from retinue.session import ToolResultEvent

from .support import JSON, SSE, Collected, serve_once, sse_body

FRESH = re.compile(r"call_[0-9a-f]{24}")
CHAT_FINISH = b'{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}'


def _typed(payload: dict[str, Any]) -> bytes:
    return (
        b"event: " + payload["type"].encode() + b"\ndata: " + json.dumps(payload).encode() + b"\n\n"
    )


def _chat_fragment(index: int, call_id: str | None, arguments: str) -> bytes:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        call.update(id=call_id, type="function")
        call["function"]["name"] = "lookup"
    delta = {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}
    return json.dumps(delta).encode()


def _chat_shared_id_stream() -> bytes:
    return sse_body(
        _chat_fragment(0, "call_1", '{"city":'),
        _chat_fragment(0, "call_1", '"Oslo"}'),  # DeepSeek repeats the id in every fragment
        _chat_fragment(1, "call_1", '{"city":'),
        _chat_fragment(1, "call_1", '"Lima"}'),
        CHAT_FINISH,
        b"[DONE]",
    )


def _chat_whole_body(call_id: str) -> bytes:
    calls = [
        {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": args}}
        for args in ('{"city":"Oslo"}', '{"city":"Lima"}')
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    return json.dumps(body).encode()


def _anthropic_shared_id_stream() -> bytes:
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {"usage": {}}}]
    for index, city in enumerate(("Oslo", "Lima")):
        block = {"type": "tool_use", "id": "grep:3", "name": "lookup", "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps({"city": city})}
        events += [
            {"type": "content_block_start", "index": index, "content_block": block},
            {"type": "content_block_delta", "index": index, "delta": delta},
            {"type": "content_block_stop", "index": index},
        ]
    events += [
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return b"".join(map(_typed, events))


def _responses_shared_id_stream() -> bytes:
    events: list[dict[str, Any]] = []
    for output, city in enumerate(("Oslo", "Lima")):
        item = {
            "type": "function_call",
            "id": f"fc_{output}",
            "call_id": "call_1",
            "name": "lookup",
        }
        arguments = json.dumps({"city": city})
        events += [
            {"type": "response.output_item.added", "output_index": output, "item": item},
            {
                "type": "response.function_call_arguments.delta",
                "output_index": output,
                "delta": arguments,
            },
            {
                "type": "response.output_item.done",
                "output_index": output,
                "item": {**item, "arguments": arguments},
            },
        ]
    events.append({"type": "response.completed", "response": {"status": "completed"}})
    return b"".join(map(_typed, events))


def _calls(collected: Collected) -> list[ToolCall]:
    calls = [block for block in collected.message.content if isinstance(block, ToolCall)]
    assert [json.loads(call.arguments)["city"] for call in calls] == ["Oslo", "Lima"]
    return calls


@pytest.mark.parametrize(
    ("api", "body", "headers", "given"),
    [
        ("chat", _chat_shared_id_stream(), SSE, "call_1"),
        ("chat", _chat_whole_body("call_1"), JSON, "call_1"),
        ("messages", _anthropic_shared_id_stream(), SSE, "grep:3"),
        ("responses", _responses_shared_id_stream(), SSE, "call_1"),
    ],
    ids=["chat-stream", "chat-whole-body", "anthropic", "responses"],
)
async def test_parallel_calls_sharing_an_id_each_get_their_own(
    api: str, body: bytes, headers: Any, given: str
) -> None:
    """R10.2: two calls of one message with the same id stay two calls; the first keeps the
    id, the second gets a fresh one, in its streamed chunks as in the message.
    """
    collected = await serve_once(api, body, headers)
    first, second = _calls(collected)
    assert first.id == given
    assert FRESH.fullmatch(second.id)
    # A whole body streams no deltas: its calls come only in the block ends.
    streamed = {getattr(chunk, "id", None) for chunk in collected.chunks} - {None}
    assert streamed == (set() if headers is JSON else {first.id, second.id})


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (
            sse_body(
                _chat_fragment(0, "", '{"city":"Oslo"}'),
                _chat_fragment(1, "", '{"city":"Lima"}'),
                CHAT_FINISH,
                b"[DONE]",
            ),
            SSE,
        ),
        (_chat_whole_body(""), JSON),
    ],
    ids=["stream", "whole-body"],
)
async def test_chat_calls_with_empty_ids_each_get_a_fresh_one(body: bytes, headers: Any) -> None:
    """R10.2: an empty id on every call (Gemini's and LM Studio's OpenAI endpoints) is no id:
    each call gets a fresh one of its own.
    """
    first, second = _calls(await serve_once("chat", body, headers))
    assert FRESH.fullmatch(first.id)
    assert FRESH.fullmatch(second.id)
    assert first.id != second.id


@retinue.tool(parallel_safe=True)
async def lookup(city: str) -> str:
    """Weather for a city."""
    await trio.sleep(0.1)
    return f"sunny in {city}"


async def test_a_step_whose_calls_share_an_id_runs_every_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.5, R10.2: a provider's parallel calls sharing one id do not fail the step with
    DUPLICATE_TOOL_CALL_ID: both run and each result answers its own call.
    """
    answer = sse_body(
        b'{"choices":[{"index":0,"delta":{"content":"done"},"finish_reason":"stop"}]}',
        b"[DONE]",
    )
    server = MockServer(
        ScriptedPolicy([RawReply(200, SSE, _chat_shared_id_stream()), RawReply(200, SSE, answer)])
    )
    with trio.fail_after(60):
        async with (
            OpenAIModel(transport=server.transport(), base_url="http://mock/v1") as model,
            retinue.open_runtime(models=model, tools=[lookup]) as rt,
        ):
            agent = await rt.create_agent("a", AgentOptions(model="m"))
            result = await agent.ask("weather in Oslo and Lima?")
            events = agent.session.events
    assert result.reason.kind == "completed"
    results = [e.data for e in events if isinstance(e.data, ToolResultEvent)]
    texts = ["".join(getattr(b, "text", "") for b in r.content) for r in results]
    assert texts == ["sunny in Oslo", "sunny in Lima"]
    assert results[0].call_id == "call_1"
    assert FRESH.fullmatch(results[1].call_id)
