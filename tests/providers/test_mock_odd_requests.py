"""The mock server takes the odd values a request may hold where the real API is lenient."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from retinue.providers.mock import EchoPolicy, MockServer


@pytest.mark.parametrize("kind", [{}, ["function_call"], {"type": "reasoning"}])
async def test_mock_responses_input_item_whose_type_is_no_string_is_answered(kind: Any) -> None:
    """A Responses input item whose ``type`` is an object or a list is an item of no known
    type, answered as any other request is, not a 500 from the policy's own failure."""
    body = {
        "model": "m",
        "input": [
            {"role": "user", "content": "hi"},
            {"type": kind, "call_id": "c1", "output": "sunny"},
        ],
    }
    server = MockServer(EchoPolicy())
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        response = await client.post("http://mock/v1/responses", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "completed"
    assert len(server.calls) == 1


CHOICES = {
    "messages-type-object": ("/v1/messages", {"type": {"type": "tool"}, "name": "lookup"}),
    "messages-type-list": ("/v1/messages", {"type": ["any"]}),
    "chat-allowed-mode-list": (
        "/v1/chat/completions",
        {"type": "allowed_tools", "allowed_tools": {"mode": ["required"], "tools": []}},
    ),
    "responses-allowed-mode-object": (
        "/v1/responses",
        {"type": "allowed_tools", "mode": {"required": True}, "tools": []},
    ),
}


def _request(path: str, choice: object) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "tool_choice": choice}
    if path == "/v1/responses":
        return {**body, "input": "hi"}
    return {**body, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64}


@pytest.mark.parametrize("case", CHOICES)
async def test_mock_tool_choice_mode_that_is_no_string_leaves_the_choice_to_the_model(
    case: str,
) -> None:
    """A ``tool_choice`` whose type or mode is an object or a list names no mode: the reply
    is the model's own choice (``auto``), not a 500 from the policy's own failure."""
    path, choice = CHOICES[case]
    server = MockServer(EchoPolicy())
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        response = await client.post("http://mock" + path, json=_request(path, choice))
    assert response.status_code == 200, response.text
    [call] = server.calls
    assert call.tool_choice[0] == "auto"
