"""Tool-call arguments sent back on later requests: one rule for every adapter (R9.6, R10.2).

The log keeps a model's arguments as they came, broken JSON included (R9.6).
Anthropic needs ``tool_use.input`` to be an object, and compatible Chat
Completions servers (vLLM, SGLang) parse ``function.arguments`` and refuse a
request holding broken JSON, so arguments that are not a JSON object go back
as ``{}`` everywhere.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

import pytest
import trio

import retinue
from retinue import AgentOptions, MemoryStore
from retinue._content import Message, Text, ToolCall, ToolResultBlock
from retinue.providers._anthropic_wire import anthropic_request_body
from retinue.providers._openai_chat import chat_request_body
from retinue.providers._openai_responses import responses_request_body
from retinue.providers.mock import EchoPolicy, MockServer
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec

from .support import WEATHER, collect, make_request, mock_adapter

VALID = '{"city": "Oslo"}'
NOT_AN_OBJECT = [
    '{"city": "Os',
    "",
    "   ",
    "[1, 2]",
    '"Oslo"',
    "null",
    '{"n": ' + "9" * (sys.get_int_max_str_digits() + 1) + "}",
    "[" * 100_000,
    '{"n": NaN}',
    '{"n": -Infinity}',
    '{"n": 1e400}',
]
NAMES = [
    "cut",
    "empty",
    "blank",
    "array",
    "string",
    "null",
    "long-integer",
    "deep",
    "nan",
    "infinity",
    "float-overflow",
]


def _history(arguments: str) -> list[Message]:
    return [
        Message("user", (Text("go"),)),
        Message("assistant", (ToolCall("c1", "lookup", arguments),)),
        Message("user", (ToolResultBlock("c1", (Text("Error: bad arguments"),), True),)),
    ]


def _sent(api: str, arguments: str) -> Any:
    """What the adapter sends for the call: arguments text (OpenAI) or the input object."""
    request = make_request(*_history(arguments))
    if api == "chat":
        messages: Any = chat_request_body(request)["messages"]
        return messages[1]["tool_calls"][0]["function"]["arguments"]
    if api == "responses":
        items: Any = responses_request_body(request)["input"]
        (call,) = [item for item in items if item.get("type") == "function_call"]
        return call["arguments"]
    turns: Any = anthropic_request_body(request)["messages"]
    return turns[1]["content"][0]["input"]


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("arguments", NOT_AN_OBJECT, ids=NAMES)
def test_arguments_that_are_not_a_json_object_go_back_as_an_empty_object(
    api: str, arguments: str
) -> None:
    """R9.6, R10.2: every adapter sends a call whose arguments hold no JSON object back with
    ``{}`` (text ``"{}"`` to the OpenAI APIs), so no later request carries broken JSON.
    """
    sent = _sent(api, arguments)
    assert sent == ({} if api == "messages" else "{}")


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_arguments_holding_a_number_json_cannot_write_are_sent(
    api: str, autojump_clock: trio.abc.Clock
) -> None:
    """R9.6: a model's ``NaN`` is logged as it came, but no body can carry it: the request
    goes out with ``{}`` for it instead of failing, on this step and every later one.
    """
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with mock_adapter(api, server) as model:
            await collect(model, make_request(*_history('{"n": NaN}')))
    assert "NaN" not in json.dumps(server.calls[0].body)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_arguments_holding_a_json_object_go_back_as_they_came(api: str) -> None:
    """R10.2: a call's JSON object arguments are sent back unchanged: the model's own text to
    the OpenAI APIs, the object it holds to Anthropic.
    """
    sent = _sent(api, VALID)
    assert sent == (json.loads(VALID) if api == "messages" else VALID)


ODD_NAMES = ["weather.lookup", "look up", "ns:tool/v1", "wetter_prüfen", "t" * 65]
"""Tool-call names the APIs would refuse in a tool definition, as a model may still send them."""


def _names_sent(api: str, body: Mapping[str, Any]) -> list[str]:
    """The names of the tool calls in the history *body* sends, in order."""
    if api == "chat":
        return [
            call["function"]["name"]
            for message in body["messages"]
            for call in message.get("tool_calls", ())
        ]
    if api == "responses":
        return [item["name"] for item in body["input"] if item.get("type") == "function_call"]
    return [
        block["name"]
        for turn in body["messages"]
        if isinstance(turn["content"], list)
        for block in turn["content"]
        if block["type"] == "tool_use"
    ]


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_replayed_tool_calls_keep_names_a_tool_definition_could_not_have(api: str) -> None:
    """R10.2, R11.15: calls a model made under names the pre-send check refuses for a tool
    definition (``INVALID_REQUEST``) go back unchanged after a resume: the provider took
    them then, and the history is not rewritten."""
    first = ScriptedModel(
        [
            CallTools([ToolCallSpec(name, id=f"c{i}") for i, name in enumerate(ODD_NAMES)]),
            Reply("ok"),
        ]
    )
    server = MockServer(EchoPolicy())
    with trio.fail_after(10):
        async with MemoryStore() as store:
            async with retinue.open_runtime(models=first, store=store) as rt:
                agent = await rt.create_agent("a", AgentOptions(model="m"), session_id="s")
                assert (await agent.ask("one")).reason.kind == "completed"
            async with (
                mock_adapter(api, server) as model,
                retinue.open_runtime(models=model, store=store) as rt,
            ):
                resumed = await rt.resume_agent("s")
                assert (await resumed.ask("two")).reason.kind == "completed"
    assert _names_sent(api, server.calls[0].body) == ODD_NAMES


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_history_tool_call_names_are_sent_as_they_are_logged(api: str) -> None:
    """R10.2: the wire body of each API carries a logged call's name as it is; only the
    tool definitions are checked, so a request holding both is built."""
    calls = tuple(ToolCall(f"c{i}", name, "{}") for i, name in enumerate(ODD_NAMES))
    results = tuple(ToolResultBlock(call.id, (Text("x"),), False) for call in calls)
    request = make_request(
        "go", Message("assistant", calls), Message("user", results), tools=[WEATHER]
    )
    build = {
        "chat": chat_request_body,
        "responses": responses_request_body,
        "messages": anthropic_request_body,
    }[api]
    assert _names_sent(api, build(request)) == ODD_NAMES
