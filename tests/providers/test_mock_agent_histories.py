"""An agent's own histories keep tool calls paired: the mock server, which refuses a broken
pair as the real APIs do, answers every request of them (R9.21, R9.25, R11.16).

One session per wire format goes through parallel calls, a tool error, a max-tokens cut
holding a call, a cancel and a disposal each mid-tool (results made up for the calls
left), and resumes, each request sent by the real adapter.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, tool
from retinue.providers.mock import MockReply, MockServer, MockToolCall, ScriptedPolicy
from retinue.session import Event
from tests.helpers import of_type

from ._request_validity_kit import adapter

_ARGS = '{"city":"Oslo"}'
_OPTIONS = AgentOptions(model="m")


@tool(parallel_safe=True)
async def lookup(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    await trio.lowlevel.checkpoint()
    return f"{city}: sunny"


@tool(parallel_safe=True)
async def broken(city: str) -> str:
    """A tool that fails.

    Args:
        city: The city.
    """
    await trio.lowlevel.checkpoint()
    raise RuntimeError(f"no weather for {city}")


def _hang(running: list[trio.Event]) -> retinue.Tool:
    @tool
    async def hang(city: str) -> str:
        """A tool that never ends.

        Args:
            city: The city.
        """
        running[-1].set()
        await trio.sleep(math.inf)
        return city

    return hang


def _calls(*names: str) -> MockReply:
    return MockReply(tool_calls=tuple(MockToolCall(name, _ARGS) for name in names))


_REPLIES = (
    _calls("lookup", "broken"),
    MockReply(text="one sunny, one failed"),
    MockReply(text="cut", tool_calls=(MockToolCall("lookup", _ARGS),), finish="length"),
    MockReply(text="after the cut"),
    _calls("hang", "lookup"),
    MockReply(text="after the cancel"),
    _calls("hang", "lookup"),
    MockReply(text="after the disposal"),
)


async def _stopped_mid_tool(
    agent: retinue.Agent, running: list[trio.Event], *, dispose: bool
) -> None:
    running.append(trio.Event())
    agent.send("hang")
    await running[-1].wait()
    if dispose:
        await agent.dispose()
    else:
        agent.cancel("enough")
        await agent.wait_idle()


async def _session(api: str, server: MockServer) -> tuple[list[str], list[Event]]:
    kinds: list[str] = []
    running = [trio.Event()]
    async with (
        adapter(api, server) as model,
        retinue.open_runtime(models=model, tools=[lookup, broken, _hang(running)]) as rt,
    ):
        agent = await rt.create_agent("a", _OPTIONS, session_id="s")
        kinds += [(await agent.ask(p)).reason.kind for p in ("weather?", "more", "go on")]
        await _stopped_mid_tool(agent, running, dispose=False)
        kinds.append((await agent.ask("again")).reason.kind)
        await _stopped_mid_tool(agent, running, dispose=True)
        agent = await rt.resume_agent("s", _OPTIONS)
        kinds.append((await agent.ask("still there?")).reason.kind)
        return kinds, list(agent.session.events)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_an_agents_histories_pass_the_mock_pairing_check(
    api: str, autojump_clock: trio.testing.MockClock
) -> None:
    """Every request of the session is answered: none breaks a pair the API would refuse."""
    server = MockServer(ScriptedPolicy(_REPLIES))
    with trio.fail_after(60):
        kinds, events = await _session(api, server)
    assert kinds == ["completed", "max-tokens", "completed", "completed", "completed"]
    assert len(server.calls) == len(_REPLIES)
    results: list[Any] = [e.data for e in of_type(events, "tool/result")]
    assert [r.is_error for r in results] == [False, True, True, True, True, True]
    ends: list[Any] = [e.data for e in of_type(events, "turn/end")]
    assert [e.reason.kind for e in ends] == [
        "completed",
        "max-tokens",
        "completed",
        "aborted",
        "completed",
        "disposed",
        "completed",
    ]
