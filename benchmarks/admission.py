"""Admission control under random throttling: turns a second with and without a lane's floor.

N agents ask in a loop, through the OpenAI Chat adapter, the embedded mock
server answering a share of the requests 429 at random (with ``Retry-After``),
whatever the load: a provider that throttles at random, not by concurrency.
Throttled attempts are retried (up to six attempts). Each mode starts turns
for the same wall time (``--seconds``); the turns under way then run to their
end, which takes long where the limit has fallen, so a mode's ``wall_s`` is
that time and the drain after it, and ``turns_per_s`` is over ``wall_s``.
Each mode prints one JSON line:

* ``adaptive``: ``AdmissionLimits(max_concurrent=CAP)``, the limit free to fall;
* ``floor``: the same with ``min_concurrent=CAP // 2``;
* ``fixed``: ``min_concurrent=CAP``, a fixed cap (429s still pause the lane);
* ``off``: no admission control.

Each line gives its wall time, the turns a second, how the turns ended, the
lane's limit at the end and the requests the server saw; every session passes
the invariant checks. Wall-clock figures on a shared machine: compare modes of
one run. The agents and the server share one thread, which needs several
milliseconds of CPU a turn: ``cpu_s`` near ``wall_s`` (or near the share of a
core a busy machine leaves it) says that thread, not admission, set the pace.

    python -m benchmarks.admission --agents 200 --seconds 30 --rate 0.15 --cap 256
"""

from __future__ import annotations

import argparse
import collections
import sys
import time

import trio

import retinue
from retinue.providers.mock import EchoPolicy, FaultPolicy, Timing, open_mock_server
from retinue.providers.openai import OpenAIModel
from retinue.testing import check_session_invariants

from ._common import emit

MODES = ("adaptive", "floor", "fixed", "off")
# Each throttled attempt is retried, so a turn fails only when all six are throttled.
RETRY = retinue.RetryPolicy(base_delay=0.05, max_delay=1.0, max_attempts=6)


def _admission(mode: str, cap: int) -> retinue.AdmissionController | None:
    floors = {"adaptive": None, "floor": cap // 2, "fixed": cap}
    if mode == "off":
        return None
    limits = retinue.AdmissionLimits(max_concurrent=cap, min_concurrent=floors[mode])
    return retinue.AdmissionController(limits=limits)


async def run_mode(mode: str, agents: int, seconds: float, rate: float, cap: int) -> None:
    """One mode's run against a fresh mock server; prints its JSON line."""
    policy = FaultPolicy(EchoPolicy(chunks=8), rate=rate, kinds=("rate_limit",), retry_after=0.2)
    timing = Timing(latency=lambda random: random.uniform(0.2, 0.6), inter_chunk=0.003)
    ended: collections.Counter[str] = collections.Counter()
    admission = _admission(mode, cap)
    async with (
        open_mock_server(policy, timing=timing) as server,
        OpenAIModel(
            base_url=f"{server.base_url}/v1", api_key="k", max_connections=2 * agents
        ) as model,
        retinue.open_runtime(models=model, admission=admission, retry=RETRY) as rt,
    ):
        handles = [
            await rt.create_agent(f"a{i}", retinue.AgentOptions(model="m")) for i in range(agents)
        ]
        started, cpu = time.perf_counter(), time.process_time()

        async def ask_until_done(agent: retinue.Agent) -> None:
            while time.perf_counter() - started < seconds:
                ended[(await agent.ask("hello")).reason.kind] += 1

        async with trio.open_nursery() as nursery:
            for agent in handles:
                nursery.start_soon(ask_until_done, agent)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        for agent in handles:
            check_session_invariants(agent.session.events)
        limit = None if admission is None else admission.statistics().lanes[0].concurrency_limit
        served = server.statistics()
    emit(
        {
            "benchmark": "admission",
            "mode": mode,
            "agents": agents,
            "throttled_share": rate,
            "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 2),
            "turns_per_s": round(sum(ended.values()) / wall, 1),
            "ended": dict(ended),
            "limit_at_end": limit,
            "requests": served.requests,
            "throttled": served.faults,
        }
    )


def main(argv: list[str]) -> None:
    """Parse the options and run each mode in turn."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=0.15, help="share of requests throttled")
    parser.add_argument("--cap", type=int, default=256, help="max_concurrent of the lane")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    options = parser.parse_args(argv)
    for mode in options.modes:
        trio.run(run_mode, mode, options.agents, options.seconds, options.rate, options.cap)


if __name__ == "__main__":
    main(sys.argv[1:])
