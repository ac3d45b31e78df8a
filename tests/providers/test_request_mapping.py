"""Request mapping: SPEC requests to each provider's body (pure functions, golden values)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from retinue._content import (
    Message,
    OpaqueBlock,
    Reasoning,
    RedactedReasoning,
    Text,
    ToolCall,
    ToolResultBlock,
)
from retinue._lossless import freeze_json
from retinue._request import ToolSchema
from retinue.providers._anthropic_wire import anthropic_request_body
from retinue.providers._openai_chat import chat_request_body
from retinue.providers._openai_responses import responses_request_body

from .support import WEATHER, load, make_request

SECRET_TOOL = ToolSchema(
    "secret_retrieval_tool",
    "A tool that requires a password to retrieve a secret.",
    {
        "properties": {"password": {"title": "Password", "type": "string"}},
        "required": ["password"],
        "additionalProperties": False,
        "type": "object",
    },
)
PROMPT = "Please retrieve the secrets associated with each of these passwords: mellon,radiance"


def _secrets_history(ids: tuple[str, str], *, intro: str = "") -> list[Message]:
    calls = tuple(
        ToolCall(call_id, "secret_retrieval_tool", arguments)
        for call_id, arguments in zip(
            ids, ('{"password": "mellon"}', '{"password": "radiance"}'), strict=True
        )
    )
    assistant = Message("assistant", ((Text(intro),) if intro else ()) + calls)
    return [
        Message("user", (Text(PROMPT),)),
        assistant,
        Message("user", (ToolResultBlock(ids[0], (Text("Welcome to Moria!"),)),)),
        Message("user", (ToolResultBlock(ids[1], (Text("Life before Death"),)),)),
    ]


def _context_envelope(text: str) -> Message:
    return Message("user", (Text('<context source="plugin">'), Text(text), Text("</context>")))


def test_chat_body_reproduces_recorded_tool_result_request() -> None:
    """The chat body for a tool-result turn equals the recorded request's messages and tools."""
    recorded = load("chat_stream_after_tool_results.json")["request"]["body"]
    ids = ("call_M26z19sncd7b4LBgzKRRbaUE", "call_KPXe5NX7IcKkaBUhc6dto2QV")
    request = make_request(
        *_secrets_history(ids),
        model="gpt-4o",
        system="Use parallel tool calling.",
        tools=[SECRET_TOOL],
    )
    body = chat_request_body(request)
    assert body["messages"] == recorded["messages"]
    for tool in recorded["tools"]:
        del tool["function"]["strict"]
    assert body["tools"] == recorded["tools"]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_chat_body_reproduces_recorded_max_tokens_request() -> None:
    """With ``max_tokens_param="max_tokens"`` the body equals the recorded request exactly."""
    recorded = load("chat_stream_finish_length.json")["request"]["body"]
    request = make_request("List all U.S. states.", model="gpt-4o", max_tokens=50)
    assert chat_request_body(request, max_tokens_param="max_tokens") == recorded


def test_chat_body_maps_options_and_tool_results_before_user_text() -> None:
    """Options map to fields; a user message's tool results precede its text; reasoning is
    dropped; the ``<context>`` envelope (R5.2, R5.7) is one string, a line per block.
    """
    history = [
        Message("user", (Text("weather?"),)),
        Message(
            "assistant",
            (Reasoning("thinking", "sig"), ToolCall("c1", "lookup", '{"city":"Oslo"}')),
        ),
        Message("user", (ToolResultBlock("c1", (Text("sunny"),), is_error=True), Text("thanks"))),
        _context_envelope("the user is in Norway"),
    ]
    request = make_request(
        *history,
        model="m",
        system="sys",
        tools=[WEATHER],
        max_tokens=100,
        temperature=0.2,
        stop=["END"],
    )
    assert chat_request_body(request) == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": '{"city":"Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            {"role": "user", "content": "thanks"},
            {
                "role": "user",
                "content": '<context source="plugin">\nthe user is in Norway\n</context>',
            },
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": "Weather for a city.",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
        ],
        "max_completion_tokens": 100,
        "temperature": 0.2,
        "stop": ["END"],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_responses_body_reproduces_recorded_function_output_request() -> None:
    """The Responses input for a tool-result turn matches the recorded items (ids aside)."""
    recorded = load("responses_stream_text_after_function_outputs.json")["request"]["body"]
    ids = ("call_sKC7OABqf2A2PTLCm0CLeRWV", "call_OdR3s3xop0vtgkDyWRMLafuH")
    history = _secrets_history(ids)
    history[1] = Message(
        "assistant",
        tuple(
            ToolCall(block.id, block.name, block.arguments.replace(" ", ""))
            for block in history[1].content
            if isinstance(block, ToolCall)
        ),
    )
    request = make_request(
        *history, model="gpt-4o", system="Use parallel tool calling.", tools=[SECRET_TOOL]
    )
    body = responses_request_body(request)
    expected_input = [
        {k: v for k, v in item.items() if k not in ("id", "status")}
        for item in recorded["input"]
        if item.get("role") != "developer"
    ]
    assert body["input"] == expected_input
    assert body["instructions"] == "Use parallel tool calling."
    assert body["tools"] == recorded["tools"]
    assert body["stream"] is True


def test_responses_body_maps_limits_and_drops_stop() -> None:
    """max_tokens becomes max_output_tokens, at least the API's minimum of 16; stop
    sequences have no Responses field.
    """
    request = make_request("hi", model="m", max_tokens=7, temperature=0.5, stop=["x"])
    assert responses_request_body(request) == {
        "model": "m",
        "input": [{"role": "user", "content": "hi"}],
        "max_output_tokens": 16,
        "temperature": 0.5,
        "stream": True,
    }


def _normalise_anthropic(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """String content becomes text blocks; cache_control is dropped."""
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = []
        for original in content:
            block = {k: v for k, v in original.items() if k != "cache_control"}
            if block["type"] == "tool_result" and isinstance(block["content"], str):
                block["content"] = [{"type": "text", "text": block["content"]}]
            blocks.append(block)
        out.append({"role": message["role"], "content": blocks})
    return out


def test_anthropic_body_reproduces_recorded_tool_result_request() -> None:
    """Consecutive tool results merge into one user turn, as in the recorded request."""
    recorded = load("messages_stream_after_tool_results.json")["request"]["body"]
    ids = ("toolu_015cUijgET79LXjgeYQerN2h", "toolu_01XZTimPexA7h3EVKesnKt5T")
    history = _secrets_history(
        ids, intro="I'll retrieve the secrets for both passwords you provided."
    )
    request = make_request(
        *history, model="claude-sonnet-4-0", max_tokens=16000, tools=[SECRET_TOOL]
    )
    body = anthropic_request_body(request)
    assert body["messages"] == _normalise_anthropic(recorded["messages"])
    assert body["tools"] == [
        {k: v for k, v in tool.items() if k != "cache_control"} for tool in recorded["tools"]
    ]
    assert body["max_tokens"] == 16000
    assert body["model"] == "claude-sonnet-4-0"


def test_anthropic_body_replays_thinking_and_orders_tool_results_first() -> None:
    """Signed thinking and redacted thinking replay; tool results lead their merged user turn;
    with thinking on, the temperature is not sent (the API accepts only 1).
    """
    history = [
        Message("user", (Text("weather?"),)),
        Message(
            "assistant",
            (
                Reasoning("let me look", "sig-1"),
                RedactedReasoning("opaque"),
                Reasoning("unsigned, from elsewhere"),
                Text(""),
                ToolCall("t1", "lookup", '{"city": "Oslo"}'),
            ),
        ),
        _context_envelope("note"),
        Message("user", (ToolResultBlock("t1", (Text("sunny"),), is_error=True),)),
    ]
    request = make_request(*history, model="c", system="sys", stop=["END"], temperature=0.0)
    assert anthropic_request_body(request, thinking_budget=1024) == {
        "model": "c",
        "max_tokens": 4096,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "let me look", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"city": "Oslo"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "sunny"}],
                        "is_error": True,
                    },
                    {"type": "text", "text": '<context source="plugin">'},
                    {"type": "text", "text": "note"},
                    {"type": "text", "text": "</context>"},
                ],
            },
        ],
        "system": "sys",
        "stop_sequences": ["END"],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "stream": True,
    }


def test_anthropic_body_sends_empty_object_for_unparseable_arguments() -> None:
    """Tool-call arguments that are not a JSON object replay as ``{}`` (the API needs an object)."""
    history = [
        Message("user", (Text("go"),)),
        Message("assistant", (ToolCall("t1", "noop", ""), ToolCall("t2", "noop", "[1"))),
    ]
    messages: Any = anthropic_request_body(make_request(*history))["messages"]
    inputs = [block["input"] for block in messages[1]["content"]]
    assert inputs == [{}, {}]


@pytest.mark.parametrize("size", [10, 5000])
def test_anthropic_body_replays_each_call_input_the_same_in_every_request(size: int) -> None:
    """Short arguments are parsed once and held, long ones per request: both replay alike."""
    arguments = json.dumps({"path": "x" * size, "n": 1})
    history = [
        Message("user", (Text("go"),)),
        Message("assistant", (ToolCall("t1", "write", arguments), ToolCall("t2", "noop", "[1"))),
    ]
    first: Any = anthropic_request_body(make_request(*history))["messages"]
    second: Any = anthropic_request_body(make_request(*history))["messages"]
    for messages in (first, second):
        inputs = [block["input"] for block in messages[1]["content"]]
        assert inputs == [{"path": "x" * size, "n": 1}, {}]


def test_anthropic_body_sends_a_history_system_message_once_in_system() -> None:
    """R10.2: a system message in the history goes to ``system`` only, not also as user text."""
    request = make_request("hi", Message("system", (Text("be brief"),)), "again", system="sys")
    body = anthropic_request_body(request)
    assert body["system"] == "sys\n\nbe brief"
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "again"}],
        }
    ]


def test_opaque_blocks_are_sent_with_their_type() -> None:
    """R1.2, R10.2: a block retinue does not model reaches the provider whole, type included."""
    chat_image = OpaqueBlock("image_url", freeze_json({"image_url": {"url": "http://x/y.png"}}))
    chat: Any = chat_request_body(make_request(Message("user", (Text("look"), chat_image))))
    assert chat["messages"][-1]["content"][-1] == {
        "type": "image_url",
        "image_url": {"url": "http://x/y.png"},
    }
    image = OpaqueBlock("image", freeze_json({"source": {"type": "url", "url": "http://x/y.png"}}))
    anthropic: Any = anthropic_request_body(make_request(Message("user", (Text("look"), image))))
    assert anthropic["messages"][-1]["content"][-1] == {
        "type": "image",
        "source": {"type": "url", "url": "http://x/y.png"},
    }


def test_responses_body_sends_an_opaque_user_block_with_its_type() -> None:
    """R1.2, R10.2: the Responses API gets a block retinue does not model as a typed part."""
    image = OpaqueBlock("input_image", freeze_json({"image_url": "http://x/y.png"}))
    body: Any = responses_request_body(make_request(Message("user", (Text("look"), image))))
    assert body["input"][-1] == {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": "http://x/y.png"},
        ],
    }
