"""A real Ctrl-C coming while the embedded mock server's connection task runs ends the
runtime as one coming anywhere else does: every turn in flight is stored ``disposed``, none
as a stream the server cut (R12.10)."""

from __future__ import annotations

import sys

import pytest

from tests.providers._mock_interrupted_kit import assert_every_turn_in_flight_disposed

# Twenty agents stream from the server through the OpenAI adapter; its policy's thirtieth
# call sends the process SIGINT, handled as a terminal's Ctrl-C is, in a connection task.
PROGRAM = """
import signal
import trio, retinue
from retinue import AgentOptions
from retinue.providers.mock import EchoPolicy, Timing, open_mock_server
from retinue.providers.openai import OpenAIModel

signal.signal(signal.SIGINT, signal.default_int_handler)
echo = EchoPolicy(chunks=50)
calls = []


def policy(call):
    calls.append(call)
    if len(calls) == 30:
        signal.raise_signal(signal.SIGINT)
    return echo(call)


async def ask_on(agent):
    while True:
        await agent.ask("What's the weather in Oslo?")


async def main(agents):
    async with open_mock_server(policy, timing=Timing(inter_chunk=0.01)) as server:
        async with OpenAIModel(base_url=server.openai_base_url, api_key="k") as model:
            async with retinue.open_runtime(models=model) as rt:
                for index in range(20):
                    agents.append(await rt.create_agent(f"a{index}", AgentOptions(model="m")))
                async with trio.open_nursery() as nursery:
                    for agent in agents:
                        nursery.start_soon(ask_on, agent)


"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is a POSIX signal")
def test_ctrl_c_in_a_connection_task_leaves_every_turn_in_flight_disposed() -> None:
    assert_every_turn_in_flight_disposed(PROGRAM)
