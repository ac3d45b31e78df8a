"""The demo's tools and models: scripted, the embedded mock server, or a real service."""

from __future__ import annotations

import argparse
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

import retinue

if TYPE_CHECKING:
    from retinue.providers.anthropic import AnthropicModel
    from retinue.providers.openai import OpenAIModel

__all__ = ["lookup_weather", "open_model", "scripted_model", "write_note"]


@retinue.tool(parallel_safe=True)
async def lookup_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city name.
    """
    await trio.sleep(0.01)
    return f"{city}: {15 + len(city)}°C, light wind"


_NOTE_NUMBERS = itertools.count(1)
"""The notebook's line count, all that is read of it: the lines themselves, kept, would
hold every note of every run for as long as the process lives."""


@retinue.tool
def write_note(text: str) -> str:
    """Append a line to the shared notebook (exclusive: it writes).

    Args:
        text: The line to write.
    """
    del text  # only counted
    return f"noted ({next(_NOTE_NUMBERS)} lines)"


def scripted_model(latency: float) -> retinue.Model:
    from retinue.testing import ScriptedModel

    return ScriptedModel.tool_loop(
        ["lookup_weather", "lookup_weather", "write_note"],
        calls_per_step=3,
        answer_chunks=20,
        arguments={"lookup_weather": '{"city": "Lisbon"}', "write_note": '{"text": "checked"}'},
        delay=latency,
    )


@asynccontextmanager
async def open_model(args: argparse.Namespace) -> AsyncIterator[tuple[retinue.Model, str]]:
    """Yield the model to drive and the model name agents ask for."""
    if args.provider == "scripted":
        yield scripted_model(args.latency), "scripted"
        return
    if args.provider == "anthropic":
        from retinue.providers._urls import on_domain
        from retinue.providers.anthropic import AnthropicModel

        async with AnthropicModel(base_url=args.base_url) as anthropic_model:
            own = on_domain(anthropic_model.base_url, "anthropic.com")  # flag or variable
            hint = ANTHROPIC_KEY_HINT if own else ANTHROPIC_OTHER_HOST_HINT
            _require_credentials(anthropic_model, hint)
            yield anthropic_model, args.model or "claude-haiku-4-5"
        return
    from retinue.providers.openai import OpenAIModel

    if args.provider == "openai":
        async with OpenAIModel(base_url=args.base_url) as openai_model:
            _require_credentials(openai_model, OPENAI_KEY_HINT)
            yield openai_model, args.model or "gpt-4.1-mini"
        return
    from retinue.providers.mock import EchoPolicy, Timing, open_mock_server

    timing = Timing(latency=args.latency)
    policy = EchoPolicy(chunks=20, seed=args.seed)
    # No call kept: each holds its whole request, and a long demo's would pile up.
    async with (
        open_mock_server(policy, timing=timing, max_calls=0) as server,
        OpenAIModel(base_url=server.openai_base_url, api_key="mock-key") as mock_model,
    ):
        yield mock_model, "mock-model"


ANTHROPIC_KEY_HINT = (
    "set the ANTHROPIC_API_KEY environment variable "
    "(or ANTHROPIC_AUTH_TOKEN, or choose a profile with ANTHROPIC_PROFILE)"
)
ANTHROPIC_OTHER_HOST_HINT = (
    "set the ANTHROPIC_API_KEY environment variable (or ANTHROPIC_AUTH_TOKEN; "
    "an Anthropic profile serves Anthropic's own API alone)"
)
OPENAI_KEY_HINT = (
    "set the OPENAI_API_KEY environment variable (or --base-url for a server without keys)"
)


def _require_credentials(model: AnthropicModel | OpenAIModel, hint: str) -> None:
    """Refuse to start without credentials.

    Both adapters settle their credentials when built (Anthropic's client: a
    key or token, given or from the environment, a profile, workload identity
    federation) but refuse only per request, which would end every turn in the
    same error. The adapter reports what it found, so the SDK's rules are the
    only ones.
    """
    if not model.has_credentials:
        raise retinue.ConfigError(f"Missing credentials: {hint}")
