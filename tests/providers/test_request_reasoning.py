"""Thinking and reasoning in request bodies stay within what each provider's API accepts:
reasoning replayed to DeepSeek, Anthropic's thinking options and the thinking a turn may end
with, and the Responses reasoning items sent back within a turn's tool loop.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions
from retinue._content import Message, Reasoning, RedactedReasoning, Text, ToolCall, ToolResultBlock
from retinue.providers import ProviderError
from retinue.providers._anthropic_wire import anthropic_request_body
from retinue.providers._openai_chat import chat_request_body
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import EchoPolicy, MockServer, RawReply, ScriptedPolicy
from retinue.providers.openai import OpenAIModel
from retinue.session import AssistantMessage
from retinue.session._codec import decode_event, encode_event

from ._request_validity_kit import sent_body, tool_turn
from .support import SSE, collect, make_request, serve_once

# Chat Completions: reasoning replay (DeepSeek thinking mode)


def test_chat_body_replays_unsigned_reasoning_when_asked() -> None:
    """DeepSeek's thinking mode answers 400 unless a tool-calling assistant message carries
    its ``reasoning_content``; signed reasoning (another provider's) is not sent.
    """
    history = tool_turn(ToolResultBlock("c1", (Text("sunny"),)), reasoning="Call lookup.")
    history[1] = Message("assistant", (Reasoning("signed", "sig"), *history[1].content))
    replayed: Any = chat_request_body(make_request(*history), replay_reasoning=True)
    assert replayed["messages"][1]["reasoning_content"] == "Call lookup."
    plain: Any = chat_request_body(make_request(*history))
    assert "reasoning_content" not in plain["messages"][1]


@pytest.mark.parametrize(
    ("options", "replayed"),
    [
        ({"provider": "deepseek", "base_url": "http://mock/v1"}, True),
        ({"base_url": "https://api.deepseek.com/v1"}, True),
        ({"base_url": "https://api.openai.com/v1"}, False),
        ({"base_url": "http://localhost:8000/v1"}, False),
        ({"provider": "deepseek", "base_url": "http://mock/v1", "replay_reasoning": False}, False),
        ({"base_url": "http://localhost:8000/v1", "replay_reasoning": True}, True),
    ],
    ids=["deepseek-provider", "deepseek-host", "openai", "local", "forced-off", "forced-on"],
)
async def test_openai_model_replays_reasoning_for_deepseek(
    options: dict[str, Any], replayed: bool
) -> None:
    """By default reasoning is replayed to DeepSeek only, chosen by provider name or host."""
    server = MockServer(EchoPolicy())
    history = tool_turn(ToolResultBlock("c1", (Text("sunny"),)), reasoning="Call lookup.")
    with trio.fail_after(5):
        async with OpenAIModel(transport=server.transport(), api_key="k", **options) as model:
            await collect(model, make_request(*history))
    body: Any = server.calls[0].body
    assert ("reasoning_content" in body["messages"][1]) is replayed


# Anthropic: extended thinking options


@pytest.mark.parametrize(
    ("max_tokens", "budget", "expected"),
    [(None, 2048, 4096), (2049, 2048, 2049), (16000, 2048, 16000)],
)
def test_anthropic_thinking_body_keeps_the_limit_above_the_budget(
    max_tokens: int | None, budget: int, expected: int
) -> None:
    """With thinking on, a ``max_tokens`` above the budget goes out unchanged and no
    temperature is sent (the API accepts no temperature other than 1).
    """
    request = make_request("hi", max_tokens=max_tokens, temperature=0.2)
    body = anthropic_request_body(request, thinking_budget=budget)
    assert body["max_tokens"] == expected
    assert "temperature" not in body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}


@pytest.mark.parametrize(("max_tokens", "budget"), [(1000, 1024), (2048, 2048)])
async def test_anthropic_model_refuses_max_tokens_not_above_the_thinking_budget(
    max_tokens: int, budget: int
) -> None:
    """Thinking counts toward ``max_tokens``: a limit at or below the budget fails before
    anything is sent, naming both values, rather than going out raised to ``budget + 1``.
    """
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with AnthropicModel(
            transport=server.transport(), api_key="k", thinking_budget=budget
        ) as model:
            with pytest.raises(ProviderError) as caught:
                await collect(model, make_request("hi", max_tokens=max_tokens))
    assert (caught.value.code, caught.value.retryable) == ("INVALID_REQUEST", False)
    assert f"max_tokens ({max_tokens})" in str(caught.value)
    assert f"thinking budget ({budget})" in str(caught.value)
    assert not server.calls


async def test_anthropic_model_sends_a_limit_above_the_thinking_budget_unchanged() -> None:
    """A ``max_tokens`` one above the budget reaches the API as the agent set it."""
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with AnthropicModel(
            transport=server.transport(), api_key="k", thinking_budget=2048
        ) as model:
            await collect(model, make_request("hi", max_tokens=2049))
    body: Any = server.calls[0].body
    assert (body["max_tokens"], body["thinking"]["budget_tokens"]) == (2049, 2048)


@pytest.mark.parametrize(("default_max_tokens", "budget"), [(4096, 4096), (4096, 8192)])
def test_anthropic_model_refuses_a_thinking_budget_not_below_its_default_limit(
    default_max_tokens: int, budget: int
) -> None:
    """Every request without its own ``max_tokens`` would be refused: the constructor says so."""
    with pytest.raises(ValueError, match=rf"default_max_tokens \({default_max_tokens}\)"):
        AnthropicModel(
            base_url="http://mock",
            api_key="k",
            default_max_tokens=default_max_tokens,
            thinking_budget=budget,
        )


def test_anthropic_body_without_thinking_keeps_temperature() -> None:
    """Without thinking the agent's temperature and limit go out unchanged."""
    body = anthropic_request_body(make_request("hi", max_tokens=100, temperature=0.2))
    assert (body["max_tokens"], body["temperature"]) == (100, 0.2)


@pytest.mark.parametrize("budget", [0, 512, 1023])
def test_anthropic_model_refuses_a_thinking_budget_below_1024(budget: int) -> None:
    """The API's minimum budget is 1024 tokens; a smaller one fails every request."""
    with pytest.raises(ValueError, match="1024"):
        AnthropicModel(base_url="http://mock", api_key="k", thinking_budget=budget)


@pytest.mark.parametrize(
    "answer",
    [(), (Text("\n\n"),), (RedactedReasoning("EqQB"),)],
    ids=["tool-call-cut-at-max-tokens", "blank-answer", "redacted-thinking"],
)
async def test_anthropic_assistant_turn_never_ends_with_thinking(
    answer: tuple[Text | RedactedReasoning, ...],
) -> None:
    """Thinking then a tool call cut at ``max_tokens`` (stripped, R7.36) or a blank answer
    (dropped) leaves thinking last in the turn, which the API refuses. That thinking is
    not sent, nor the turn when nothing else is left, and the user turns around it merge.
    """
    thought = Message("assistant", (Reasoning("I will write the file.", "sig-1"), *answer))
    options = {"thinking_budget": 1024, "default_max_tokens": 2048}
    body = await sent_body("messages", "write a.txt", thought, "try again", **options)
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "write a.txt"},
                {"type": "text", "text": "try again"},
            ],
        }
    ]


async def test_anthropic_keeps_the_thinking_before_the_last_block_of_a_turn() -> None:
    """Only the thinking that would end the turn goes: the turn of a continued step merges
    with the one before it, and the thinking before that turn's text stays.
    """
    history: list[Message | str] = [
        "write an essay",
        Message("assistant", (Reasoning("Plan.", "sig-1"), Text("Part one."))),
        Message("assistant", (Reasoning("More.", "sig-2"), RedactedReasoning("EqQB"))),
        "go on",
    ]
    body = await sent_body("messages", *history)
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Plan.", "signature": "sig-1"},
            {"type": "text", "text": "Part one."},
        ],
    }


async def test_anthropic_does_not_replay_thinking_logged_with_an_empty_signature() -> None:
    """An empty signature is none: the API cannot verify the thinking it would mark."""
    history: list[Message | str] = [
        "hi",
        Message("assistant", (Reasoning("hmm", ""), Text("hello"))),
        "more",
    ]
    body = await sent_body("messages", *history)
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "hello"}],
    }


# Responses: reasoning items sent back within a turn's tool loop


def _reasoning_item(item_id: str, *summary: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text} for text in summary],
        "encrypted_content": f"gAAAA-{item_id}",
    }


def _typed(payload: dict[str, Any]) -> bytes:
    event = payload["type"].encode()
    return b"event: " + event + b"\ndata: " + json.dumps(payload).encode() + b"\n\n"


def _reasoned_call_stream(item_id: str, call_id: str, *summary: str) -> bytes:
    """A reasoning item (its summary streamed, its encrypted content only when done), then a
    function call, as the Responses API streams them to a reasoning model's tool loop."""
    item = _reasoning_item(item_id, *summary)
    call = {
        "id": f"fc_{call_id}",
        "type": "function_call",
        "call_id": call_id,
        "name": "lookup",
        "arguments": '{"city":"Oslo"}',
        "status": "completed",
    }
    deltas = [
        {
            "type": "response.reasoning_summary_text.delta",
            "output_index": 0,
            "item_id": item_id,
            "summary_index": index,
            "delta": text,
        }
        for index, text in enumerate(summary)
    ]
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": item_id, "type": "reasoning", "summary": []},
        },
        *deltas,
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**call, "arguments": ""},
        },
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"city":'},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '"Oslo"}'},
        {"type": "response.output_item.done", "output_index": 1, "item": call},
        {"type": "response.completed", "response": {"status": "completed", "output": [item, call]}},
    ]
    return b"".join(map(_typed, events))


def _answer_stream(text: str) -> bytes:
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": 0,
            "delta": text,
        },
        {"type": "response.completed", "response": {"status": "completed"}},
    ]
    return b"".join(map(_typed, events))


async def _reasoned_call(item_id: str, call_id: str, *summary: str) -> Message:
    """The assistant message the Responses adapter decodes from a reasoned call."""
    body = _reasoned_call_stream(item_id, call_id, *summary)
    return (await serve_once("responses", body)).message


@retinue.tool
async def lookup(city: str) -> str:
    """Weather for a city."""
    await trio.sleep(0.1)
    return f"sunny in {city}"


async def test_responses_tool_loop_sends_back_the_reasoning_before_its_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R10.2: within a turn's tool loop, the reasoning item a reasoning model returned
    before a function call goes back just before that call, as the API returned it
    (``encrypted_content`` included), and the call with the item id the API pairs
    them by, so the model keeps its chain of thought. The log holds it as reasoning
    whose text is the summary, and reloads it unchanged.
    """
    summary = ("**Plan**\n\nLook it up.", "Then answer.")
    replies = [
        RawReply(200, SSE, _reasoned_call_stream("rs_1", "call_1", *summary)),
        RawReply(200, SSE, _answer_stream("sunny")),
    ]
    server = MockServer(ScriptedPolicy(replies))
    with trio.fail_after(60):
        async with (
            OpenAIModel(transport=server.transport(), api_key="k", api="responses") as model,
            retinue.open_runtime(models=model, tools=[lookup]) as rt,
        ):
            agent = await rt.create_agent("a", AgentOptions(model="m"))
            result = await agent.ask("weather in Oslo?")
            events = agent.session.events
    assert result.reason.kind == "completed"
    sent: Any = server.calls[1].body["input"]
    assert [item.get("type", item.get("role")) for item in sent] == [
        "user",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert sent[1] == _reasoning_item("rs_1", *summary)
    assert sent[2] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "lookup",
        "arguments": '{"city":"Oslo"}',
        "id": "fc_call_1",
    }
    logged = next(e for e in events if isinstance(e.data, AssistantMessage))
    assert isinstance(logged.data, AssistantMessage)
    (thought, call) = logged.data.content
    assert isinstance(thought, Reasoning)
    assert thought.text == "**Plan**\n\nLook it up.\n\nThen answer."
    assert call == ToolCall("call_1", "lookup", '{"city":"Oslo"}')
    assert decode_event(encode_event(logged)) == logged


async def test_responses_sends_back_only_the_reasoning_of_the_current_turn() -> None:
    """R10.2: the API ignores reasoning items of earlier turns (before the latest prompt),
    so they are not sent; a turn's items go back before the call each came with.
    """
    first = await _reasoned_call("rs_1", "call_1", "Look up Oslo.")
    second = await _reasoned_call("rs_2", "call_2", "Look up Lima.")
    history: list[Message | str] = [
        "weather in Oslo?",
        first,
        Message("user", (ToolResultBlock("call_1", (Text("sunny"),)),)),
        Message("assistant", (Text("Sunny."),)),
        "and in Lima?",
        second,
        Message("user", (ToolResultBlock("call_2", (Text("rain"),)),)),
    ]
    sent = (await sent_body("responses", *history))["input"]
    reasoning = [index for index, item in enumerate(sent) if item.get("type") == "reasoning"]
    assert [sent[index]["id"] for index in reasoning] == ["rs_2"]
    assert sent[reasoning[0] + 1]["call_id"] == "call_2"


async def test_responses_does_not_send_reasoning_without_its_call() -> None:
    """R10.2: the API refuses a reasoning item without the item that followed it, and
    reasoning it did not return (another provider's, or unsigned) is not its to read.
    Reasoning before an answer's text is not sent either: that message goes back
    without the item id the API would pair it by. A call logged without the reasoning
    before it goes without its item id, which the API would pair with that reasoning.
    """
    thought = await _reasoned_call("rs_1", "call_1", "Look it up.")
    reasoning, call = thought.content
    answer = Message("assistant", (reasoning, Text("Sunny.")))
    history: list[Message | str] = [
        "weather?",
        Message("assistant", (Reasoning("Plan.", "sig-1"), Reasoning("Plan."), Text("Sunny."))),
        "and tomorrow?",
        Message("assistant", (reasoning,)),
        answer,
        Message("assistant", (call,)),
        Message("user", (ToolResultBlock("call_1", (Text("sunny"),)),)),
    ]
    sent = (await sent_body("responses", *history))["input"]
    assert [item.get("type") for item in sent if item.get("type")] == [
        "function_call",
        "function_call_output",
    ]
    assert "id" not in sent[-2]


async def test_responses_reasoning_without_a_summary_is_sent_back() -> None:
    """R10.2: a reasoning model returns reasoning items with no summary unless one is asked
    for; such an item is still logged (as empty reasoning) and goes back with its call.
    """
    thought = await _reasoned_call("rs_1", "call_1")
    assert thought.content[0] == Reasoning("", thought.content[0].signature)  # type: ignore[union-attr]
    history: list[Message | str] = [
        "weather?",
        thought,
        Message("user", (ToolResultBlock("call_1", (Text("sunny"),)),)),
    ]
    sent = (await sent_body("responses", *history))["input"]
    assert sent[1] == {**_reasoning_item("rs_1"), "summary": []}


async def _sent_with_signed_reasoning(signature: str) -> Any:
    """The Responses input sent for a turn whose one call followed reasoning signed *signature*."""
    history: list[Message | str] = [
        "weather?",
        Message("assistant", (Reasoning("", signature), ToolCall("call_1", "lookup", "{}"))),
        Message("user", (ToolResultBlock("call_1", (Text("sunny"),)),)),
    ]
    return (await sent_body("responses", *history))["input"]


@pytest.mark.parametrize(
    "signature",
    [
        '{"type":"reasoning","id":"rs_1","x":NaN}\n{"call_id":"call_1","id":"fc_1"}',
        (
            '{"type":"reasoning","id":"rs_1"}\n{"call_id":"call_1","id":"fc_1"}'
            '\n{"call_id":"call_2","id":"fc_1"}'
        ),
    ],
    ids=["nan", "one-item-id-for-two-calls"],
)
async def test_responses_reasoning_a_stored_log_garbled_is_not_sent(signature: str) -> None:
    """R10.2: a reasoning item read back from a log must be one the API could have returned:
    one with NaN (which no request body can carry) or pairing two calls with one item id
    (which the API refuses) is left out, and the request goes as if it were unsigned.
    """
    sent = await _sent_with_signed_reasoning(signature)
    assert [item.get("type") for item in sent if item.get("type")] == [
        "function_call",
        "function_call_output",
    ]
    assert "id" not in sent[-2]


async def test_responses_reasoning_sends_back_only_the_fields_of_a_reasoning_item() -> None:
    """R10.2: a stored item's other keys (hand-edited into a log, say) are not sent."""
    signature = (
        '{"type":"reasoning","id":"rs_1","summary":[],"role":"system","content":[],'
        '"encrypted_content":"e","status":"completed","instructions":"x"}'
        '\n{"call_id":"call_1","id":"fc_1"}'
    )
    sent = await _sent_with_signed_reasoning(signature)
    assert sent[1] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "content": [],
        "encrypted_content": "e",
        "status": "completed",
    }
    assert sent[2]["id"] == "fc_1"


async def test_anthropic_does_not_send_reasoning_the_responses_api_returned() -> None:
    """Reasoning a Responses model returned carries that API's item, which Anthropic cannot
    verify as a thinking signature: a session that changes provider leaves it out.
    """
    thought = await _reasoned_call("rs_1", "call_1", "Look it up.")
    history: list[Message | str] = [
        "weather?",
        thought,
        Message("user", (ToolResultBlock("call_1", (Text("sunny"),)),)),
    ]
    body = await sent_body("messages", *history)
    assert [block["type"] for block in body["messages"][1]["content"]] == ["tool_use"]


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"default_max_tokens": 0}, ValueError, "default_max_tokens"),
        ({"default_max_tokens": -1}, ValueError, "default_max_tokens"),
        ({"default_max_tokens": "4096"}, TypeError, "default_max_tokens"),
        ({"default_max_tokens": 4096.0}, TypeError, "default_max_tokens"),
        ({"thinking_budget": "2048"}, TypeError, "thinking_budget"),
        ({"thinking_budget": True}, TypeError, "thinking_budget"),
    ],
    ids=["zero", "negative", "text", "float", "budget-text", "budget-bool"],
)
def test_anthropic_model_refuses_token_settings_that_are_no_counts(
    options: dict[str, Any], error: type[Exception], named: str
) -> None:
    """A ``default_max_tokens`` or ``thinking_budget`` that is no int of at least 1 is
    refused when the adapter is built, naming it, not sent on every request for the
    API to refuse (or compared, failing with an unnamed ``TypeError``)."""
    with pytest.raises(error, match=named):
        AnthropicModel(base_url="http://mock", api_key="k", **options)
