"""A real Ctrl-C ends a program whose mock server policy (or ``Timing`` function) runs
without end: its loop does not hold Ctrl-C back, and the turn waiting on it is stored
``disposed``, not as a stream the server cut (R12.10)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.providers._mock_interrupted_kit import REPORT, ROOT, assert_reported_disposed

EXIT_WITHIN = 10.0
"""Seconds the process gets to exit after SIGINT: loaded machines run it slowly."""

# An agent asks the server through the OpenAI adapter; its policy (or latency function,
# as the argument says) answers the first call, then says so on stdout and loops without
# end, in a connection task. SIGINT raises KeyboardInterrupt, as in a terminal, even
# where the test runs with it ignored.
PROGRAM = """
import signal, sys
import trio, retinue
from retinue import AgentOptions
from retinue.providers.mock import EchoPolicy, Timing, open_mock_server
from retinue.providers.openai import OpenAIModel

signal.signal(signal.SIGINT, signal.default_int_handler)
echo = EchoPolicy(chunks=5)
calls = []


def busy():
    calls.append(None)
    if len(calls) > 1:
        print("looping", flush=True)
        while True:
            pass


def policy(call):
    busy()
    return echo(call)


def latency(_rng):
    busy()
    return 0.001


async def main(agents):
    timed = sys.argv[1] == "timing"
    timing = Timing(latency=latency) if timed else None
    async with open_mock_server(echo if timed else policy, timing=timing) as server:
        async with OpenAIModel(base_url=server.openai_base_url, api_key="k") as model:
            async with retinue.open_runtime(models=model) as rt:
                agents.append(await rt.create_agent("a", AgentOptions(model="m")))
                while True:
                    await agents[0].ask("What's the weather in Oslo?")


"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT is a POSIX signal")
@pytest.mark.parametrize("looping", ["policy", "timing"])
def test_ctrl_c_ends_a_program_whose_policy_loops_without_end(looping: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with subprocess.Popen(
        [sys.executable, "-c", PROGRAM + REPORT, looping],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline() == "looping\n"
        child.send_signal(signal.SIGINT)
        try:
            out, err = child.communicate(timeout=EXIT_WITHIN)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            pytest.fail(f"the process ignored SIGINT for {EXIT_WITHIN} s")
    # The ask whose call the policy held is ended by Ctrl-C, not cut by the server.
    assert_reported_disposed(out, err)
