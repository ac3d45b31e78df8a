"""HTTP benchmark: N agents streaming through the provider adapters from the mock server.

The mock server runs in a child process, so the CPU time measured here is the
client's alone. Each agent count prints one JSON line: steps per second and
client CPU microseconds per streamed chunk, for a raw httpx2 SSE client (the
floor), the OpenAI adapter and the Anthropic adapter, in the same run. The
floor's client runs on the adapters' own connection pools (retinue's
``ShardedTransport``), so ``vs_floor`` is what the SDKs and the adapters add
above the transport, not the cost of the pools, which both sides pay.

One run per figure is at the mercy of this noisy machine, so each client is
measured R times (``--repeats R``, default 3), the three clients running in
turn and the order reversed every other repeat (floor, OpenAI, Anthropic,
then Anthropic, OpenAI, floor, ...). Every figure is the median over the
repeats; ``vs_floor`` is the median of the per-repeat ratios to the floor's
CPU per chunk, listed in ``vs_floor_repeats``. Each client is opened and
warmed up afresh for every repeat.

    python -m benchmarks.http --agents 100 1000 --steps 5 --chunks 20 --latency 0.05 --repeats 3

(The defaults; about 4.5 minutes on this 2-core machine, the 1000-agent runs
most of it: fewer repeats or agents shorten it.) Every client has a
connection per agent, in pools of at most ``--pool-size`` (default 100, the
adapters' own); ``--pool-size 1000`` shows what one large pool costs.

(Run it as a module: as a script its name would shadow the standard ``http``.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing

import httpx2
import trio

from retinue._content import Message, Text
from retinue._request import LlmCallConfig, MessageHistory, ModelRequest
from retinue._stream import ReasoningDelta, TextDelta, ToolCallDelta
from retinue.providers._pools import MAX_CONNECTIONS, ShardedTransport
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import EchoPolicy, Timing, open_mock_server
from retinue.providers.openai import OpenAIModel

Step = Callable[[str], Awaitable[int]]


async def serve(port: int, chunks: int, latency: float) -> None:
    """Run the mock server until killed (the child process)."""
    policy = EchoPolicy(chunks=chunks, max_tool_calls=0)
    async with open_mock_server(policy, timing=Timing(latency=latency), port=port) as server:
        print(server.base_url, flush=True)
        await trio.sleep_forever()


def _request(session: str) -> ModelRequest:
    history = MessageHistory([Message("user", (Text("tell me something, please"),))])
    return ModelRequest(LlmCallConfig("bench-model"), history, session_id=session)


def adapter_step(model: OpenAIModel | AnthropicModel) -> Step:
    """One streamed step through an adapter; returns the deltas received."""

    async def step(session: str) -> int:
        deltas = 0
        async with aclosing(model.stream(_request(session))) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, TextDelta | ReasoningDelta | ToolCallDelta):
                    deltas += 1
        return deltas

    return step


def raw_step(client: httpx2.AsyncClient, base_url: str) -> Step:
    """One streamed step with a raw httpx2 client: SSE split and JSON parse only (the floor)."""
    url = base_url + "/v1/chat/completions"

    async def step(session: str) -> int:
        body = {
            "model": "bench-model",
            "messages": [{"role": "user", "content": "tell me something, please"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        deltas = 0
        buffer = b""
        headers = {"x-retinue-shard": session}
        async with client.stream("POST", url, json=body, headers=headers) as response:
            async for data in response.aiter_bytes():
                buffer += data
                *events, buffer = buffer.split(b"\n\n")
                for event in events:
                    payload = event[6:]
                    if payload == b"[DONE]":
                        continue
                    choices = json.loads(payload)["choices"]
                    if choices and choices[0]["delta"].get("content"):
                        deltas += 1
        return deltas

    return step


async def run_agents(step: Step, agents: int, steps: int) -> tuple[int, int]:
    """Run *agents* concurrent loops of *steps* steps; returns (steps, deltas)."""
    totals = [0, 0]

    async def agent(index: int) -> None:
        for _ in range(steps):
            deltas = await step(f"agent-{index}")
            totals[1] += deltas
            totals[0] += 1

    async with trio.open_nursery() as nursery:
        for index in range(agents):
            nursery.start_soon(agent, index)
    return totals[0], totals[1]


async def measure(name: str, step: Step, agents: int, steps: int) -> dict[str, object]:
    """Warm up, then time one run of *step* on wall and CPU clocks."""
    await run_agents(step, min(agents, 20), 1)
    wall, cpu = time.perf_counter(), time.process_time()
    done, deltas = await run_agents(step, agents, steps)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert done == agents * steps, (done, agents, steps)
    assert deltas >= done, f"{name}: only {deltas} deltas for {done} steps"
    return {
        "client": name,
        "steps": done,
        "chunks": deltas,
        "steps_per_s": round(done / wall, 1),
        "cpu_us_per_chunk": round(cpu / deltas * 1e6, 2),
        "wall_s": round(wall, 3),
    }


async def _client_once(
    name: str, base_url: str, agents: int, steps: int, pool_size: int
) -> dict[str, object]:
    """Open one client (the raw floor or an adapter), warm it up and time one run.

    Each has a connection per agent, in pools of at most *pool_size*.
    """
    if name == "raw-httpx2":
        # As the adapters are built: *agents* connections in all (at most as many as
        # they open, MAX_CONNECTIONS), not pools * pool_size.
        connections = min(agents, MAX_CONNECTIONS)
        pools = max(1, -(-connections // pool_size))
        transport = ShardedTransport(pools, pool_size, max_connections=connections)
        async with httpx2.AsyncClient(transport=transport, timeout=60) as raw:
            return await measure(name, raw_step(raw, base_url), agents, steps)
    if name == "openai":
        async with OpenAIModel(
            base_url=base_url + "/v1", api_key="bench", max_connections=agents, pool_size=pool_size
        ) as openai_model:
            return await measure(name, adapter_step(openai_model), agents, steps)
    async with AnthropicModel(
        base_url=base_url, api_key="bench", max_connections=agents, pool_size=pool_size
    ) as anthropic_model:
        return await measure(name, adapter_step(anthropic_model), agents, steps)


_CLIENTS = ("raw-httpx2", "openai", "anthropic")


def _value(run: dict[str, object], key: str) -> float:
    value = run[key]
    assert isinstance(value, float | int), (key, value)
    return float(value)


def _median(runs: list[dict[str, object]], key: str) -> float:
    return statistics.median(_value(run, key) for run in runs)


async def bench(
    base_url: str,
    agents: int,
    steps: int,
    chunks: int,
    latency: float,
    repeats: int,
    pool_size: int = 100,
) -> None:
    """Measure the floor and both adapters at one agent count, *repeats* times; print one JSON line."""
    runs: dict[str, list[dict[str, object]]] = {name: [] for name in _CLIENTS}
    for repeat in range(repeats):
        # Alternate the order so no client always runs first or last.
        for name in _CLIENTS if repeat % 2 == 0 else reversed(_CLIENTS):
            runs[name].append(await _client_once(name, base_url, agents, steps, pool_size))
    results = []
    for name in _CLIENTS:
        ratios = [
            _value(run, "cpu_us_per_chunk") / _value(floor, "cpu_us_per_chunk")
            for run, floor in zip(runs[name], runs["raw-httpx2"], strict=True)
        ]
        results.append(
            {
                "client": name,
                "steps": runs[name][0]["steps"],
                "chunks": runs[name][0]["chunks"],
                "steps_per_s": round(_median(runs[name], "steps_per_s"), 1),
                "cpu_us_per_chunk": round(_median(runs[name], "cpu_us_per_chunk"), 2),
                "wall_s": round(_median(runs[name], "wall_s"), 3),
                "vs_floor": round(statistics.median(ratios), 2),
                "vs_floor_repeats": [round(ratio, 2) for ratio in ratios],
            }
        )
    line = {
        "benchmark": "http",
        "agents": agents,
        "steps_per_agent": steps,
        "chunks_per_response": chunks,
        "latency_s": latency,
        "repeats": repeats,
        "pool_size": pool_size,
        "results": results,
    }
    print(json.dumps(line), flush=True)


def _count(text: str) -> int:
    """A count of at least 1: a pool size of 0 divided by zero, as did 0 steps or chunks,
    and 0 repeats left no run to take the median of, after the server had started."""
    if not (text.isdecimal() and int(text) >= 1):
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return int(text)


def main() -> None:
    """Parse arguments; start the server child; run each agent count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=_count, nargs="+", default=[100, 1000])
    parser.add_argument("--steps", type=_count, default=5)
    parser.add_argument("--chunks", type=_count, default=20)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--repeats", type=_count, default=3)
    parser.add_argument("--pool-size", type=_count, default=100, help="connections a pool, at most")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        trio.run(serve, args.serve, args.chunks, args.latency)
        return
    command = [
        sys.executable,
        "-m",
        "benchmarks.http",
        "--serve",
        "0",
        "--chunks",
        str(args.chunks),
        "--latency",
        str(args.latency),
    ]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        for agents in args.agents:
            trio.run(
                bench,
                base_url,
                agents,
                args.steps,
                args.chunks,
                args.latency,
                args.repeats,
                args.pool_size,
            )
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
