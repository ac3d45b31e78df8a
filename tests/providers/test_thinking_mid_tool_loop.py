"""Thinking and tool loops: a tool loop is one assistant turn and keeps the thinking
setting it began with, and the model thinks before its first tool call only. The Messages
API holds a request to the turn's first assistant message (the first after the last user
message holding more than tool results): with thinking on, it refuses tool results within
a turn whose first message does not start with a thinking block.

The adapter sends such a request (a turn switched to Anthropic mid-loop) without thinking
(and so with the temperature and a ``max_tokens`` not above the budget), thinking again
from the next turn; a turn begun with thinking keeps it at every step; the mock server
refuses and accepts as the API does.
"""

from __future__ import annotations

from typing import Any

import attrs
import httpx2
import trio
import trio.testing

import retinue
from retinue import AgentOptions, tool
from retinue._content import Message, Reasoning, RedactedReasoning, Text, ToolCall, ToolResultBlock
from retinue._request import LlmCallConfig, MessageHistory, ModelRequest
from retinue.providers import ModelRouter
from retinue.providers._anthropic_wire import anthropic_request_body
from retinue.providers.mock import MockReply, MockServer, MockToolCall, ScriptedPolicy

from ._request_validity_kit import adapter
from .support import make_request

_BUDGET = {"type": "enabled", "budget_tokens": 1024}
_CONFIG = LlmCallConfig("claude")


@tool
async def lookup(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    await trio.lowlevel.checkpoint()
    return f"{city}: sunny"


def _switch_at_step_two(agent: Any, turn: int, step: int, config: Any, proceed: Any) -> Any:
    """The first turn's step after its tool call, and every later turn, go to Anthropic
    with thinking on."""
    del agent, proceed
    switched = turn > 1 or step > 1
    return attrs.evolve(config, provider="anthropic", model="claude") if switched else config


async def test_a_tool_loop_switched_into_thinking_completes_and_thinks_from_the_next_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Step 1 on Chat Completions calls a tool; step 2 goes to Anthropic with thinking on
    and is answered (sent without thinking); the next turn on Anthropic thinks again."""
    replies = [
        MockReply(tool_calls=(MockToolCall("lookup", '{"city": "Oslo"}'),)),
        MockReply(text="Oslo is sunny."),
        MockReply(text="Still sunny.", reasoning="checked"),
    ]
    server = MockServer(ScriptedPolicy(replies))
    with trio.fail_after(30):
        async with (
            adapter("chat", server) as chat,
            adapter("messages", server, thinking_budget=1024) as claude,
        ):
            router = ModelRouter.of({("openai", "gpt"): chat, ("anthropic", "claude"): claude})
            async with retinue.open_runtime(models=router, tools=[lookup]) as rt:
                rt.hooks.on("agent/request", _switch_at_step_two)
                agent = await rt.create_agent("a", AgentOptions(provider="openai", model="gpt"))
                first = await agent.ask("Weather in Oslo?")
                second = await agent.ask("And now?")
    assert (first.reason.kind, first.text) == ("completed", "Oslo is sunny.")
    assert (second.reason.kind, second.text) == ("completed", "Still sunny.")
    mid_loop: Any = server.calls[1].body
    next_turn = server.calls[2].body
    assert mid_loop["messages"][-1]["content"][0]["type"] == "tool_result"
    assert "thinking" not in mid_loop
    assert next_turn["thinking"] == _BUDGET


def _loop(*first_blocks: Any) -> list[Message]:
    call = ToolCall("c1", "lookup", '{"city": "Oslo"}')
    return [
        Message("user", (Text("Weather in Oslo?"),)),
        Message("assistant", (*first_blocks, call)),
        Message("user", (ToolResultBlock("c1", (Text("Oslo: sunny"),)),)),
    ]


def test_thinking_is_left_out_beside_a_loop_begun_without_it_with_what_goes_with_it() -> None:
    """The request goes as without thinking: its temperature is sent, and a ``max_tokens``
    not above the budget is no refusal."""
    request = attrs.evolve(make_request(*_loop(), temperature=0.5, max_tokens=512), system=None)
    body = anthropic_request_body(request, thinking_budget=1024)
    assert "thinking" not in body
    assert (body["temperature"], body["max_tokens"]) == (0.5, 512)


def test_thinking_stays_beside_a_loop_begun_with_it() -> None:
    """An assistant message that starts with signed thinking keeps thinking on."""
    request = make_request(*_loop(Reasoning("hmm", signature="sig")), temperature=0.5)
    body: Any = anthropic_request_body(request, thinking_budget=1024)
    assert body["thinking"] == _BUDGET
    assert "temperature" not in body
    assert body["messages"][1]["content"][0]["type"] == "thinking"


def test_thinking_stays_for_a_new_prompt_after_a_turn_without_it() -> None:
    """A user prompt after the loop starts a new turn: thinking is on again."""
    history = [*_loop(), Message("assistant", (Text("Sunny."),)), Message("user", (Text("ok"),))]
    body = anthropic_request_body(make_request(*history), thinking_budget=1024)
    assert body["thinking"] == _BUDGET


async def test_the_mock_server_refuses_thinking_beside_a_loop_begun_without_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """As the API does: a 400 ``invalid_request_error`` naming the assistant message."""
    server = MockServer(ScriptedPolicy([MockReply(text="never")]))
    messages = [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "lookup", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "sunny"}],
        },
    ]
    body = {"model": "m", "max_tokens": 2048, "thinking": _BUDGET, "messages": messages}
    with trio.fail_after(5):
        async with httpx2.AsyncClient(transport=server.transport(), base_url="http://m") as client:
            refused = await client.post("/v1/messages", json=body)
            accepted = await client.post(
                "/v1/messages", json={**body, "thinking": {"type": "disabled"}}
            )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`tool_use`. When `thinking` is enabled, a final `assistant` message must start with "
        "a thinking block"
    )
    assert accepted.status_code == 200
    assert len(server.calls) == 1


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


def _steps_then_requests(first: tuple[Any, ...], later: tuple[Any, ...]) -> list[dict[str, Any]]:
    """The body of each step's request of a 30-step loop whose first message starts with
    *first* and each later one with *later*, each built on the requests before it."""
    history = [Message("user", (Text("Weather?"),))]
    derived: dict[object, object] = {}
    bodies = []
    for step in range(30):
        call = ToolCall(f"c{step}", "lookup", '{"city": "Oslo"}')
        history.append(Message("assistant", (*(later if step else first), call)))
        history.append(Message("user", (ToolResultBlock(call.id, (Text("sunny"),)),)))
        shared = MessageHistory(history, len(history), derived=derived)
        bodies.append(anthropic_request_body(ModelRequest(_CONFIG, shared), thinking_budget=1024))
    return bodies


def test_every_step_of_a_long_loop_keeps_the_setting_its_first_message_began_with() -> None:
    """A loop begun without thinking goes without it at every step, though its later
    messages start with thinking; one begun with thinking keeps it at every step, though
    its later messages start with a call: the turn's first message is remembered from
    request to request, not looked for again."""
    thinking = (Reasoning("hmm", signature="sig"),)
    assert all("thinking" not in body for body in _steps_then_requests((), thinking))
    kept = _steps_then_requests(thinking, ())
    assert all(body.get("thinking") == _BUDGET for body in kept)
