"""A turn with thinking on thinks before its first tool call only: its later assistant
messages start with a tool call, and the Messages API accepts thinking beside them. The
rule the API holds a request to is on the turn's first assistant message (the first after
the last user message holding more than tool results), so a loop that stays on Anthropic
keeps thinking at every step, and the mock server accepts what the API accepts.
"""

from __future__ import annotations

from typing import Any

import httpx2
import trio
import trio.testing

import retinue
from retinue import AgentOptions, tool
from retinue._content import Message, Reasoning, RedactedReasoning, Text, ToolCall, ToolResultBlock
from retinue.providers._anthropic_wire import anthropic_request_body
from retinue.providers.mock import MockReply, MockServer, MockToolCall, ScriptedPolicy

from ._request_validity_kit import adapter
from .support import make_request

_BUDGET = {"type": "enabled", "budget_tokens": 1024}


@tool
async def lookup(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    await trio.lowlevel.checkpoint()
    return f"{city}: sunny"


async def test_a_loop_on_anthropic_thinks_at_every_step_of_its_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Three steps, thinking only before the first call: every request carries thinking
    and no temperature, and the turn completes (its third request went without thinking
    and with the temperature, toggling the setting within the turn)."""
    replies = [
        MockReply(reasoning="plan", tool_calls=(MockToolCall("lookup", '{"city": "Oslo"}'),)),
        MockReply(tool_calls=(MockToolCall("lookup", '{"city": "Bergen"}'),)),
        MockReply(text="Both sunny."),
    ]
    server = MockServer(ScriptedPolicy(replies))
    with trio.fail_after(30):
        async with (
            adapter("messages", server, thinking_budget=1024) as claude,
            retinue.open_runtime(models=claude, tools=[lookup]) as rt,
        ):
            options = AgentOptions(model="claude", temperature=0.3)
            agent = await rt.create_agent("a", options)
            result = await agent.ask("Weather in Oslo and Bergen?")
    assert (result.reason.kind, result.text) == ("completed", "Both sunny.")
    bodies: list[Any] = [call.body for call in server.calls]
    assert len(bodies) == 3
    assert [body.get("thinking") for body in bodies] == [_BUDGET] * 3
    assert all("temperature" not in body for body in bodies)
    assert bodies[2]["messages"][3]["content"][0]["type"] == "tool_use"


def _two_steps(*first_blocks: Any) -> list[Message]:
    first, second = ToolCall("c1", "lookup", "{}"), ToolCall("c2", "lookup", "{}")
    return [
        Message("user", (Text("Weather?"),)),
        Message("assistant", (*first_blocks, first)),
        Message("user", (ToolResultBlock("c1", (Text("sunny"),)),)),
        Message("assistant", (second,)),
        Message("user", (ToolResultBlock("c2", (Text("sunny"),)),)),
    ]


def test_thinking_stays_when_the_turn_began_with_redacted_thinking() -> None:
    """Redacted thinking opens a turn as thinking does."""
    request = make_request(*_two_steps(RedactedReasoning("opaque")))
    assert anthropic_request_body(request, thinking_budget=1024)["thinking"] == _BUDGET


def test_thinking_is_left_out_when_the_turn_began_without_it() -> None:
    """Its first assistant message starts with text: thinking is left out at every step,
    the later one starting with a tool call or not."""
    for blocks in [(Text("Let me look."),), ()]:
        body = anthropic_request_body(make_request(*_two_steps(*blocks)), thinking_budget=1024)
        assert "thinking" not in body


def test_thinking_stays_when_the_turn_began_with_signed_thinking() -> None:
    """The turn's first message thinks; its second starts with a tool call."""
    request = make_request(*_two_steps(Reasoning("hmm", signature="sig")))
    assert anthropic_request_body(request, thinking_budget=1024)["thinking"] == _BUDGET


def _raw(first: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A two-step loop as an SDK sends it, the turn's first assistant content *first*."""
    use = {"type": "tool_use", "name": "lookup", "input": {}}
    return [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [*first, {**use, "id": "c1"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1"}]},
        {"role": "assistant", "content": [{**use, "id": "c2"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c2"}]},
    ]


async def test_the_mock_server_holds_the_turns_first_message_to_the_rule(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A turn begun with thinking is accepted beside its later call (refused before,
    naming ``messages.3``); one begun without is refused naming ``messages.1``."""
    thinking = {"type": "thinking", "thinking": "plan", "signature": "sig"}
    server = MockServer(ScriptedPolicy([MockReply(text="ok")]))
    body = {"model": "m", "max_tokens": 2048, "thinking": _BUDGET}
    with trio.fail_after(5):
        async with httpx2.AsyncClient(transport=server.transport(), base_url="http://m") as client:
            accepted = await client.post(
                "/v1/messages", json={**body, "messages": _raw([thinking])}
            )
            refused = await client.post("/v1/messages", json={**body, "messages": _raw([])})
    assert accepted.status_code == 200
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("messages.1.content.0.type: Expected")
