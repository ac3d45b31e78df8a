"""The up-front token estimate admission charges: near what a request's body sends, tool
schemas included, so that ``tokens_per_minute`` holds before the real usage is known."""

from __future__ import annotations

import json

import pytest
import trio

from retinue._content import Message, OpaqueBlock, Text, ToolCall, ToolResultBlock
from retinue._lossless import freeze_json
from retinue._request import ModelRequest, ToolSchema
from retinue._stream import STOP, Finish, StreamChunk, TextDelta, Usage, UsageChunk
from retinue.providers import AdmissionController, AdmissionLimits, estimate_tokens, manage
from retinue.providers._anthropic_wire import anthropic_request_body
from retinue.providers._openai_chat import chat_request_body

from .support import ANTHROPIC_IMAGE, FakeModel, collect, make_request

_FIELDS = {
    f"field_{i}": {
        "type": "string",
        "description": f"The {i}th field: a fairly ordinary sentence describing what goes here.",
    }
    for i in range(12)
}
SCHEMA = {"type": "object", "properties": _FIELDS, "required": list(_FIELDS)}
TOOLS = tuple(
    ToolSchema(f"tool_{j}", "Does a thing with the fields given.", SCHEMA) for j in range(20)
)


def _history() -> tuple[Message, ...]:
    call = ToolCall("call_1", "tool_0", json.dumps(dict.fromkeys(_FIELDS, "some value")))
    return (
        Message("user", (Text("Please do the thing with these fields. " * 10),)),
        Message("assistant", (Text("Doing it."), call)),
        Message("user", (ToolResultBlock("call_1", (Text("It was done. " * 20),)),)),
    )


def _sent_tokens(request: ModelRequest) -> tuple[int, int]:
    """A quarter of the characters each API's body sends for *request*."""
    chat = chat_request_body(request, max_tokens_param="max_tokens", replay_reasoning=False)
    messages = anthropic_request_body(request, default_max_tokens=1024, thinking_budget=None)
    return len(json.dumps(chat)) // 4, len(json.dumps(messages)) // 4


@pytest.mark.parametrize("tools", [TOOLS, ()], ids=["twenty-tools", "no-tools"])
def test_the_estimate_is_near_what_the_body_sends(tools: tuple[ToolSchema, ...]) -> None:
    """R10.6: the estimate of a request is within a factor of two of a quarter of the
    characters its body sends, its tool schemas whole (20 tools of 12 described fields are
    about 8,000 tokens, where counting a schema by its top-level keys made them 500)."""
    request = make_request(*_history(), tools=tools)
    estimate = estimate_tokens(request)
    for sent in _sent_tokens(request):
        assert sent / 2 <= estimate <= sent * 2, (estimate, sent)


def test_an_image_counts_a_fixed_estimate_not_its_data() -> None:
    """R10.6: an image is estimated as the APIs charge for one, whatever the length of its
    base64 data: counted as text, a photo of a megabyte would be 250,000 tokens."""
    data = {"source": {"type": "base64", "media_type": "image/png", "data": "iV" * 500_000}}
    big = OpaqueBlock("image", freeze_json(data))
    plain = estimate_tokens(make_request("What is this?"))
    for image in (ANTHROPIC_IMAGE, big):
        with_image = make_request(Message("user", (Text("What is this?"), image)))
        assert 500 <= estimate_tokens(with_image) - plain <= 3_000


def test_a_schema_is_counted_again_when_a_new_one_of_another_size_comes() -> None:
    """A schema's length is kept per schema: another one, even under the same name,
    is counted as it is."""
    small = ToolSchema("lookup", "Looks up.", {"type": "object"})
    large = ToolSchema("lookup", "Looks up.", SCHEMA)
    assert (
        estimate_tokens(make_request("hi", tools=[large]))
        > estimate_tokens(make_request("hi", tools=[small])) + len(json.dumps(SCHEMA)) // 8
    )


REAL_TOKENS = 8_645


def _answer() -> list[StreamChunk]:
    return [TextDelta(0, "x"), UsageChunk(Usage(REAL_TOKENS, 10)), Finish(STOP)]


async def test_a_burst_of_tool_heavy_requests_keeps_to_the_token_budget(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.6: ten agents sending 20 tools each at once to a lane of 20,000 tokens a minute
    get no more than the budget admitted in the first minute, where an estimate that
    missed the schemas let all ten (86,450 tokens) through at once."""
    model = FakeModel([_answer() for _ in range(10)], delay=5.0)
    admission = AdmissionController(AdmissionLimits(tokens_per_minute=20_000))
    managed = manage(model, admission=admission)
    with trio.fail_after(600):
        async with trio.open_nursery() as nursery:
            for i in range(10):
                request = make_request("go", tools=TOOLS, session_id=f"agent-{i}")
                nursery.start_soon(collect, managed, request)
    first_minute = sum(1 for started in model.started if started < 60)
    assert 1 <= first_minute * REAL_TOKENS <= 20_000 + REAL_TOKENS
