"""Runtime overhead: N agents x 5 turns against a zero-latency ScriptedModel.

Each turn is one step asking for 2 parallel tool calls and one step answering
in 20 chunks. Prints one JSON line per N with steps/s, CPU µs per step, peak
RSS and RSS per agent, and the ratio to the floor (benchmarks/floor.py)
measured in the same run, with the CPU each side spent in CPython's cyclic GC
and the ratio once that is taken out; then one line comparing the per-step
cost at turn 500 of one session with turn 1.

Run: ``python -m benchmarks.overhead [N ...]`` (default 1 100 1000 10000).
Each N runs in a fresh subprocess so peak RSS is its own; up to 1000 agents
the floor and retinue run three times each, alternately, and the figures are
medians (``--one N R`` runs one N with R repeats). ``--gc-threshold T`` runs
both sides with CPython's first GC threshold raised to T (default 700), to
show what that tuning buys a process running many agents.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import subprocess
import sys
import time

import trio

import retinue
from retinue.testing import ScriptedModel, check_session_invariants

from ._common import STEPS_PER_TURN, TURNS, GcTimer, emit, peak_rss_mb, rss_mb, timed
from .floor import run_floor


@retinue.tool(parallel_safe=True)
async def fetch(key: str) -> str:
    """Return a value for *key*.

    Args:
        key: What to fetch.
    """
    await trio.lowlevel.checkpoint()
    return f"value of {key}"


def _model() -> ScriptedModel:
    return ScriptedModel.tool_loop(
        ["fetch"], calls_per_step=2, answer_chunks=20, arguments={"fetch": '{"key": "k"}'}
    )


async def run_agents(
    agents: int, turns: int, check: bool, gc_timer: GcTimer | None = None
) -> tuple[int, float]:
    """Run the workload; returns events logged and the CPU seconds of the turns alone.

    Creating the agents and closing the runtime are left out, as the floor
    has neither; *gc_timer*, if given, times the GC over the same window.
    """
    async with retinue.open_runtime(models=_model(), tools=[fetch]) as rt:
        handles = [
            await rt.create_agent(f"a{i}", retinue.AgentOptions(model="scripted"))
            for i in range(agents)
        ]

        async def drive(agent: retinue.Agent) -> None:
            for turn in range(turns):
                result = await agent.ask(f"prompt {turn}")
                assert result.reason.kind == "completed", result

        gc.collect()
        with gc_timer or contextlib.nullcontext():
            cpu = time.process_time()
            async with trio.open_nursery() as nursery:
                for agent in handles:
                    nursery.start_soon(drive, agent)
            cpu = time.process_time() - cpu
        events = sum(len(agent.session.events) for agent in handles)
        if check:
            for agent in handles[:50]:
                check_session_invariants(agent.session.events)
        return events, cpu


def _pair(agents: int) -> tuple[float, float, float, float, float, int, int]:
    """One floor run then one retinue run: CPU and GC seconds of each, wall, events."""
    gc.collect()
    with GcTimer() as floor_gc:
        floor_events, floor_cpu = trio.run(run_floor, agents)
    runtime_gc = GcTimer()
    (events, cpu), _, wall = timed(lambda: trio.run(run_agents, agents, TURNS, True, runtime_gc))
    return cpu, floor_cpu, runtime_gc.seconds, floor_gc.seconds, wall, events, floor_events


def measure(agents: int, repeats: int = 1) -> dict[str, object]:
    """Measure retinue and the floor for *agents* agents, *repeats* times, in this process.

    Each repeat runs the floor, then retinue; every figure is the median over
    the repeats, and ``ratios_to_floor`` lists each repeat's own ratio.
    """
    baseline = rss_mb()
    runs = [_pair(agents) for _ in range(repeats)]
    steps = agents * TURNS * STEPS_PER_TURN
    peak = peak_rss_mb()
    ratios = [cpu / floor_cpu for cpu, floor_cpu, *_ in runs]
    without_gc = [(cpu - gcs) / (floor - floor_gcs) for cpu, floor, gcs, floor_gcs, *_ in runs]

    def per_step(index: int) -> float:
        return round(statistics.median(run[index] for run in runs) / steps * 1e6, 1)

    return {
        "benchmark": "overhead",
        "agents": agents,
        "steps": steps,
        "repeats": repeats,
        "events": runs[0][5],
        "floor_events": runs[0][6],
        "steps_per_s": round(steps / statistics.median(run[4] for run in runs), 1),
        "cpu_us_per_step": per_step(0),
        "floor_cpu_us_per_step": per_step(1),
        "ratio_to_floor": round(statistics.median(ratios), 2),
        "ratios_to_floor": [round(ratio, 2) for ratio in ratios],
        "gc_us_per_step": per_step(2),
        "floor_gc_us_per_step": per_step(3),
        "ratio_to_floor_without_gc": round(statistics.median(without_gc), 2),
        "peak_rss_mb": round(peak, 1),
        "rss_per_agent_kb": round((peak - baseline) * 1024 / agents, 1),
    }


async def _long_session(turns: int, window: int) -> tuple[float, float]:
    async with retinue.open_runtime(models=_model(), tools=[fetch]) as rt:
        agent = await rt.create_agent("long", retinue.AgentOptions(model="scripted"))
        costs: list[float] = []
        for turn in range(turns):
            cpu = time.process_time()
            await agent.ask(f"prompt {turn}")
            costs.append(time.process_time() - cpu)
        check_session_invariants(agent.session.events)
    first = sorted(costs[:window])[window // 2]
    last = sorted(costs[-window:])[window // 2]
    return first, last


def measure_growth(turns: int = 500, window: int = 50) -> dict[str, object]:
    """Median per-step CPU over the first and the last *window* turns of one session."""
    first, last = trio.run(_long_session, turns, window)
    return {
        "benchmark": "overhead-growth",
        "turns": turns,
        "cpu_us_per_step_first": round(first / STEPS_PER_TURN * 1e6, 1),
        "cpu_us_per_step_last": round(last / STEPS_PER_TURN * 1e6, 1),
        "ratio_last_to_first": round(last / first, 2),
    }


def _repeats(agents: int) -> int:
    # Medians of three runs tame this machine's noise; 10000 agents take
    # minutes a run, so they run once.
    return 3 if agents <= 1000 else 1


def _gc_threshold(argv: list[str]) -> tuple[list[str], int | None]:
    """Take ``--gc-threshold T`` out of *argv*."""
    if "--gc-threshold" not in argv:
        return argv, None
    at = argv.index("--gc-threshold")
    return argv[:at] + argv[at + 2 :], int(argv[at + 1])


def _run_child(args: list[str], threshold: int | None) -> None:
    tuning = [] if threshold is None else ["--gc-threshold", str(threshold)]
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.overhead", *args, *tuning],
        check=True,
        capture_output=True,
        text=True,
    )
    print(out.stdout.strip(), flush=True)


def main(argv: list[str]) -> int:
    """Run every N in its own subprocess, then the growth measurement."""
    argv, threshold = _gc_threshold(argv)
    if threshold is not None:
        gc.set_threshold(threshold, *gc.get_threshold()[1:])
    if argv and argv[0] == "--one":
        agents = int(argv[1])
        record = measure(agents, int(argv[2]) if len(argv) > 2 else _repeats(agents))
        emit({**record, "gc_threshold0": gc.get_threshold()[0]})
        return 0
    if argv and argv[0] == "--growth":
        emit(measure_growth())
        return 0
    for agents in [int(arg) for arg in argv] or [1, 100, 1000, 10000]:
        _run_child(["--one", str(agents)], threshold)
    _run_child(["--growth"], threshold)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
