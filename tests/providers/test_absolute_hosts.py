"""A provider's host written in its absolute form, with the final dot (``api.openai.com.``),
is that provider's host: DNS resolves both alike, and the adapters treat both alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from retinue._content import Message, Reasoning, Text, ToolCall, ToolResultBlock
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import EchoPolicy, MockServer
from retinue.providers.openai import OpenAIModel
from tests.helpers import ANTHROPIC_CREDENTIAL_VARIABLES

from .support import collect, make_request

CREDENTIAL_VARIABLES = ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", *ANTHROPIC_CREDENTIAL_VARIABLES)

# A tool loop of DeepSeek's thinking mode: its reasoning, its call, the call's result.
_REASONED_CALL = (
    Message("user", (Text("hi"),)),
    Message("assistant", (Reasoning("thinking"), ToolCall("call_1", "lookup", "{}"))),
    Message("user", (ToolResultBlock("call_1", (Text("sunny"),)),)),
)


@pytest.mark.parametrize(
    "build",
    [
        lambda: OpenAIModel(base_url="https://api.openai.com./v1"),
        lambda: AnthropicModel(base_url="https://api.anthropic.com."),
    ],
    ids=["openai", "anthropic"],
)
async def test_the_providers_own_host_with_its_final_dot_gets_no_placeholder_key(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    build: Callable[[], OpenAIModel | AnthropicModel],
) -> None:
    """Without a key, an adapter for the provider's own API says it has no credentials (its
    requests then fail MISSING_CREDENTIALS before they are sent); written with the final
    dot, the host does not take the placeholder key of a local server, which the API
    refuses with a 401 on every request."""
    for name in CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no Anthropic profile on disk
    async with build() as model:
        assert model.has_credentials is False


async def test_openais_host_with_its_final_dot_gets_max_completion_tokens() -> None:
    """OpenAI's own API gets ``max_completion_tokens`` however its host is written; with the
    final dot it does not get ``max_tokens``, which OpenAI's newer models refuse."""
    server = MockServer(EchoPolicy())
    adapter = OpenAIModel(
        transport=server.transport(), base_url="https://api.openai.com./v1", api_key="k"
    )
    with trio.fail_after(5):
        async with adapter as model:
            await collect(model, make_request("hi", max_tokens=50))
    assert {key for key in server.calls[0].body if "max" in key} == {"max_completion_tokens"}


async def test_deepseeks_host_with_its_final_dot_gets_its_reasoning_back() -> None:
    """DeepSeek's host, however written, turns on the replay of reasoning its thinking mode
    requires after a tool call; with the final dot it does not stay off, which would have
    DeepSeek refuse the request that follows a reasoned tool call."""
    server = MockServer(EchoPolicy())
    adapter = OpenAIModel(
        transport=server.transport(), base_url="https://api.deepseek.com./v1", api_key="k"
    )
    with trio.fail_after(5):
        async with adapter as model:
            assert model.has_credentials
            await collect(model, make_request(*_REASONED_CALL))
    messages = server.calls[0].body["messages"]
    assert isinstance(messages, list)
    assistant = [m for m in messages if m["role"] == "assistant"]
    assert assistant[0]["reasoning_content"] == "thinking"
