"""The mock server refuses a history that breaks tool-call pairing as each real API does: 400.

Chat Completions wants every assistant ``tool_calls`` answered by the ``tool`` messages
right after it, and no ``tool`` message elsewhere; Responses wants every
``function_call`` given its ``function_call_output`` and no output without its call;
Anthropic wants each ``tool_use`` answered in the next turn and no ``tool_result``
without a ``tool_use`` in the turn before. Chat messages ending on an unanswered call
pass: the API is not known to refuse them.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import httpx2
import pytest
import trio

from retinue._content import Message, Text, ToolCall, ToolResultBlock
from retinue.providers import ProviderError
from retinue.providers.mock import EchoPolicy, MockServer
from retinue.providers.mock._request_pairing import pairing_refusal

from ._mock_robustness_kit import CHAT
from ._request_validity_kit import adapter
from .support import collect, make_request

_PROMPT = Message("user", (Text("weather?"),))
_CALL = Message("assistant", (ToolCall("c1", "lookup", '{"city":"Oslo"}'),))
_RESULT = Message("user", (ToolResultBlock("c1", (Text("sunny"),)),))
_NEXT = Message("user", (Text("and tomorrow?"),))

# A call left without its result, as a listener's prefix can leave it.
_UNANSWERED = (_PROMPT, _CALL, _NEXT)
# A result whose call a compaction replaced, so it opens the history.
_ORPHANED = (_RESULT, _NEXT)


async def _refusal(api: str, *history: Message) -> tuple[ProviderError, MockServer]:
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with adapter(api, server) as model:
            try:
                await collect(model, make_request(*history))
            except ProviderError as error:
                return error, server
    raise AssertionError("the mock server answered the request")


_CHAT_UNANSWERED = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to "
    "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
)
_CHAT_TOOL_FIRST = (
    # sic: the API's spelling
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
    "with 'tool_calls'."
)
_NO_RESULT = (
    "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
    "after: {id}. Each `tool_use` block must have a corresponding `tool_result` block in the "
    "next message."
)
_NO_USE = (
    "messages.{index}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: {id}. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
    "message."
)

_SDK_REFUSED = [
    (
        "chat",
        _UNANSWERED,
        _CHAT_UNANSWERED + "c1",
    ),
    (
        "chat",
        _ORPHANED,
        _CHAT_TOOL_FIRST,
    ),
    ("responses", _UNANSWERED, "No tool output found for function call c1."),
    ("responses", _ORPHANED, "No tool call found for function call output with call_id c1."),
    (
        "messages",
        _UNANSWERED,
        _NO_RESULT.format(index=1, id="c1"),
    ),
    (
        "messages",
        _ORPHANED,
        _NO_USE.format(index=0, id="c1"),
    ),
]


@pytest.mark.parametrize(("api", "history", "message"), _SDK_REFUSED)
async def test_mock_refuses_a_history_breaking_tool_call_pairing_as_the_api_does(
    api: str, history: tuple[Message, ...], message: str
) -> None:
    """An adapter's request whose history leaves a call unanswered, or answers none, gets
    the 400 the real API gives, before any policy sees it, not 200, so a test catches a
    history every real request fails on."""
    error, server = await _refusal(api, *history)
    assert error.status == 400
    assert message in str(error)
    assert not server.calls


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_mock_accepts_a_paired_history(api: str) -> None:
    """A call answered by its result passes."""
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with adapter(api, server) as model:
            await collect(model, make_request(_PROMPT, _CALL, _RESULT, _NEXT))
    assert len(server.calls) == 1


async def _posted(path: str, body: dict[str, Any]) -> httpx2.Response:
    server = MockServer(EchoPolicy())
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        return await client.post("http://mock" + path, json=body)


def _calling(*ids: str) -> dict[str, Any]:
    calls = [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _tool(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


_USER = {"role": "user", "content": "hi"}

_CHAT_REFUSED = [
    (
        [_USER, _calling("a", "b"), _tool("a"), _USER],
        _CHAT_UNANSWERED + "b",
        "messages.[1].role",
    ),
    (
        [_USER, _calling("a"), _USER, _tool("a")],
        _CHAT_UNANSWERED + "a",
        "messages.[1].role",
    ),
    (
        [_USER, _calling("a"), _tool("a"), _USER, _tool("a")],
        _CHAT_TOOL_FIRST,
        "messages.[4].role",
    ),
    (
        [_USER, _calling("a"), _tool("z")],
        "Invalid parameter: 'tool_call_id' of 'z' not found in 'tool_calls' of previous message.",
        None,
    ),
]


@pytest.mark.parametrize(("messages", "message", "param"), _CHAT_REFUSED)
async def test_mock_chat_pairing_refusal_has_openai_body(
    messages: list[dict[str, Any]], message: str, param: str | None
) -> None:
    """OpenAI's body: its wording, ``invalid_request_error``, the message at fault as the
    param where it names one, and a null code."""
    response = await _posted(CHAT, {"model": "m", "messages": messages})
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": message,
        "type": "invalid_request_error",
        "param": param,
        "code": None,
    }


_CHAT_ACCEPTED = [
    [_USER, _calling("a", "b"), _tool("b"), _tool("a"), _USER],
    [_USER, _calling("a"), _tool("a"), _tool("a")],
    [_USER, {"role": "assistant", "content": "x", "tool_calls": []}, _USER],
    [_USER, _calling("a")],
]


@pytest.mark.parametrize("messages", _CHAT_ACCEPTED)
async def test_mock_chat_accepts_answers_in_any_order(messages: list[dict[str, Any]]) -> None:
    """The tool messages after a call may come in any order, an empty ``tool_calls`` asks for
    none, and the messages may end on a call."""
    response = await _posted(CHAT, {"model": "m", "messages": messages})
    assert response.status_code == 200


def _function_call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"}


def _output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "ok"}


async def test_mock_responses_pairing_refusal_has_openai_body() -> None:
    """Responses names ``input`` as the param, with a null code."""
    body = {"model": "m", "input": [_USER, _function_call("a"), _output("a"), _output("b")]}
    response = await _posted("/v1/responses", body)
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": "No tool call found for function call output with call_id b.",
        "type": "invalid_request_error",
        "param": "input",
        "code": None,
    }


@pytest.mark.parametrize(
    "chained",
    [
        {"previous_response_id": "resp_1"},
        {"conversation": "conv_1"},
        {"input": [{"type": "item_reference", "id": "fc_1"}, _output("a")]},
        {"input": [{"id": "fc_1"}, _output("a")]},
    ],
    ids=["previous response", "conversation", "item reference", "untyped item reference"],
)
async def test_mock_responses_output_of_a_call_held_elsewhere_is_accepted(
    chained: dict[str, object],
) -> None:
    """The call of an output may be in the stored response a ``previous_response_id``
    names, in the ``conversation`` the request continues, or in an item it names by
    reference: the real API takes each, and so does the mock, the last two included."""
    body = {"model": "m", "input": [_output("a")], **chained}
    assert (await _posted("/v1/responses", body)).status_code == 200


async def test_mock_anthropic_pairing_reads_consecutive_turns_of_a_role_as_one() -> None:
    """Anthropic merges consecutive messages of one role, so a result in the second of two
    user messages answers the call before them; the body is Anthropic's error."""
    use = {"type": "tool_use", "id": "a", "name": "f", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "a", "content": "ok"}
    paired = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "x"}]},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
        {"role": "user", "content": "more"},
    ]
    body: dict[str, Any] = {"model": "m", "max_tokens": 64, "messages": paired}
    assert (await _posted("/v1/messages", body)).status_code == 200
    body["messages"] = [*paired, {"role": "assistant", "content": "y"}, paired[3]]
    response = await _posted("/v1/messages", body)
    assert response.status_code == 400
    assert response.json()["error"] == {
        "type": "invalid_request_error",
        "message": _NO_USE.format(index=6, id="a"),
    }


def _long_anthropic_body(turns: int) -> dict[str, Any]:
    """*turns* turns of a prompt, a tool_use, its tool_result and an answer, as JSON parses them."""
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        use = {"type": "tool_use", "id": f"u{turn}", "name": "f", "input": {"city": "Oslo"}}
        result = {"type": "tool_result", "tool_use_id": f"u{turn}", "content": "ok"}
        messages += [
            {"role": "user", "content": [{"type": "text", "text": f"question {turn}"}]},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
            {"role": "assistant", "content": [{"type": "text", "text": "answer"}]},
        ]
    return {"model": "m", "max_tokens": 64, "messages": messages}


def test_mock_anthropic_pairing_check_keeps_nothing_per_message() -> None:
    """The check of a long history allocates no object per message: the server runs it on
    every request, whose history grows with the session, beside the parsed body's own."""
    body = _long_anthropic_body(1000)
    tracemalloc.start()
    try:
        assert pairing_refusal("messages", body) is None
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16_384, f"{peak} bytes held while checking 4000 messages"
