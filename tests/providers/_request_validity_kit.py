"""Histories and the body an adapter sends for them, for the request validity modules."""

from __future__ import annotations

from typing import Any

import trio

from retinue._content import Message, Reasoning, Text, ToolCall, ToolResultBlock
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import EchoPolicy, MockServer
from retinue.providers.openai import OpenAIModel

from .support import collect, make_request


def adapter(api: str, server: MockServer, **options: Any) -> OpenAIModel | AnthropicModel:
    if api == "messages":
        return AnthropicModel(transport=server.transport(), api_key="k", **options)
    return OpenAIModel(
        transport=server.transport(),
        api_key="k",
        api=api,  # type: ignore[arg-type]
        **options,
    )


async def sent_body(api: str, *history: Message | str, **options: Any) -> Any:
    """The body *api*'s adapter sends for *history*, as the mock server received it."""
    server = MockServer(EchoPolicy())
    with trio.fail_after(5):
        async with adapter(api, server, **options) as model:
            await collect(model, make_request(*history))
    return server.calls[0].body


def tool_turn(*results: ToolResultBlock, reasoning: str | None = None) -> list[Message]:
    """A prompt, an assistant turn calling one tool per result, and one message per result."""
    calls = tuple(ToolCall(r.tool_call_id, "lookup", '{"city":"Oslo"}') for r in results)
    thought = () if reasoning is None else (Reasoning(reasoning),)
    return [
        Message("user", (Text("weather?"),)),
        Message("assistant", thought + calls),
        *(Message("user", (result,)) for result in results),
    ]
