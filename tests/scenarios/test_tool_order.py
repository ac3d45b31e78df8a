"""Canonical tool order in the request header (SPEC R7.51, R8.4; the tool-order checklist)."""

from __future__ import annotations

import trio
import trio.testing

import retinue
from retinue.testing import Reply, ScriptedModel, check_session_invariants
from retinue.tools import Tool
from tests.helpers import OPTIONS, of_type, runtime, types_without_chunks


def _tool(name: str) -> Tool:
    async def body() -> str:
        await trio.lowlevel.checkpoint()
        return name

    return Tool(name, f"The {name} tool.", {"type": "object", "properties": {}}, body)


A, B, C, D = (_tool(name) for name in "abcd")


async def _request_tool_names(tools: list[Tool], tool_order: list[str] | None = None) -> list[str]:
    model = ScriptedModel([Reply("ok")])
    async with runtime(model, tools=tools, tool_order=tool_order) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hi")
        assert result.reason.kind == "completed"
        header = agent.session.current_header
        assert header is not None
        names = [t.name for t in model.requests[0].tools]
        assert [t.name for t in header.tools] == names
        return names


async def test_tool_order_is_canonical_regardless_of_registration_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Tool order / R7.51: without a configured order the header lists tools by name, however registered."""
    assert await _request_tool_names([D, B, A, C]) == ["a", "b", "c", "d"]
    assert await _request_tool_names([A, C, B, D]) == ["a", "b", "c", "d"]


async def test_tool_order_configured_order_is_honoured_with_a_rest_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Tool order / R7.51: listed names keep their place; the rest fill ``"*"`` sorted by name."""
    assert await _request_tool_names([A, B, C, D], ["b", "*", "a"]) == ["b", "c", "d", "a"]
    assert await _request_tool_names([D, C, B, A], ["c", "a"]) == ["c", "a", "b", "d"]


async def test_tool_order_scoped_tools_fill_the_rest_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Tool order / R7.51: an agent's scoped tools join its view in the ``"*"`` slot, invisible to others."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model, tools=[A, B], tool_order=["b", "*", "a"]) as rt:
        scoped = await rt.create_agent("scoped", OPTIONS)
        plain = await rt.create_agent("plain", OPTIONS)
        rt.tools.add(C, agent=scoped)
        await scoped.ask("hi")
        await plain.ask("hi")
        first, second = model.requests
        assert [t.name for t in first.tools] == ["b", "c", "a"]
        assert [t.name for t in second.tools] == ["b", "a"]


async def test_tool_order_unknown_name_fails_the_turn_before_any_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Tool order / R7.51: an unknown name in the configured order ends the turn ``error``; no request is made."""
    model = ScriptedModel([Reply("never")])
    async with runtime(model, tools=[A, B], tool_order=["b", "nope", "*"]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        errors: list[BaseException] = []
        rt.hooks.on("agent/error", lambda _a, _t, _s, error: errors.append(error), agent=agent)
        result = await agent.ask("hi")
        assert result.reason.kind == "error"
        assert result.reason.code == "INVALID_CONFIG"
        assert "nope" in (result.reason.message or "")
        assert model.requests == []
        events = agent.session.events
        assert of_type(events, "request/header") == []
        assert of_type(events, "assistant/chunk") == []
        assert types_without_chunks(events)[-2:] == ["step/end", "turn/end"]
        assert len(errors) == 1
        assert isinstance(errors[0], retinue.ConfigError)
        check_session_invariants(events)
