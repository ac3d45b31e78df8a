"""The mock server refuses a request field of the wrong JSON type as the real API does: 400.

OpenAI answers ``Invalid type for 'max_tokens': expected an integer, but got a string
instead.`` (``param`` the field, ``code`` ``invalid_type``); Anthropic names the field's
path before its complaint (``max_tokens: Input should be a valid integer``).
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
import trio

from retinue.providers.mock import EchoPolicy, MockServer, open_mock_server

from ._mock_robustness_kit import CHAT, REAL_DEADLINE

RESPONSES = "/v1/responses"
MESSAGES = "/v1/messages"
_USER = [{"role": "user", "content": "hi"}]


def _chat(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": _USER, **fields}


def _anthropic(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": _USER, "max_tokens": 64, **fields}


def _responses(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "input": "hi", **fields}


_OPENAI_REFUSED = [
    (CHAT, _chat(max_tokens="5"), "max_tokens", "an integer", "a string"),
    (CHAT, _chat(max_tokens=5.5), "max_tokens", "an integer", "a decimal number"),
    (CHAT, _chat(max_completion_tokens=True), "max_completion_tokens", "an integer", "a boolean"),
    (CHAT, _chat(messages={}), "messages", "an array", "an object"),
    (CHAT, _chat(messages="hi"), "messages", "an array", "a string"),
    (CHAT, _chat(messages=["hi"]), "messages[0]", "an object", "a string"),
    (CHAT, _chat(stream="yes"), "stream", "a boolean", "a string"),
    (CHAT, _chat(stream=1), "stream", "a boolean", "an integer"),
    (CHAT, _chat(model=5), "model", "a string", "an integer"),
    (CHAT, _chat(tools={}), "tools", "an array", "an object"),
    (CHAT, _chat(tools=["get"]), "tools[0]", "an object", "a string"),
    (RESPONSES, _responses(max_output_tokens="5"), "max_output_tokens", "an integer", "a string"),
    (RESPONSES, _responses(input={}), "input", "a string or an array", "an object"),
    (RESPONSES, _responses(input=[5]), "input[0]", "an object", "an integer"),
    (RESPONSES, _responses(stream="yes"), "stream", "a boolean", "a string"),
]


@pytest.mark.parametrize(("path", "body", "param", "expected", "got"), _OPENAI_REFUSED)
async def test_mock_openai_request_field_of_the_wrong_type_is_answered_400_naming_it(
    path: str, body: dict[str, Any], param: str, expected: str, got: str
) -> None:
    """A Chat Completions or Responses field of the wrong JSON type gets OpenAI's 400, before
    any policy answers it, not 200 with the field read as something else."""
    server = MockServer(EchoPolicy())
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        response = await client.post("http://mock" + path, json=body)
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": f"Invalid type for '{param}': expected {expected}, but got {got} instead.",
        "type": "invalid_request_error",
        "param": param,
        "code": "invalid_type",
    }
    assert not server.calls


_ANTHROPIC_REFUSED = [
    (_anthropic(max_tokens="5"), "max_tokens: Input should be a valid integer"),
    (_anthropic(max_tokens=True), "max_tokens: Input should be a valid integer"),
    (_anthropic(max_tokens=5.5), "max_tokens: Input should be a valid integer"),
    (_anthropic(messages={}), "messages: Input should be a valid list"),
    (_anthropic(messages=["hi"]), "messages.0: Input should be a valid dictionary"),
    (_anthropic(stream="yes"), "stream: Input should be a valid boolean"),
    (_anthropic(model=5), "model: Input should be a valid string"),
    (_anthropic(tools={}), "tools: Input should be a valid list"),
    (_anthropic(tools=[5]), "tools.0: Input should be a valid dictionary"),
]


@pytest.mark.parametrize(("body", "message"), _ANTHROPIC_REFUSED)
async def test_mock_anthropic_request_field_of_the_wrong_type_is_answered_400_naming_it(
    body: dict[str, Any], message: str
) -> None:
    """A Messages field of the wrong JSON type gets Anthropic's 400 ``invalid_request_error``,
    its message led by the field's path, not 200."""
    server = MockServer(EchoPolicy())
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        response = await client.post("http://mock" + MESSAGES, json=body)
    assert response.status_code == 400
    assert response.json()["error"] == {"type": "invalid_request_error", "message": message}
    assert not server.calls


_ACCEPTED = [
    (CHAT, _chat(max_tokens=5, stream=False, tools=[], max_completion_tokens=None)),
    (CHAT, _chat(max_tokens=5.0, stream=None)),
    (RESPONSES, _responses(input=[{"role": "user", "content": "hi"}], max_output_tokens=5)),
    (MESSAGES, _anthropic(stream=True)),
]


@pytest.mark.parametrize(("path", "body"), _ACCEPTED)
async def test_mock_request_fields_of_their_own_types_are_served(
    path: str, body: dict[str, Any]
) -> None:
    """Fields of their own types, a null or an integral number among them, are served."""
    server = MockServer(EchoPolicy())
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        response = await client.post("http://mock" + path, json=body)
    assert response.status_code == 200
    assert len(server.calls) == 1


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CHAT, _chat(max_tokens=2.0)),
        (CHAT, _chat(max_completion_tokens=2.0)),
        (RESPONSES, _responses(max_output_tokens=2.0)),
        (MESSAGES, _anthropic(max_tokens=2.0)),
    ],
)
async def test_mock_integral_number_token_limit_limits_the_reply(
    path: str, body: dict[str, Any]
) -> None:
    """A token limit written as an integral number (2.0) is taken, so it limits the reply as
    2 does, not read as no limit at all."""
    server = MockServer(EchoPolicy())
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        response = await client.post("http://mock" + path, json=body)
    assert response.status_code == 200
    assert server.calls[0].max_output_tokens == 2


async def test_mock_request_field_of_the_wrong_type_is_answered_400_over_tcp() -> None:
    """Over a socket too, the refusal is the API's 400, and the next request is served."""
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server() as server,
            httpx2.AsyncClient(base_url=server.base_url) as client,
        ):
            refused = await client.post(MESSAGES, json=_anthropic(stream="yes"))
            served = await client.post(MESSAGES, json=_anthropic())
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == "stream: Input should be a valid boolean"
    assert served.status_code == 200
