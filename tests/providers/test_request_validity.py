"""Request bodies stay within what each provider's API accepts, whatever the history holds.

Each test builds a history the runtime can log (a context message injected
while a tool ran, a blank model answer, an image a tool returned, a tool-call
id another provider minted) and checks the body against the provider's
documented rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import pytest
import trio

from retinue._content import Message, OpaqueBlock, Text, ToolCall, ToolResultBlock
from retinue._lossless import freeze_json
from retinue._request import ModelRequest, ToolSchema
from retinue.providers import ProviderError
from retinue.providers._anthropic_wire import anthropic_request_body
from retinue.providers._openai_chat import chat_request_body
from retinue.providers._openai_responses import responses_request_body
from retinue.providers._replay import EMPTY_TURN_TEXT
from retinue.providers.mock import EchoPolicy, MockServer

from ._request_validity_kit import adapter, sent_body, tool_turn
from .support import ANTHROPIC_IMAGE, RESPONSES_IMAGE, WEATHER, collect, make_request


def _context(text: str) -> Message:
    return Message("user", (Text('<context source="plugin">'), Text(text), Text("</context>")))


APIS = ("messages", "chat", "responses")


# Context injected while a tool ran


def test_chat_tool_messages_follow_their_call_before_injected_context() -> None:
    """A context message logged before the tool result must not split the assistant's
    ``tool_calls`` from the ``tool`` messages: OpenAI rejects that order.
    """
    history = tool_turn(ToolResultBlock("c1", (Text("sunny"),)))
    history.insert(2, _context("the user is in Norway"))
    messages: Any = chat_request_body(make_request(*history))["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[3]["content"] == '<context source="plugin">\nthe user is in Norway\n</context>'


def test_responses_function_outputs_follow_their_call_before_injected_context() -> None:
    """The Responses input puts every ``function_call_output`` before the injected context."""
    results = (ToolResultBlock("c1", (Text("sunny"),)), ToolResultBlock("c2", (Text("rain"),)))
    history = tool_turn(*results)
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


# Tool results that are not text


def test_anthropic_tool_result_keeps_an_image() -> None:
    """An image a tool returned reaches Anthropic inside its ``tool_result``."""
    history = tool_turn(ToolResultBlock("t1", (Text("screen:"), ANTHROPIC_IMAGE)))
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
    history = tool_turn(ToolResultBlock("t1", content, is_error=True))
    messages: Any = anthropic_request_body(make_request(*history))["messages"]
    result = messages[-1]["content"][0]
    assert result["is_error"] is True
    (block,) = result["content"]
    assert block["type"] == "text"
    assert block["text"].strip()


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("content", [(), (Text(""),)], ids=["empty", "empty-text"])
async def test_openai_empty_error_result_says_the_tool_failed(
    api: str, content: tuple[Text, ...]
) -> None:
    """R5.2: an error result carries its ``is_error`` to the model. The OpenAI APIs have no
    such flag, so an error result with no text goes out saying the tool failed, as
    Anthropic's does: an empty output would read as a tool that worked and said nothing."""
    history = tool_turn(ToolResultBlock("c1", content, is_error=True))
    body = await sent_body(api, *history)
    if api == "chat":
        sent = body["messages"][-1]
        assert (sent["role"], sent["tool_call_id"]) == ("tool", "c1")
        shown = sent["content"]
    else:
        sent = body["input"][-1]
        assert (sent["type"], sent["call_id"]) == ("function_call_output", "c1")
        shown = sent["output"]
    assert shown == "(the tool failed without a message)"


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_openai_empty_result_that_is_no_error_stays_empty(api: str) -> None:
    """A tool that worked and returned nothing goes out as the empty output it gave."""
    body = await sent_body(api, *tool_turn(ToolResultBlock("c1", ())))
    sent = body["messages"][-1]["content"] if api == "chat" else body["input"][-1]["output"]
    assert sent == ""


def test_responses_function_output_keeps_an_image() -> None:
    """A non-text result uses the list form of ``function_call_output.output``."""
    history = tool_turn(ToolResultBlock("c1", (Text("screen:"), RESPONSES_IMAGE)))
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
    history = tool_turn(ToolResultBlock("c1", (Text("sunny"),)))
    items: Any = responses_request_body(make_request(*history))["input"]
    assert items[-1]["output"] == "sunny"


def test_chat_tool_message_says_when_the_result_is_not_text() -> None:
    """A ``tool`` message carries text only: an image-only result gets a placeholder, not ""."""
    image = OpaqueBlock("image_url", freeze_json({"image_url": {"url": "data:image/png;base64,"}}))
    history = tool_turn(ToolResultBlock("c1", (image,)), ToolResultBlock("c2", (Text("ok"), image)))
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
    history = tool_turn(ToolResultBlock("functions.lookup:0", (Text("sunny"),)))
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
    has no UTF-8 form and the SDK would refuse the whole body, failing every later
    request: each is sent as U+FFFD, and the history is left as logged.
    """
    history = tool_turn(ToolResultBlock("c1", (Text(FILE_NAME),)))
    history.append(Message("user", (Text(f"why {FILE_NAME}?"),)))
    body = await sent_body(api, *history)
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
    body = await sent_body("messages", *history)
    assert body["messages"][1]["content"][0]["input"] == {"caf\ufffd": "caf\ufffd"}


async def test_a_header_with_no_encoding_is_refused_when_the_adapter_is_built() -> None:
    """Only the body loses its lone surrogates: a header that cannot be encoded is refused
    as the adapter is built, naming it, rather than failing every request."""
    with pytest.raises(ValueError, match=r"default_headers\['x-note'\] holds the lone surrogate"):
        await sent_body("messages", "hi", default_headers={"x-note": FILE_NAME})


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
    body = await sent_body("messages", *history)
    turns = body["messages"]
    assert turns[0]["role"] == turns[-1]["role"] == "user"
    assert all(a["role"] != b["role"] for a, b in pairwise(turns))
    placeholder = [{"type": "text", "text": EMPTY_TURN_TEXT}]
    assert placeholder in (turns[0]["content"], turns[-1]["content"])


async def test_anthropic_tool_ids_that_map_alike_stay_distinct() -> None:
    """``a.b``, ``a:b`` and ``a_b`` all map onto ``a_b``, and the API refuses a request in
    which two ``tool_use`` blocks, in any turns, share an id. Later ids get a numbered suffix,
    the same in a call and in its result, and the same each time the history is sent.
    """
    history: list[Message | str] = [
        *tool_turn(ToolResultBlock("a.b", (Text("one"),))),
        *tool_turn(ToolResultBlock("a:b", (Text("two"),)), ToolResultBlock("a_b", (Text("3"),))),
    ]
    body = await sent_body("messages", *history)
    turns = body["messages"]
    uses = [[block["id"] for block in turns[index]["content"]] for index in (1, 3)]
    results = [
        [block["tool_use_id"] for block in turns[index]["content"] if "tool_use_id" in block]
        for index in (2, 4)
    ]
    assert uses == results == [["a_b"], ["a_b_2", "a_b_3"]]
    assert await sent_body("messages", *history) == body


async def test_anthropic_tool_ids_repeated_across_turns_stay_distinct() -> None:
    """A server that numbers each answer's calls from 0 gives calls of different turns one
    id, which the API refuses in one request: a later call gets a numbered suffix, and each
    result answers the call of the turn before it, the same each time the history is sent.
    """
    history: list[Message | str] = [
        *tool_turn(ToolResultBlock("call_0", (Text("one"),))),
        *tool_turn(ToolResultBlock("call_0", (Text("two"),))),
    ]
    body = await sent_body("messages", *history)
    turns = body["messages"]
    uses = [[block["id"] for block in turns[index]["content"]] for index in (1, 3)]
    answers = [[b for b in turns[index]["content"] if "tool_use_id" in b] for index in (2, 4)]
    assert uses == [[b["tool_use_id"] for b in answer] for answer in answers]
    assert uses == [["call_0"], ["call_0_2"]]
    assert [answer[0]["content"][0]["text"] for answer in answers] == ["one", "two"]
    assert await sent_body("messages", *history) == body


async def test_responses_call_ids_repeated_across_turns_stay_distinct() -> None:
    """The Responses API refuses a second ``function_call_output`` for one ``call_id``: a
    call repeating the id of a call in an earlier turn is sent with a numbered suffix, and
    its output with it, the same each time the history is sent.
    """
    history: list[Message | str] = [
        *tool_turn(ToolResultBlock("terminal:0", (Text("one"),))),
        *tool_turn(ToolResultBlock("terminal:0", (Text("two"),))),
    ]
    body = await sent_body("responses", *history)
    items = body["input"]
    calls = [item["call_id"] for item in items if item.get("type") == "function_call"]
    outputs = [
        (item["call_id"], item["output"])
        for item in items
        if item.get("type") == "function_call_output"
    ]
    assert calls == ["terminal:0", "terminal:0_2"]
    assert outputs == [("terminal:0", "one"), ("terminal:0_2", "two")]
    assert await sent_body("responses", *history) == body


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
    body = await sent_body(api, *history)
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
        *tool_turn(ToolResultBlock(long_ids[0], (Text("one"),))),
        *tool_turn(ToolResultBlock(long_ids[1], (Text("two"),)), ToolResultBlock("c", ())),
    ]
    body = await sent_body(api, *history)
    calls, results = _call_and_result_ids(api, body)
    assert calls == results
    assert [len(call_id) for call_id in calls] == [longest, longest, 1]
    assert len(set(calls)) == 3
    assert calls[2] == "c"
    assert await sent_body(api, *history) == body


async def test_chat_tool_call_ids_repeated_across_turns_answer_their_own_calls() -> None:
    """A call repeating the id of a call in an earlier turn goes out suffixed, and each
    ``tool`` message answers the call of the turn before it.
    """
    history: list[Message | str] = [
        *tool_turn(ToolResultBlock("call_0", (Text("one"),))),
        *tool_turn(ToolResultBlock("call_0", (Text("two"),))),
    ]
    messages = (await sent_body("chat", *history))["messages"]
    calls = [call["id"] for message in messages for call in message.get("tool_calls", [])]
    results = [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]
    assert calls == ["call_0", "call_0_2"]
    assert results == [("call_0", "one"), ("call_0_2", "two")]


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
        async with adapter(api, server) as model:
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
        async with adapter(api, server) as model:
            await collect(model, make_request("hi", tools=[described]))
    assert described.description in json.dumps(server.calls[0].body)


@pytest.mark.parametrize("api", APIS)
async def test_the_body_goes_as_the_json_the_request_maps_to(api: str) -> None:
    """The adapters encode the body themselves, as the SDKs would (compact UTF-8 JSON):
    the server reads it as JSON, the body the request maps to."""
    server = MockServer(EchoPolicy())
    request = make_request("café?", system="Be brief.")
    with trio.fail_after(5):
        async with adapter(api, server) as model:
            await collect(model, request)
    call = server.calls[0]
    builders: dict[str, Callable[[ModelRequest], dict[str, object]]] = {
        "messages": anthropic_request_body,
        "chat": chat_request_body,
        "responses": responses_request_body,
    }
    build = builders[api]
    assert call.headers["content-type"] == "application/json"
    assert call.body == json.loads(json.dumps(build(request)))
