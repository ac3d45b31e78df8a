"""Request bodies stay within what each provider's API accepts, whatever the history holds.

Each test builds a history the runtime can log (a context message injected
while a tool ran, a blank model answer, an image a tool returned, thinking
options) and checks the body against the provider's documented rules.
"""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions
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
from retinue.providers import ProviderError
from retinue.providers._anthropic_wire import anthropic_request_body
from retinue.providers._openai_chat import chat_request_body
from retinue.providers._openai_responses import responses_request_body
from retinue.providers._replay import EMPTY_TURN_TEXT
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import EchoPolicy, MockServer, RawReply, ScriptedPolicy
from retinue.providers.openai import OpenAIModel
from retinue.session import AssistantMessage
from retinue.session._codec import decode_event, encode_event

from .support import (
    ANTHROPIC_IMAGE,
    RESPONSES_IMAGE,
    SSE,
    WEATHER,
    collect,
    make_request,
    serve_once,
)


def _context(text: str) -> Message:
    return Message("user", (Text('<context source="plugin">'), Text(text), Text("</context>")))


APIS = ("messages", "chat", "responses")


def _adapter(api: str, server: MockServer, **options: Any) -> OpenAIModel | AnthropicModel:
    if api == "messages":
        return AnthropicModel(transport=server.transport(), api_key="k", **options)
    return OpenAIModel(
        transport=server.transport(),
        api_key="k",
        api=api,  # type: ignore[arg-type]
        **options,
    )


async def _sent_body(api: str, *history: Message | str, **options: Any) -> Any:
    """The body *api*'s adapter sends for *history*, as the mock server received it."""
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with _adapter(api, server, **options) as model:
            await collect(model, make_request(*history))
    return server.calls[0].body


def _tool_turn(*results: ToolResultBlock, reasoning: str | None = None) -> list[Message]:
    """A prompt, an assistant turn calling one tool per result, and one message per result."""
    calls = tuple(ToolCall(r.tool_call_id, "lookup", '{"city":"Oslo"}') for r in results)
    thought = () if reasoning is None else (Reasoning(reasoning),)
    return [
        Message("user", (Text("weather?"),)),
        Message("assistant", thought + calls),
        *(Message("user", (result,)) for result in results),
    ]


# Chat Completions: reasoning replay (DeepSeek thinking mode)


def test_chat_body_replays_unsigned_reasoning_when_asked() -> None:
    """DeepSeek's thinking mode answers 400 unless a tool-calling assistant message carries
    its ``reasoning_content``; signed reasoning (another provider's) is not sent.
    """
    history = _tool_turn(ToolResultBlock("c1", (Text("sunny"),)), reasoning="Call lookup.")
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
    history = _tool_turn(ToolResultBlock("c1", (Text("sunny"),)), reasoning="Call lookup.")
    with trio.fail_after(5):
        async with OpenAIModel(transport=server.transport(), api_key="k", **options) as model:
            await collect(model, make_request(*history))
    body: Any = server.calls[0].body
    assert ("reasoning_content" in body["messages"][1]) is replayed


# Context injected while a tool ran


def test_chat_tool_messages_follow_their_call_before_injected_context() -> None:
    """A context message logged before the tool result must not split the assistant's
    ``tool_calls`` from the ``tool`` messages: OpenAI rejects that order.
    """
    history = _tool_turn(ToolResultBlock("c1", (Text("sunny"),)))
    history.insert(2, _context("the user is in Norway"))
    messages: Any = chat_request_body(make_request(*history))["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[3]["content"] == '<context source="plugin">\nthe user is in Norway\n</context>'


def test_responses_function_outputs_follow_their_call_before_injected_context() -> None:
    """The Responses input puts every ``function_call_output`` before the injected context."""
    results = (ToolResultBlock("c1", (Text("sunny"),)), ToolResultBlock("c2", (Text("rain"),)))
    history = _tool_turn(*results)
    history.insert(3, _context("note"))
    items: Any = responses_request_body(make_request(*history))["input"]
    kinds = [item.get("type", item.get("role")) for item in items]
    assert kinds == [
        "user",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "user",
    ]
    assert [item.get("call_id") for item in items[3:5]] == ["c1", "c2"]


# Anthropic: whitespace-only text


def test_anthropic_body_drops_whitespace_only_text() -> None:
    """Anthropic refuses text blocks with no visible text; a blank turn is left out and its
    neighbours merge, so the turns still alternate.
    """
    history = [
        Message("user", (Text("hi"),)),
        Message("assistant", (Text("\n\n"), ToolCall("t1", "lookup", "{}"))),
        Message("user", (ToolResultBlock("t1", (Text(" \n"),)),)),
        Message("assistant", (Text("\n"),)),
        Message("user", (Text("are you there?"),)),
    ]
    messages: Any = anthropic_request_body(make_request(*history))["messages"]
    assert messages[1:] == [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": []},
                {"type": "text", "text": "are you there?"},
            ],
        },
    ]


def test_anthropic_body_keeps_a_placeholder_for_a_blank_user_turn() -> None:
    """A user turn with nothing left to send keeps a placeholder: dropping it would end the
    request on the assistant's turn (a prefill) or start the transcript with one.
    """
    history = [
        Message("user", (Text(" "),)),
        Message("assistant", (Text("Hello."),)),
        Message("user", (Text("\t"),)),
    ]
    messages: Any = anthropic_request_body(make_request(*history))["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    for turn in (messages[0], messages[2]):
        (block,) = turn["content"]
        assert block["type"] == "text"
        assert block["text"].strip()


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


# Tool results that are not text


def test_anthropic_tool_result_keeps_an_image() -> None:
    """An image a tool returned reaches Anthropic inside its ``tool_result``."""
    history = _tool_turn(ToolResultBlock("t1", (Text("screen:"), ANTHROPIC_IMAGE)))
    messages: Any = anthropic_request_body(make_request(*history))["messages"]
    assert messages[-1]["content"][0]["content"] == [
        {"type": "text", "text": "screen:"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iV"},
        },
    ]


@pytest.mark.parametrize("content", [(), (Text("\n"),)], ids=["empty", "blank"])
def test_anthropic_empty_error_result_gets_placeholder_text(content: tuple[Text, ...]) -> None:
    """Anthropic refuses an ``is_error`` result with no content; a short text fills it."""
    history = _tool_turn(ToolResultBlock("t1", content, is_error=True))
    messages: Any = anthropic_request_body(make_request(*history))["messages"]
    result = messages[-1]["content"][0]
    assert result["is_error"] is True
    (block,) = result["content"]
    assert block["type"] == "text"
    assert block["text"].strip()


def test_responses_function_output_keeps_an_image() -> None:
    """A non-text result uses the list form of ``function_call_output.output``."""
    history = _tool_turn(ToolResultBlock("c1", (Text("screen:"), RESPONSES_IMAGE)))
    items: Any = responses_request_body(make_request(*history))["input"]
    assert items[-1] == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [
            {"type": "input_text", "text": "screen:"},
            {"type": "input_image", "image_url": "data:image/png;base64,iV"},
        ],
    }


def test_responses_text_function_output_stays_a_string() -> None:
    """A text-only result keeps the plain string form."""
    history = _tool_turn(ToolResultBlock("c1", (Text("sunny"),)))
    items: Any = responses_request_body(make_request(*history))["input"]
    assert items[-1]["output"] == "sunny"


def test_chat_tool_message_says_when_the_result_is_not_text() -> None:
    """A ``tool`` message carries text only: an image-only result gets a placeholder, not ""."""
    image = OpaqueBlock("image_url", freeze_json({"image_url": {"url": "data:image/png;base64,"}}))
    history = _tool_turn(
        ToolResultBlock("c1", (image,)), ToolResultBlock("c2", (Text("ok"), image))
    )
    messages: Any = chat_request_body(make_request(*history))["messages"]
    assert messages[-2]["role"] == "tool"
    assert messages[-2]["content"].strip()
    assert messages[-1] == {"role": "tool", "tool_call_id": "c2", "content": "ok"}


# Responses: output-token floor


@pytest.mark.parametrize(("limit", "sent"), [(1, 16), (8, 16), (15, 16), (16, 16), (500, 500)])
def test_responses_max_output_tokens_is_at_least_16(limit: int, sent: int) -> None:
    """The Responses API refuses ``max_output_tokens`` below 16."""
    body = responses_request_body(make_request("yes or no?", max_tokens=limit))
    assert body["max_output_tokens"] == sent


# Ids and prompts another provider or an empty ask can leave in the history


def test_anthropic_body_maps_foreign_tool_ids_into_its_id_alphabet() -> None:
    """Anthropic refuses a ``tool_use`` id outside ``[a-zA-Z0-9_-]``; an id another
    provider minted (``functions.lookup:0``) is mapped the same way in the call and its
    result, so the pair stays matched.
    """
    history = _tool_turn(ToolResultBlock("functions.lookup:0", (Text("sunny"),)))
    body: Any = anthropic_request_body(make_request(*history))
    (tool_use,) = body["messages"][1]["content"]
    (result,) = body["messages"][2]["content"]
    assert tool_use["id"] == result["tool_use_id"] == "functions_lookup_0"


@pytest.mark.parametrize("content", [(), (Text(""),)], ids=["no-blocks", "empty-text"])
def test_chat_and_responses_bodies_never_send_no_message_for_an_empty_prompt(
    content: tuple[Text, ...],
) -> None:
    """``agent.ask([])`` logs a user message with nothing to send; Chat refuses an empty
    ``messages`` list and Responses an empty ``input``, so a placeholder stands in.
    """
    request = make_request(Message("user", content))
    chat: Any = chat_request_body(request)
    responses: Any = responses_request_body(request)
    assert chat["messages"] == [{"role": "user", "content": EMPTY_TURN_TEXT}]
    assert responses["input"] == [{"role": "user", "content": EMPTY_TURN_TEXT}]


# Through the adapters: what a session can log that the APIs refuse as it stands

FILE_NAME = b"caf\xe9".decode("utf-8", "surrogateescape")
"""A file name as ``os.fsdecode`` gives it for a byte that is not UTF-8: a lone surrogate."""


@pytest.mark.parametrize("api", APIS)
async def test_lone_surrogates_are_sent_as_replacement_characters(api: str) -> None:
    """A lone surrogate is lossless JSON, so the log keeps the one a tool returned, but it
    has no UTF-8 form and the SDK refused the whole body, failing every later request: each
    is sent as U+FFFD, and the history is left as logged.
    """
    history = _tool_turn(ToolResultBlock("c1", (Text(FILE_NAME),)))
    history.append(Message("user", (Text(f"why {FILE_NAME}?"),)))
    body = await _sent_body(api, *history)
    sent = json.dumps(body, ensure_ascii=False)
    assert sent.count("caf\ufffd") == 2
    assert FILE_NAME not in sent
    assert history[-1].content == (Text(f"why {FILE_NAME}?"),)


async def test_anthropic_tool_input_keys_lose_their_lone_surrogates_too() -> None:
    """Anthropic gets a call's arguments as a JSON object: its keys are text as well."""
    call = ToolCall("c1", "lookup", json.dumps({FILE_NAME: FILE_NAME}))
    history: list[Message | str] = [
        "hi",
        Message("assistant", (call,)),
        Message("user", (ToolResultBlock("c1", ()),)),
    ]
    body = await _sent_body("messages", *history)
    assert body["messages"][1]["content"][0]["input"] == {"caf\ufffd": "caf\ufffd"}


async def test_a_header_with_no_encoding_is_a_typed_client_error() -> None:
    """Only the body loses its lone surrogates: a header that cannot be encoded still fails,
    as a :class:`ProviderError` rather than a bare ``UnicodeEncodeError``. (The OpenAI
    adapter refuses such a header when built: its SDK sends no header beyond ASCII.)
    """
    with pytest.raises(ProviderError) as caught:
        await _sent_body("messages", "hi", default_headers={"x-note": FILE_NAME})
    assert (caught.value.code, caught.value.retryable) == ("CLIENT_ERROR", False)


@pytest.mark.parametrize(
    "history",
    [
        ["write an essay", Message("assistant", (Text("Part one ends here.\n"),))],
        [Message("assistant", (Text("Hello."),)), "hi"],
        [Message("system", (Text("Be brief."),))],
    ],
    ids=["ends-on-the-answer", "starts-on-an-answer", "no-turn"],
)
async def test_anthropic_transcript_starts_and_ends_on_the_user_side(
    history: list[Message | str],
) -> None:
    """A step continued without new input (a turn-continuation listener's ``Continue()``)
    ends the history on the model's answer: sent as is, that is a prefill, which thinking
    and recent models refuse. A placeholder user turn closes the transcript, as it opens
    one that would start on an answer, or stands for a history with no turn at all.
    """
    body = await _sent_body("messages", *history)
    turns = body["messages"]
    assert turns[0]["role"] == turns[-1]["role"] == "user"
    assert all(a["role"] != b["role"] for a, b in pairwise(turns))
    placeholder = [{"type": "text", "text": EMPTY_TURN_TEXT}]
    assert placeholder in (turns[0]["content"], turns[-1]["content"])


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
    body = await _sent_body("messages", "write a.txt", thought, "try again", **options)
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
    body = await _sent_body("messages", *history)
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
    body = await _sent_body("messages", *history)
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "hello"}],
    }


async def test_anthropic_tool_ids_that_map_alike_stay_distinct() -> None:
    """``a.b``, ``a:b`` and ``a_b`` all map onto ``a_b``, and the API refuses a request in
    which two ``tool_use`` blocks, in any turns, share an id. Later ids get a numbered suffix,
    the same in a call and in its result, and the same each time the history is sent.
    """
    history: list[Message | str] = [
        *_tool_turn(ToolResultBlock("a.b", (Text("one"),))),
        *_tool_turn(ToolResultBlock("a:b", (Text("two"),)), ToolResultBlock("a_b", (Text("3"),))),
    ]
    body = await _sent_body("messages", *history)
    turns = body["messages"]
    uses = [[block["id"] for block in turns[index]["content"]] for index in (1, 3)]
    results = [
        [block["tool_use_id"] for block in turns[index]["content"] if "tool_use_id" in block]
        for index in (2, 4)
    ]
    assert uses == results == [["a_b"], ["a_b_2", "a_b_3"]]
    assert await _sent_body("messages", *history) == body


async def test_anthropic_tool_ids_repeated_across_turns_stay_distinct() -> None:
    """A server that numbers each answer's calls from 0 gives calls of different turns one
    id, which the API refuses in one request: a later call gets a numbered suffix, and each
    result answers the call of the turn before it, the same each time the history is sent.
    """
    history: list[Message | str] = [
        *_tool_turn(ToolResultBlock("call_0", (Text("one"),))),
        *_tool_turn(ToolResultBlock("call_0", (Text("two"),))),
    ]
    body = await _sent_body("messages", *history)
    turns = body["messages"]
    uses = [[block["id"] for block in turns[index]["content"]] for index in (1, 3)]
    answers = [[b for b in turns[index]["content"] if "tool_use_id" in b] for index in (2, 4)]
    assert uses == [[b["tool_use_id"] for b in answer] for answer in answers]
    assert uses == [["call_0"], ["call_0_2"]]
    assert [answer[0]["content"][0]["text"] for answer in answers] == ["one", "two"]
    assert await _sent_body("messages", *history) == body


async def test_responses_call_ids_repeated_across_turns_stay_distinct() -> None:
    """The Responses API refuses a second ``function_call_output`` for one ``call_id``: a
    call repeating the id of a call in an earlier turn is sent with a numbered suffix, and
    its output with it, the same each time the history is sent.
    """
    history: list[Message | str] = [
        *_tool_turn(ToolResultBlock("terminal:0", (Text("one"),))),
        *_tool_turn(ToolResultBlock("terminal:0", (Text("two"),))),
    ]
    body = await _sent_body("responses", *history)
    items = body["input"]
    calls = [item["call_id"] for item in items if item.get("type") == "function_call"]
    outputs = [
        (item["call_id"], item["output"])
        for item in items
        if item.get("type") == "function_call_output"
    ]
    assert calls == ["terminal:0", "terminal:0_2"]
    assert outputs == [("terminal:0", "one"), ("terminal:0_2", "two")]
    assert await _sent_body("responses", *history) == body


NAME_OF_FIRST_CALL = {
    "messages": lambda body: body["messages"][1]["content"][0]["name"],
    "chat": lambda body: body["messages"][1]["tool_calls"][0]["function"]["name"],
    "responses": lambda body: body["input"][1]["name"],
}


@pytest.mark.parametrize("api", APIS)
async def test_a_call_the_stream_never_named_is_sent_with_a_placeholder_name(api: str) -> None:
    """R10.6 builds a call the stream never named with the name ``''``; the APIs refuse an
    empty tool name in the history, which would fail every later request of the session.
    """
    history: list[Message | str] = [
        "hi",
        Message("assistant", (ToolCall("c1", "", "{}"),)),
        Message("user", (ToolResultBlock("c1", (Text("no such tool"),), is_error=True),)),
    ]
    body = await _sent_body(api, *history)
    assert NAME_OF_FIRST_CALL[api](body) == "unnamed_tool"  # docs/providers.md


def _call_and_result_ids(api: str, body: Any) -> tuple[list[str], list[str]]:
    """The ids of the calls and of the results a Chat or Responses body sends, in order."""
    if api == "chat":
        messages = body["messages"]
        calls = [call["id"] for message in messages for call in message.get("tool_calls", [])]
        return calls, [message["tool_call_id"] for message in messages if message["role"] == "tool"]
    items = body["input"]
    calls = [item["call_id"] for item in items if item.get("type") == "function_call"]
    return calls, [i["call_id"] for i in items if i.get("type") == "function_call_output"]


@pytest.mark.parametrize(("api", "longest"), [("chat", 40), ("responses", 64)])
async def test_tool_call_ids_longer_than_the_api_accepts_are_shortened(
    api: str, longest: int
) -> None:
    """OpenAI refuses a tool-call id over 40 characters (Chat Completions) or 64 (a Responses
    ``call_id``), which another server may have minted: such an id goes out shortened, in its
    call and its result alike, and ids that share a start stay distinct.
    """
    long_ids = [f"chatcmpl-tool-{'0' * 60}{n}" for n in (1, 2)]
    history: list[Message | str] = [
        *_tool_turn(ToolResultBlock(long_ids[0], (Text("one"),))),
        *_tool_turn(ToolResultBlock(long_ids[1], (Text("two"),)), ToolResultBlock("c", ())),
    ]
    body = await _sent_body(api, *history)
    calls, results = _call_and_result_ids(api, body)
    assert calls == results
    assert [len(call_id) for call_id in calls] == [longest, longest, 1]
    assert len(set(calls)) == 3
    assert calls[2] == "c"
    assert await _sent_body(api, *history) == body


async def test_chat_tool_call_ids_repeated_across_turns_answer_their_own_calls() -> None:
    """A call repeating the id of a call in an earlier turn goes out suffixed, and each
    ``tool`` message answers the call of the turn before it.
    """
    history: list[Message | str] = [
        *_tool_turn(ToolResultBlock("call_0", (Text("one"),))),
        *_tool_turn(ToolResultBlock("call_0", (Text("two"),))),
    ]
    messages = (await _sent_body("chat", *history))["messages"]
    calls = [call["id"] for message in messages for call in message.get("tool_calls", [])]
    results = [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]
    assert calls == ["call_0", "call_0_2"]
    assert results == [("call_0", "one"), ("call_0_2", "two")]


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
    sent = (await _sent_body("responses", *history))["input"]
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
    sent = (await _sent_body("responses", *history))["input"]
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
    sent = (await _sent_body("responses", *history))["input"]
    assert sent[1] == {**_reasoning_item("rs_1"), "summary": []}


async def _sent_with_signed_reasoning(signature: str) -> Any:
    """The Responses input sent for a turn whose one call followed reasoning signed *signature*."""
    history: list[Message | str] = [
        "weather?",
        Message("assistant", (Reasoning("", signature), ToolCall("call_1", "lookup", "{}"))),
        Message("user", (ToolResultBlock("call_1", (Text("sunny"),)),)),
    ]
    return (await _sent_body("responses", *history))["input"]


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
    body = await _sent_body("messages", *history)
    assert [block["type"] for block in body["messages"][1]["content"]] == ["tool_use"]


@pytest.mark.parametrize("name", ["look up", "a.b", "", "x" * 65, "wetter_für"])
@pytest.mark.parametrize("api", APIS)
async def test_a_tool_name_the_apis_refuse_fails_before_the_request_is_sent(
    api: str, name: str
) -> None:
    """A tool name outside 1 to 64 ASCII letters, digits, ``_`` or ``-`` (what OpenAI and
    Anthropic accept, and what ``Tool`` enforces) fails as ``INVALID_REQUEST`` naming the
    tool, before anything is sent, instead of as a 400 naming only its place in the list.
    """
    bad = ToolSchema(name, "Looks things up.", {"type": "object"})
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with _adapter(api, server) as model:
            with pytest.raises(ProviderError) as caught:
                await collect(model, make_request("hi", tools=[WEATHER, bad]))
    assert (caught.value.code, caught.value.retryable) == ("INVALID_REQUEST", False)
    assert f"tool name {name!r}" in str(caught.value)
    assert not server.calls


@pytest.mark.parametrize("api", APIS)
async def test_a_long_tool_description_is_sent_whole(api: str) -> None:
    """A description over OpenAI's 1024 characters goes out whole: only some servers and
    models refuse it (with a 400 coded ``string_above_max_length``), others use it all."""
    described = ToolSchema("lookup", "Looks things up. " * 100, {"type": "object"})
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with _adapter(api, server) as model:
            await collect(model, make_request("hi", tools=[described]))
    assert described.description in json.dumps(server.calls[0].body)


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
