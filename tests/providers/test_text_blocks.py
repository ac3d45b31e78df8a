"""Several text blocks in one message reach the OpenAI APIs apart, a line each, not run together.

Anthropic gets each block as a block of its own; the OpenAI adapters send one
string, as they do for a single block, with a line break between blocks.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

from retinue._content import Message, Text, ToolCall, ToolResultBlock
from retinue.providers._anthropic_wire import anthropic_request_body
from retinue.providers._openai_chat import chat_request_body
from retinue.providers._openai_responses import responses_request_body
from retinue.providers.mock import EchoPolicy, MockServer

from .support import collect, make_request, mock_adapter

HISTORY = (
    Message("user", (Text("List the files."), Text("Then count them."))),
    Message("assistant", (Text("Listing."), Text("One call."), ToolCall("c1", "ls", "{}"))),
    Message("user", (ToolResultBlock("c1", (Text("a.py"), Text(""), Text("b.py"))),)),
    Message("system", (Text("Be brief."), Text("Use English."))),
    # The R5.2 envelope of a context message of two pieces.
    Message("user", (Text('<context source="plugin">'), Text("a"), Text("b"), Text("</context>"))),
)
ENVELOPE = '<context source="plugin">\na\nb\n</context>'


def test_chat_sends_each_text_block_of_a_message_on_a_line_of_its_own() -> None:
    """User, tool, assistant and system messages of several text blocks are one string
    each, the blocks a line apart (empty blocks add no line); the R5.2 ``<context>``
    envelope stays one string too."""
    messages: Any = chat_request_body(make_request(*HISTORY))["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "List the files.\nThen count them."),
        ("assistant", "Listing.\nOne call."),
        ("tool", "a.py\nb.py"),
        ("system", "Be brief.\nUse English."),
        ("user", ENVELOPE),
    ]


def test_responses_sends_each_text_block_of_a_message_on_a_line_of_its_own() -> None:
    """The Responses input: user messages, function outputs, assistant replays and
    developer messages of several text blocks are one string each, a line per block."""
    items: Any = responses_request_body(make_request(*HISTORY))["input"]
    assert [item.get("content", item.get("output")) for item in items] == [
        "List the files.\nThen count them.",
        "Listing.\nOne call.",
        None,  # the function call
        "a.py\nb.py",
        "Be brief.\nUse English.",
        ENVELOPE,
    ]


def test_anthropic_joins_the_text_blocks_of_a_system_message_a_line_apart() -> None:
    """A system message in the history becomes part of Anthropic's ``system`` string: its
    text blocks a line apart, after the request's system prompt."""
    request = attrs.evolve(make_request(*HISTORY), system="Be kind.")
    body: Any = anthropic_request_body(request, default_max_tokens=100)
    assert body["system"] == "Be kind.\n\nBe brief.\nUse English."


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_tool_result_of_several_text_blocks_reaches_the_server_a_line_each(
    api: str,
) -> None:
    """Over HTTP: the mock server receives a tool's two text blocks as two lines."""
    history = [
        Message("user", (Text("List the files."),)),
        Message("assistant", (ToolCall("c1", "ls", "{}"),)),
        Message("user", (ToolResultBlock("c1", (Text("a.py"), Text("b.py"))),)),
    ]
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with mock_adapter(api, server) as model:
            await collect(model, make_request(*history))
    body: Any = server.calls[0].body
    result = body["messages"][-1]["content"] if api == "chat" else body["input"][-1]["output"]
    assert result == "a.py\nb.py"
