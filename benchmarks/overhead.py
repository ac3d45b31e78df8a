"""Runtime overhead: N agents x 5 turns against a zero-latency ScriptedModel.

Each turn is one step asking for 2 parallel tool calls and one step answering
in 20 chunks. Prints one JSON line per N and then one line comparing the
per-step cost at turn 500 of a session with turn 1 (medians over the first
and the last ``window`` turns, once a throwaway session has warmed the
process; the median ratio of five sessions). Each line names the GC threshold it ran with (``gc_threshold0``).
Each N's line gives:

* ``steps_per_s`` and ``cpu_us_per_step``: wall and CPU time of the turns
  alone (one window: opening the runtime, creating the agents, the invariant
  checks and teardown are outside it), and the same CPU for the floor
  (benchmarks/floor.py, measured in the same run, logging the same events,
  each of its runs in a process of its own that never imports the runtime)
  with the ratio to it; the CPU each side spent in CPython's cyclic GC and
  the ratio once that is taken out.
* ``rss_per_agent_kb``: the RSS retinue has grown once every turn is done,
  before the checks and teardown, from before the runtime opened (runtime,
  agents and their sessions), per agent, read in its first run. That run's
  model yields a fresh copy of every chunk (``FreshChunks``), as a real
  adapter parsing its stream does: the ScriptedModel yields the chunk
  objects it built once, which all agents' logs would then share (26 of a
  turn's 30 chunk events), reading about a sixth less memory per agent than
  an agent would hold. The copying is the model's work and raises a run's
  CPU by well over half, so the timed runs (and
  benchmarks.instructions) keep the shared chunks: their CPU is the
  runtime's alone.
  ``floor_rss_per_agent_kb`` is a reference point, not a memory floor: the
  floor's log of small dicts (benchmarks/floor.py, with no chunk content,
  no message or tool-call objects), read the same way while its logs are
  alive, in the first run of its process. ``peak_rss_mb`` is the peak of
  retinue's process, which covers every repeat and the checks.

Run: ``python -m benchmarks.overhead [N ...]`` (default 1 100 1000 10000).
Each N runs in a fresh subprocess; after one untimed warm-up run, retinue
and the floor run in turns, 21 times each up to 10 agents (a run of one
agent is ten steps), three times up to 1000 and once above, and the time
figures are medians (``--one N R`` runs one N with R repeats). ``--gc-threshold T`` runs both sides with
CPython's first GC threshold raised to T (default 700; 0 turns the automatic
cyclic GC off), to show what that tuning buys a process running many agents. A failed measurement's traceback
is on stderr, the other measurements still run, and the run exits 1.
"""

from __future__ import annotations

import contextlib
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, NamedTuple, cast

import attrs
import trio

import retinue
from retinue.providers import Model, ModelRequest, StreamChunk
from retinue.testing import ScriptedModel, check_session_invariants

from ._common import (
    STEPS_PER_TURN,
    TURNS,
    GcTimer,
    Turns,
    Window,
    counts,
    drive_all,
    emit,
    gc_threshold,
    peak_rss_mb,
    rss_mb,
)

_PROGRAM = "python -m benchmarks.overhead"


@retinue.tool(parallel_safe=True)
async def fetch(key: str) -> str:
    """Return a value for *key*.

    Args:
        key: What to fetch.
    """
    await trio.lowlevel.checkpoint()
    return f"value of {key}"


def workload_model() -> ScriptedModel:
    return ScriptedModel.tool_loop(
        ["fetch"], calls_per_step=2, answer_chunks=20, arguments={"fetch": '{"key": "k"}'}
    )


def _fresh(value: Any) -> Any:
    """A copy of *value* built anew down to its strings, as a parser would build it.

    Strings of one character stay CPython's shared singletons, as they do
    when ``json.loads`` makes them.
    """
    if isinstance(value, str):
        return "".join(list(value))
    if isinstance(value, tuple):
        return tuple(_fresh(item) for item in value)
    if isinstance(value, list):
        return [_fresh(item) for item in value]
    if isinstance(value, dict):
        return {key: _fresh(item) for key, item in value.items()}
    if attrs.has(type(value)):
        fields = attrs.fields(type(value))
        return type(value)(**{f.alias: _fresh(getattr(value, f.name)) for f in fields if f.init})
    return value


class FreshChunks:
    """A ScriptedModel whose every chunk is a fresh object, as a real adapter's are.

    ``ScriptedModel`` yields the chunk objects it built once for its plan, so
    every agent's log would share them; an adapter parses each chunk anew.
    The copying is the model's work, not the runtime's: only the run that
    reads RSS uses this, never a timed one.
    """

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """The ScriptedModel's stream, each chunk copied; closed with this one, as the runtime
        closes a stream at its finish."""
        inner = cast(AsyncGenerator[StreamChunk, None], self.model.stream(request))
        async with contextlib.aclosing(inner) as chunks:
            async for chunk in chunks:
                yield _fresh(chunk)


async def run_agents(
    agents: int,
    turns: int,
    check: bool,
    gc_timer: GcTimer | None = None,
    fresh_chunks: bool = False,
) -> Turns:
    """Run the workload; returns events logged and what the turns alone cost.

    With *fresh_chunks* the model yields a fresh copy of every chunk
    (:class:`FreshChunks`), for the run that reads RSS; the timed runs, and
    benchmarks.instructions, use the ScriptedModel as it is.

    CPU and wall time cover the turns only: opening the runtime, creating
    the agents, the invariant checks and teardown are left out, as the floor
    has none of them; *gc_timer*, if given, times the GC over the same
    window. The RSS grown since before the runtime opened is read once the
    turns are done, before the checks and teardown.
    """
    rss = rss_mb()
    model: Model = FreshChunks(workload_model()) if fresh_chunks else workload_model()
    async with retinue.open_runtime(models=model, tools=[fetch]) as rt:
        handles = [
            await rt.create_agent(f"a{i}", retinue.AgentOptions(model="scripted"))
            for i in range(agents)
        ]
        gc.collect()
        with gc_timer or contextlib.nullcontext(), Window() as window:
            await drive_all(handles, turns)
        grown = rss_mb() - rss
        events = sum(len(agent.session.events) for agent in handles)
        if check:
            for agent in handles[:50]:
                check_session_invariants(agent.session.events)
        return Turns(events, window.cpu_s, window.wall_s, grown)


class _Pair(NamedTuple):
    """One retinue run and one floor run, with the GC seconds inside each one's window."""

    runtime: Turns
    floor: Turns
    gc_s: float
    floor_gc_s: float
    floor_rss_mb: float
    """The RSS the floor's first run grew, in a process where nothing else ran."""


def _runtime_run(agents: int, fresh_chunks: bool = False) -> tuple[Turns, float]:
    """One retinue run in this process, from a fresh collection; its GC seconds."""
    timer = GcTimer()
    gc.collect()
    return trio.run(run_agents, agents, TURNS, True, timer, fresh_chunks), timer.seconds


def _floor_run(agents: int) -> tuple[Turns, float, float]:
    """One timed floor run, its GC seconds and the RSS its untimed first run grew.

    Run in a process of its own that never imports the runtime (``benchmarks.floor``):
    here the floor's collections would walk the runtime's objects too, about a fifth
    of the floor's CPU at 1000 agents, making the floor dearer and the ratio smaller.
    """
    tuning = ["--gc-threshold", str(gc.get_threshold()[0])]
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.floor", str(agents), *tuning],
        check=True,
        stdout=subprocess.PIPE,  # its stderr is ours: a failure's traceback is seen
        text=True,
    )
    events, cpu_s, wall_s, gc_s, rss = json.loads(out.stdout)
    return Turns(events, cpu_s, wall_s, 0.0), gc_s, rss


def _pair(agents: int, *, floor_first: bool, fresh_chunks: bool = False) -> _Pair:
    """One retinue run and one floor run, in the order asked: taken in turns, a drift of
    the machine's speed over the repeats falls on both sides alike."""
    if floor_first:
        floor, floor_gc, floor_rss = _floor_run(agents)
        runtime, runtime_gc = _runtime_run(agents, fresh_chunks)
    else:
        runtime, runtime_gc = _runtime_run(agents, fresh_chunks)
        floor, floor_gc, floor_rss = _floor_run(agents)
    # Unequal logs would make the ratios compare different work.
    assert runtime.events == floor.events, (runtime.events, floor.events)
    return _Pair(runtime, floor, runtime_gc, floor_gc, floor_rss)


def measure(agents: int, repeats: int = 1) -> dict[str, object]:
    """Measure retinue (in this process) and the floor (each run in a process of its own,
    :func:`_floor_run`) for *agents* agents, *repeats* times.

    A warm-up run of retinue's comes first and is not timed. The repeats then
    run retinue and the floor in turns, each repeat's pair in the order the last
    one did not; every time figure is the median over the repeats, and
    ``ratios_to_floor`` lists each repeat's own ratio. Memory one run frees is
    reused by the next and hides part of its growth, so each side's RSS is read
    in a process where nothing else ran: retinue's in the warm-up, the floor's
    in the first run of its process.
    """
    # The warm-up only warms retinue up (imports, first calls, the allocator's arenas)
    # and gives its RSS, read before anything else ran here; the time figures come
    # from the runs after it. The floor's process warms itself up the same way.
    # The warm-up's model yields fresh chunks (FreshChunks), so the RSS read
    # in it holds a copy of every chunk per agent, as with a real adapter.
    warm_up, _ = _runtime_run(agents, fresh_chunks=True)
    runs = [_pair(agents, floor_first=repeat % 2 == 1) for repeat in range(repeats)]
    steps = agents * TURNS * STEPS_PER_TURN
    ratios = [run.runtime.cpu_s / run.floor.cpu_s for run in runs]
    without_gc = [
        (run.runtime.cpu_s - run.gc_s) / (run.floor.cpu_s - run.floor_gc_s) for run in runs
    ]

    def per_step(values: list[float]) -> float:
        return round(statistics.median(values) / steps * 1e6, 1)

    return {
        "benchmark": "overhead",
        "agents": agents,
        "steps": steps,
        "repeats": repeats,
        "events": runs[0].runtime.events,
        "floor_events": runs[0].floor.events,
        "steps_per_s": round(steps / statistics.median([run.runtime.wall_s for run in runs]), 1),
        "cpu_us_per_step": per_step([run.runtime.cpu_s for run in runs]),
        "floor_cpu_us_per_step": per_step([run.floor.cpu_s for run in runs]),
        "ratio_to_floor": round(statistics.median(ratios), 2),
        "ratios_to_floor": [round(ratio, 2) for ratio in ratios],
        "gc_us_per_step": per_step([run.gc_s for run in runs]),
        "floor_gc_us_per_step": per_step([run.floor_gc_s for run in runs]),
        "ratio_to_floor_without_gc": round(statistics.median(without_gc), 2),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "rss_per_agent_kb": round(warm_up.rss_mb * 1024 / agents, 1),
        "floor_rss_per_agent_kb": round(runs[0].floor_rss_mb * 1024 / agents, 1),
    }


async def _session_costs(turns: int) -> list[float]:
    """The CPU each of *turns* asks of one new agent's session took, in order."""
    async with retinue.open_runtime(models=workload_model(), tools=[fetch]) as rt:
        agent = await rt.create_agent("long", retinue.AgentOptions(model="scripted"))
        costs: list[float] = []
        for turn in range(turns):
            cpu = time.process_time()
            await agent.ask(f"prompt {turn}")
            costs.append(time.process_time() - cpu)
        check_session_invariants(agent.session.events)
    return costs


async def _long_sessions(turns: int, window: int, repeats: int) -> list[tuple[float, float]]:
    # A throwaway session first: the measured ones' first windows would otherwise carry
    # the process's warm-up (code and caches built on first use), which makes them dear
    # and the ratio of the last window to them low, hiding growth.
    await _session_costs(window)
    windows = []
    for _ in range(repeats):
        costs = await _session_costs(turns)
        windows.append((statistics.median(costs[:window]), statistics.median(costs[-window:])))
    return windows


def measure_growth(turns: int = 500, window: int = 50, repeats: int = 5) -> dict[str, object]:
    """Median per-step CPU over the first and the last *window* turns of a session, for
    *repeats* sessions one after another: one session's ratio moves by a tenth or more
    with this machine's noise, so the figure is the median of their ratios."""
    windows = trio.run(_long_sessions, turns, window, repeats)
    ratios = [last / first for first, last in windows]
    return {
        "benchmark": "overhead-growth",
        "turns": turns,
        "window": window,
        "sessions": repeats,
        "cpu_us_per_step_first": _turn_median_per_step([first for first, _ in windows]),
        "cpu_us_per_step_last": _turn_median_per_step([last for _, last in windows]),
        "ratio_last_to_first": round(statistics.median(ratios), 2),
        "ratios_last_to_first": [round(ratio, 2) for ratio in ratios],
    }


def _turn_median_per_step(turn_costs: list[float]) -> float:
    """The median of CPU seconds per turn, in µs per step."""
    return round(statistics.median(turn_costs) / STEPS_PER_TURN * 1e6, 1)


def _repeats(agents: int) -> int:
    # Medians tame this machine's noise. A run of one agent is ten steps (a few
    # milliseconds, at the mercy of any other process), so it repeats most;
    # 10000 agents take minutes a run, so they run once.
    if agents <= 10:
        return 21
    return 3 if agents <= 1000 else 1


def _run_child(args: list[str], threshold: int | None) -> bool:
    """Run one measurement in a fresh process and print its line; False if it failed.

    The child writes to this process's stderr, so why it failed is seen as it fails.
    """
    tuning = [] if threshold is None else ["--gc-threshold", str(threshold)]
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.overhead", *args, *tuning],
        check=False,
        stdout=subprocess.PIPE,
        text=True,
    )
    if out.returncode != 0:
        print(f"# {' '.join(args)} failed (exit {out.returncode})", file=sys.stderr, flush=True)
        return False
    print(out.stdout.strip(), flush=True)
    return True


def main(argv: list[str]) -> int:
    """Run every N in its own subprocess, then the growth measurement; 1 if one failed."""
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    argv, threshold = gc_threshold(_PROGRAM, argv)
    if threshold is not None:
        gc.set_threshold(threshold, *gc.get_threshold()[1:])
    if argv and argv[0] == "--one":
        agents, *repeats = counts(_PROGRAM, argv[1:3] or [""])
        record = measure(agents, repeats[0] if repeats else _repeats(agents))
        emit({**record, "gc_threshold0": gc.get_threshold()[0]})
        return 0
    if argv and argv[0] == "--growth":
        emit({**measure_growth(), "gc_threshold0": gc.get_threshold()[0]})
        return 0
    measured = [
        _run_child(["--one", str(agents)], threshold)
        for agents in counts(_PROGRAM, argv) or [1, 100, 1000, 10000]
    ]
    measured.append(_run_child(["--growth"], threshold))
    return 0 if all(measured) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
