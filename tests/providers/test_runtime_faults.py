"""Real adapters under the runtime: faults, retries and aborts, on the virtual clock.

The mock server runs in-process (its httpx2 transport), so the whole exchange
is on trio's virtual clock.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest
import trio

import retinue
from retinue import AgentOptions
from retinue.providers import RetryNotice, RetryPolicy, manage
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import (
    FAULT_KINDS,
    EchoPolicy,
    Endless,
    FaultPolicy,
    MockServer,
    ScriptedPolicy,
)
from retinue.providers.openai import OpenAIModel

AGENTS = 200
TURNS = 5


@retinue.tool(parallel_safe=True)
async def lookup(city: str) -> str:
    """Weather for a city (async: a sync tool would run in a thread, outside virtual time)."""
    await trio.sleep(0.1)
    return f"sunny in {city}"


# Anthropic runs without tools (one step per turn) to keep the suite fast; the
# fault paths are the same.
@pytest.mark.parametrize(("provider", "tools"), [("openai", True), ("anthropic", False)])
async def test_runtime_turns_end_under_ten_percent_faults(
    autojump_clock: trio.abc.Clock, provider: str, tools: bool
) -> None:
    """200 agents x 5 turns with 10% faults of every kind: each turn completes or errors with a code."""
    policy = FaultPolicy(EchoPolicy(chunks=4), rate=0.1, kinds=FAULT_KINDS, retry_after=1.5, seed=3)
    server = MockServer(policy)
    notices: list[RetryNotice] = []
    with trio.fail_after(3600):
        async with AsyncExitStack() as stack:
            adapter: OpenAIModel | AnthropicModel
            if provider == "openai":
                adapter = OpenAIModel(
                    transport=server.transport(), base_url="http://mock/v1", timeout=5.0
                )
            else:
                adapter = AnthropicModel(
                    transport=server.transport(), base_url="http://mock", timeout=5.0
                )
            await stack.enter_async_context(adapter)
            model = manage(
                adapter, retry=RetryPolicy(max_attempts=4, base_delay=0.2), on_retry=notices.append
            )
            rt = await stack.enter_async_context(
                retinue.open_runtime(models=model, tools=[lookup] if tools else [])
            )
            agents = [
                await rt.create_agent(f"a{i}", AgentOptions(model="m")) for i in range(AGENTS)
            ]
            ends: list[retinue.TurnResult] = []

            async def drive(agent: retinue.Agent) -> None:
                for turn in range(TURNS):
                    ends.append(await agent.ask(f"turn {turn}: weather in Oslo?"))

            async with trio.open_nursery() as nursery:
                for agent in agents:
                    nursery.start_soon(drive, agent)
            assert len(ends) == AGENTS * TURNS
            kinds = {result.reason.kind for result in ends}
            assert kinds <= {"completed", "error"}
            errors = [result.reason for result in ends if result.reason.kind == "error"]
            assert all(reason.code for reason in errors)
            assert "completed" in kinds
            assert set(policy.injected) == set(FAULT_KINDS)
            throttled = [n for n in notices if n.status in (429, 529)]
            assert throttled
            assert all(n.delay == 1.5 for n in throttled)
            assert model.statistics().retries == len(notices)
            policy.rate = 0.0
            for agent in agents:
                assert agent.status == "idle"
            finals = [await agent.ask("still there?") for agent in agents[:20]]
            assert {result.reason.kind for result in finals} == {"completed"}


async def test_runtime_abort_closes_endless_stream_within_a_virtual_second(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Cancelling a turn streaming forever closes the HTTP stream and ends the turn aborted."""
    server = MockServer(ScriptedPolicy([Endless(0.1)]))
    with trio.fail_after(120):
        async with (
            OpenAIModel(transport=server.transport(), base_url="http://mock/v1") as model,
            retinue.open_runtime(models=model) as rt,
        ):
            agent = await rt.create_agent("a", AgentOptions(model="m"))
            agent.send("go on forever")
            await trio.sleep(5.0)
            assert server.statistics().streams_started == 1
            assert server.statistics().streams_aborted == 0
            cancelled_at = trio.current_time()
            agent.cancel("enough")
            await agent.wait_idle()
            assert trio.current_time() - cancelled_at < 1.0
            assert server.statistics().streams_aborted == 1
            ends = [e for e in agent.session.events if e.type == "turn/end"]
            assert ends[-1].data.reason.kind == "aborted"  # type: ignore[union-attr]
            chunks = [e for e in agent.session.events if e.type == "assistant/chunk"]
            assert len(chunks) >= 40
