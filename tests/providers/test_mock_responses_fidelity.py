"""The mock server's Responses API wire against recorded real exchanges and the SDK's schema."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
import trio
from openai.types.responses import ResponseErrorEvent

from retinue._content import Text
from retinue.providers import ProviderStreamError
from retinue.providers.mock import (
    Fault,
    MockReply,
    MockResponse,
    MockServer,
    MockToolCall,
    ScriptedPolicy,
)

from .support import collect, load, make_request, mock_adapter

VIRTUAL_DEADLINE = 60.0
INCOMPLETE = load("responses_stream_incomplete_max_output_tokens.json")
FUNCTION_CALLS = load("responses_nonstream_function_calls.json")
CUT_SHORT = MockReply(text="Sure! Here is a list of all 50 U.S. states", chunks=5, finish="length")


def _events(body: str) -> list[dict[str, Any]]:
    """The JSON payloads of an SSE body's ``data:`` lines."""
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


async def _post(reply: MockResponse, body: dict[str, Any]) -> httpx2.Response:
    server = MockServer(ScriptedPolicy([reply]))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with httpx2.AsyncClient(transport=server.transport()) as client:
            return await client.post("http://mock/v1/responses", json=body)


def _shape(response: dict[str, Any]) -> tuple[object, ...]:
    """The fields of a response object that say whether and how it ended."""
    items = [(item["type"], item.get("status")) for item in response["output"]]
    return response["status"], response["incomplete_details"], items


def _kinds(events: list[dict[str, Any]]) -> list[str]:
    """Event types in order, a run of one type (the deltas) counted once."""
    kinds = [event["type"] for event in events]
    return [kind for n, kind in enumerate(kinds) if n == 0 or kinds[n - 1] != kind]


def _by_kind(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {event["type"]: event for event in events}


async def test_mock_incomplete_stream_matches_the_recording(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A reply cut at the token budget streams as the recorded one: the response starts
    with no incomplete_details, the message item ends 'incomplete', then response.incomplete.
    """
    response = await _post(CUT_SHORT, INCOMPLETE["request"]["body"])
    mock = _events(response.text)
    real = _events(INCOMPLETE["response"]["body"])
    assert _kinds(mock) == _kinds(real)
    assert [e["sequence_number"] for e in mock] == list(range(len(mock)))
    mock_by, real_by = _by_kind(mock), _by_kind(real)
    for kind in ("response.created", "response.in_progress", "response.incomplete"):
        assert _shape(mock_by[kind]["response"]) == _shape(real_by[kind]["response"]), kind
    for kind in ("response.output_item.added", "response.output_item.done"):
        assert mock_by[kind]["item"]["status"] == real_by[kind]["item"]["status"], kind


async def test_mock_incomplete_body_matches_the_recorded_final_response(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Without ``stream`` the cut-short reply is the response object the recorded stream
    ends with (no non-streamed recording exists; the API sends the same object).
    """
    request = {**INCOMPLETE["request"]["body"], "stream": False}
    response = await _post(CUT_SHORT, request)
    real = _by_kind(_events(INCOMPLETE["response"]["body"]))["response.incomplete"]
    assert _shape(response.json()) == _shape(real["response"])


async def test_mock_function_call_body_matches_the_recording(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A finished non-streamed reply keeps the recorded completed statuses on every item."""
    output = json.loads(FUNCTION_CALLS["response"]["body"])["output"]
    calls = tuple(MockToolCall(item["name"], item["arguments"]) for item in output)
    response = await _post(MockReply(tool_calls=calls), FUNCTION_CALLS["request"]["body"])
    assert _shape(response.json()) == _shape(json.loads(FUNCTION_CALLS["response"]["body"]))


TOOL_SETTINGS = ("tools", "tool_choice", "parallel_tool_calls")


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
async def test_mock_response_echoes_the_tool_settings_as_recorded(
    autojump_clock: trio.abc.Clock, stream: bool
) -> None:
    """The response object, and each one a stream's events carry, echoes the request's
    tools with ``tool_choice`` and ``parallel_tool_calls`` defaulted as the recording shows.
    """
    recorded = json.loads(FUNCTION_CALLS["response"]["body"])
    request = {**FUNCTION_CALLS["request"]["body"], "stream": stream}
    response = await _post(MockReply(text="hi"), request)
    events = _events(response.text)
    objects = [e["response"] for e in events if "response" in e] if stream else [response.json()]
    assert objects
    for echoed in objects:
        assert {key: echoed[key] for key in TOOL_SETTINGS} == {
            key: recorded[key] for key in TOOL_SETTINGS
        }


async def test_mock_response_echoes_tool_settings_the_request_gives(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A ``tool_choice`` and ``parallel_tool_calls`` the request sets come back as set."""
    request = {
        **FUNCTION_CALLS["request"]["body"],
        "tool_choice": "required",
        "parallel_tool_calls": False,
    }
    echoed = (await _post(MockReply(text="hi"), request)).json()
    assert (echoed["tool_choice"], echoed["parallel_tool_calls"]) == ("required", False)


async def test_adapter_reads_the_mock_incomplete_stream_as_max_tokens(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The Responses adapter decodes the cut-short stream to its text and a max-tokens finish."""
    server = MockServer(ScriptedPolicy([CUT_SHORT]))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with mock_adapter("responses", server) as model:
            collected = await collect(model, make_request("List all U.S. states."))
    assert collected.assembler.finish.kind == "max-tokens"
    assert collected.message.content == (Text(CUT_SHORT.text),)


async def test_mock_stream_error_event_is_numbered_after_the_sent_events(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The in-stream error of a stream_error fault is a valid ResponseErrorEvent, which
    requires ``sequence_number``: the next number after the events already sent.
    """
    body = {"model": "gpt-4o", "input": "hi", "stream": True}
    response = await _post(Fault("stream_error", reply=CUT_SHORT), body)
    events = _events(response.text)
    assert events[-1]["type"] == "error"
    assert [e.get("sequence_number") for e in events] == list(range(len(events)))
    ResponseErrorEvent.model_validate(events[-1], strict=True)


async def test_adapter_raises_the_mock_stream_error(autojump_clock: trio.abc.Clock) -> None:
    """The Responses adapter turns the numbered in-stream error into a retryable stream error."""
    server = MockServer(ScriptedPolicy([Fault("stream_error", reply=CUT_SHORT)]))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with mock_adapter("responses", server) as model:
            with pytest.raises(ProviderStreamError) as caught:
                await collect(model, make_request("hi"))
    assert caught.value.retryable
    assert caught.value.code == "server_error"
