"""The mock's fidelity details: the Responses event stream the official SDK's helper reads,
reproducible randomness under concurrency, reasoning and tool-only chat streams, example
arguments for unions, a bounded call log and replies that stay hashable.
"""

from __future__ import annotations

import inspect
import json
import random
from collections.abc import Sequence
from typing import Any

import httpx2
import openai
import pytest
import trio

import retinue
from retinue._content import Reasoning, Text
from retinue.providers.mock import (
    EchoPolicy,
    Endless,
    FaultPolicy,
    MockCall,
    MockReply,
    MockServer,
    MockToolCall,
    ScriptedPolicy,
    Timing,
    example_arguments,
    open_mock_server,
)
from retinue.providers.openai import OpenAIModel
from retinue.tools._validate import validate

from ._mock_robustness_kit import CHAT, REAL_DEADLINE, chat_body
from .support import WEATHER, collect, load, make_request

# -- 2. the Responses stream the official SDK's helper reads ---------------------------

_REASONED = MockReply(text="hello world", reasoning="step by step", chunks=2)
_TOOLS = MockReply(tool_calls=(MockToolCall("get", '{"a": 1}'), MockToolCall("put", "{}")))


@pytest.mark.parametrize("reply", [_REASONED, _TOOLS], ids=["text", "tools"])
async def test_mock_responses_stream_helper_of_the_sdk(reply: MockReply) -> None:
    """``client.responses.stream()`` assembles the mock's stream into the whole response."""
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server(ScriptedPolicy([reply])) as server,
            openai.AsyncOpenAI(
                base_url=server.openai_base_url, api_key="k", max_retries=0
            ) as client,
            client.responses.stream(model="m", input="hi") as stream,
        ):
            final = await stream.get_final_response()
    kinds = [item.type for item in final.output]
    if reply.text:
        assert final.output_text == "hello world"
        assert kinds == ["reasoning", "message"]
        assert final.output[0].summary[0].text == "step by step"  # type: ignore[union-attr]
    else:
        assert kinds == ["function_call", "function_call"]
        assert [item.arguments for item in final.output] == ['{"a": 1}', "{}"]  # type: ignore[union-attr]


def _sse_payloads(body: bytes | str) -> list[dict[str, Any]]:
    text = body.decode() if isinstance(body, bytes) else body
    return [
        json.loads(line[len("data: ") :])
        for line in text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def _shape(payloads: Sequence[dict[str, Any]]) -> list[tuple[str, tuple[str, ...]]]:
    """Event types with their field names, runs of deltas collapsed to one."""
    shape: list[tuple[str, tuple[str, ...]]] = []
    for payload in payloads:
        entry = (payload["type"], tuple(sorted(set(payload) - {"obfuscation"})))
        if not shape or shape[-1] != entry or not entry[0].endswith(".delta"):
            shape.append(entry)
    return shape


async def test_mock_responses_text_stream_matches_the_recorded_one() -> None:
    """A text reply streams the event types and fields of a recorded real stream, numbered."""
    recorded = _sse_payloads(
        load("responses_stream_text_after_function_outputs.json")["response"]["body"]
    )
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server(ScriptedPolicy([MockReply(text="hello world")])) as server,
            httpx2.AsyncClient(base_url=server.openai_base_url) as client,
        ):
            response = await client.post(
                "/responses", json={"model": "m", "input": "hi", "stream": True}
            )
    mine = _sse_payloads(response.content)
    assert _shape(mine) == _shape(recorded)
    assert [p["sequence_number"] for p in mine] == list(range(len(mine)))


async def test_mock_responses_endless_stream_keeps_numbering(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A never-ending Responses stream opens its content part and numbers every delta."""
    server = MockServer(ScriptedPolicy([Endless(0.5)]))
    payloads: list[dict[str, Any]] = []
    body = {"model": "m", "input": "hi", "stream": True}
    with trio.fail_after(60):
        async with httpx2.AsyncClient(transport=server.transport(), base_url="http://m") as client:
            with trio.move_on_after(3.2):
                async with client.stream("POST", "/v1/responses", json=body) as response:
                    async for line in response.aiter_lines():
                        payloads += _sse_payloads(line)
    assert [p["type"] for p in payloads[:4]][-1] == "response.content_part.added"
    assert {p["type"] for p in payloads[4:]} == {"response.output_text.delta"}
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))


_ENDLESS_PATHS = {"chat": CHAT, "responses": "/v1/responses", "messages": "/v1/messages"}


@pytest.mark.parametrize("api", list(_ENDLESS_PATHS))
async def test_mock_endless_tick_work_does_not_grow_with_the_request(
    autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch, api: str
) -> None:
    """A never-ending stream estimates its request's input tokens (a walk of the whole
    body) for its opening events only, never again per tick.
    """
    estimator = inspect.getattr_static(MockCall, "input_tokens")
    assert isinstance(estimator, property)
    assert estimator.fget is not None
    estimate = estimator.fget
    estimates = 0

    def counted(call: MockCall) -> int:
        nonlocal estimates
        estimates += 1
        return estimate(call)

    monkeypatch.setattr(MockCall, "input_tokens", property(counted))
    server = MockServer(ScriptedPolicy([Endless(0.5)]))
    prompt = "x" * 200_000
    body: dict[str, Any] = {"model": "m", "stream": True, "max_tokens": 10, "input": prompt}
    body["messages"] = [{"role": "user", "content": prompt}]
    body["stream_options"] = {"include_usage": True}
    events: list[int] = []  # the estimates made by the time of each event
    with trio.fail_after(60):
        async with httpx2.AsyncClient(transport=server.transport(), base_url="http://m") as client:
            with trio.move_on_after(20.2):
                async with client.stream("POST", _ENDLESS_PATHS[api], json=body) as response:
                    async for line in response.aiter_lines():
                        events += [estimates] * len(_sse_payloads(line))
    assert len(events) > 40
    assert events[-1] == events[4] <= 1


# -- 3. a seed reproduces a run however concurrent clients interleave -------------------


async def _concurrent_run() -> list[tuple[int, int, int, str, float]]:
    """Ten clients, three requests each, through fault, tool and latency draws."""
    server = MockServer(
        FaultPolicy(EchoPolicy(seed=3), rate=0.3, kinds=("server_error",), seed=1),
        timing=Timing(latency=lambda rng: rng.uniform(0.01, 0.1)),
        seed=1,
    )
    outcomes: list[tuple[int, int, int, str, float]] = []
    tools = [
        {"type": "function", "function": {"name": n, "parameters": WEATHER.parameters}}
        for n in "abc"
    ]

    async def client_task(client: httpx2.AsyncClient, index: int) -> None:
        for turn in range(3):
            content = f"client {index} request {turn}"
            body = {
                "model": "m",
                "messages": [{"role": "user", "content": content}],
                "tools": tools,
            }
            started = trio.current_time()
            response = await client.post(CHAT, json=body)
            took = round(trio.current_time() - started, 9)
            outcomes.append((index, turn, response.status_code, response.text, took))

    async with (
        httpx2.AsyncClient(transport=server.transport(), base_url="http://m") as client,
        trio.open_nursery() as nursery,
    ):
        for index in range(10):
            nursery.start_soon(client_task, client, index)
    return sorted(outcomes)


async def test_mock_seeded_run_is_reproducible_under_concurrency(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Faults, tool choices, arguments and latencies depend on the requests, not their order."""
    with trio.fail_after(600):
        runs = [await _concurrent_run() for _ in range(5)]
    assert all(run == runs[0] for run in runs)
    assert {status for _, _, status, _, _ in runs[0]} == {200, 500}


async def test_mock_fault_draws_afresh_for_a_repeated_request(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The same body again (a retry) is not doomed to the first attempt's fault."""
    server = MockServer(FaultPolicy(EchoPolicy(), rate=0.5, kinds=("server_error",)))
    async with httpx2.AsyncClient(transport=server.transport(), base_url="http://m") as client:
        statuses = {(await client.post(CHAT, content=chat_body())).status_code for _ in range(20)}
    assert statuses == {200, 500}
    assert [call.occurrence for call in server.calls] == list(range(20))


# -- 7. and 8. Responses reasoning; null content in tool-only chat streams --------------


async def test_mock_responses_reasoning_reaches_the_adapter() -> None:
    """``MockReply.reasoning`` streams as a Responses reasoning summary."""
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server(ScriptedPolicy([_REASONED], cycle=True)) as server,
            OpenAIModel(base_url=server.openai_base_url, api_key="k", api="responses") as model,
        ):
            collected = await collect(model, make_request("hi"))
    (reasoning, text) = collected.message.content
    assert isinstance(reasoning, Reasoning)
    assert reasoning.text == "step by step"
    assert text == Text("hello world")


async def test_mock_tool_only_chat_stream_opens_with_null_content() -> None:
    """Like OpenAI, a chat stream with only tool calls opens with ``content: null``."""
    replies = [MockReply(tool_calls=(MockToolCall("get", "{}"),)), MockReply(text="hi")]
    server = MockServer(ScriptedPolicy(replies))
    firsts = []
    async with httpx2.AsyncClient(transport=server.transport(), base_url="http://m") as client:
        for _ in replies:
            response = await client.post(CHAT, content=chat_body(stream=True))
            firsts.append(_sse_payloads(response.content)[0]["choices"][0]["delta"])
    assert firsts[0]["content"] is None
    assert firsts[1]["content"] == ""


# -- 9. example arguments for unions ---------------------------------------------------


@retinue.tool
def _scale(factor: int | list[int], label: str | None, mode: str = "fast") -> str:
    """Scale something.

    Args:
        factor: How much.
        label: A label.
        mode: How.
    """
    return f"{factor} {label} {mode}"


def test_mock_example_arguments_follow_unions_and_constants() -> None:
    """anyOf / oneOf pick a typed branch; const is used as is; odd entries are skipped."""
    schema = {
        "type": "object",
        "properties": {
            "factor": {"anyOf": [{"type": "integer"}, {"type": "number"}]},
            "choice": {"oneOf": [{"type": "null"}, {"const": "only"}]},
            "fixed": {"const": 42},
            "note": {"type": ["null", "string"]},
        },
        "required": ["factor", "choice", "fixed", "note", ["not", "a", "name"]],
    }
    for seed in range(20):
        arguments = example_arguments(schema, random.Random(seed))
        assert isinstance(arguments["factor"], int | float)
        assert (arguments["choice"], arguments["fixed"]) == ("only", 42)
        assert isinstance(arguments["note"], str)
    for seed in range(5):
        generated = example_arguments(_scale.schema.parameters, random.Random(seed))
        assert validate(generated, _scale.schema.parameters) is None


# -- 11. a bounded call log ------------------------------------------------------------


async def test_mock_call_log_is_bounded() -> None:
    """``calls`` keeps the most recent ``max_calls`` calls; 1000 by default; ``None`` keeps all."""
    small, default, unbounded = MockServer(max_calls=3), MockServer(), MockServer(max_calls=None)
    for server, count in ((small, 5), (default, 1005), (unbounded, 1005)):
        for _ in range(count):
            await server.handle("POST", CHAT, {}, chat_body())
    assert [call.number for call in small.calls] == [2, 3, 4]
    assert len(default.calls) == 1000
    assert default.calls[0].number == 5
    assert len(unbounded.calls) == 1005
    assert small.statistics().requests == 5


def test_mock_reply_takes_its_tool_calls_as_any_sequence_and_stays_hashable() -> None:
    """A reply given a list of calls keeps a tuple of them, not the list as given, with
    which the frozen reply could not be hashed and would change with the caller's list."""
    calls = [MockToolCall("lookup", "{}")]
    reply = MockReply(tool_calls=calls)
    calls.append(MockToolCall("other", "{}"))
    assert reply.tool_calls == (MockToolCall("lookup", "{}"),)
    assert hash(reply) == hash(MockReply(tool_calls=(MockToolCall("lookup", "{}"),)))
