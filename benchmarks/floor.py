"""The floor: a pure-trio loop doing the same event appends and tool nurseries, no framework.

Each agent is a task; it appends the same events as a retinue agent of the
overhead workload (dicts into a list, with seq and time) and runs each tool
step's two tool calls as child tasks of a nursery.

``python -m benchmarks.floor N [--gc-threshold T]`` runs N agents twice in a
process that never imports the runtime, whose objects would add to every
collection the floor's GC makes (a fifth of its CPU at 1000 agents): once
untimed, its RSS growth read as the first thing the process does, then timed.
It prints one JSON line: ``[events, cpu_s, wall_s, gc_s, rss_mb]``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
import time

import trio

from ._common import ANSWER_CHUNKS, TURNS, GcTimer, Turns, Window, counts, gc_threshold, rss_mb

# A retinue turn of the workload: turn/start, user/message, then
# step 1: step/start, request/header (turn 1 only: retinue logs the header
#         once and then only what changes), tool-call chunks,
#         assistant/message, 2 x tool/call, 2 x tool/result, step/end;
# step 2: step/start, answer chunks, assistant/message, step/end; turn/end.
TOOL_STEP_CHUNKS = 2 * 3 + 1  # block-start, delta, block-end per call + finish
ANSWER_STEP_CHUNKS = ANSWER_CHUNKS + 3  # block-start, deltas, block-end, finish


async def _tool(results: list[str], index: int) -> None:
    await trio.lowlevel.checkpoint()
    results.append(f"result {index}")


def _append(log: list[dict[str, object]], kind: str, data: dict[str, object]) -> None:
    log.append({"seq": len(log), "type": kind, "time": time.time_ns() // 1_000_000, "data": data})


async def _step_with_tools(log: list[dict[str, object]], turn: int) -> None:
    _append(log, "step/start", {"turn": turn, "step": 1})
    if turn == 1:
        _append(log, "request/header", {"model": "m"})
    for index in range(TOOL_STEP_CHUNKS):
        _append(log, "assistant/chunk", {"turn": turn, "step": 1, "index": index})
    _append(log, "assistant/message", {"turn": turn, "step": 1})
    results: list[str] = []
    for index in range(2):
        _append(log, "tool/call", {"turn": turn, "call_id": str(index)})
    async with trio.open_nursery() as nursery:
        for index in range(2):
            nursery.start_soon(_tool, results, index)
    for result in results:
        _append(log, "tool/result", {"turn": turn, "content": result})
    _append(log, "step/end", {"turn": turn, "step": 1})


async def _step_with_answer(log: list[dict[str, object]], turn: int) -> None:
    await trio.lowlevel.checkpoint()
    _append(log, "step/start", {"turn": turn, "step": 2})
    for index in range(ANSWER_STEP_CHUNKS):
        _append(log, "assistant/chunk", {"turn": turn, "step": 2, "index": index})
    _append(log, "assistant/message", {"turn": turn, "step": 2})
    _append(log, "step/end", {"turn": turn, "step": 2})


async def run_agent(turns: int = TURNS) -> list[dict[str, object]]:
    """One agent's worth of the workload."""
    log: list[dict[str, object]] = []
    for turn in range(1, turns + 1):
        await trio.lowlevel.checkpoint()
        _append(log, "turn/start", {"turn": turn})
        _append(log, "user/message", {"content": "hello"})
        await _step_with_tools(log, turn)
        await _step_with_answer(log, turn)
        _append(log, "turn/end", {"turn": turn})
    return log


async def run_floor(agents: int, turns: int = TURNS, gc_timer: GcTimer | None = None) -> Turns:
    """Run *agents* floor agents concurrently; returns events appended and what the turns cost.

    Timed like retinue's turns in ``benchmarks.overhead.run_agents``: CPU and
    wall over the nursery, *gc_timer* (if given) over the same window, and the
    RSS grown from the start, read while every log is still alive as
    retinue's sessions are.
    """
    logs: list[list[dict[str, object]]] = []

    async def one() -> None:
        logs.append(await run_agent(turns))

    rss = rss_mb()
    with gc_timer or contextlib.nullcontext(), Window() as window:
        async with trio.open_nursery() as nursery:
            for _ in range(agents):
                nursery.start_soon(one)
    grown = rss_mb() - rss
    return Turns(sum(len(log) for log in logs), window.cpu_s, window.wall_s, grown)


def main(argv: list[str]) -> int:
    """Print one timed run of the floor after an untimed one, as the module docstring says."""
    argv, threshold = gc_threshold(_PROGRAM, argv)
    if threshold is not None:
        gc.set_threshold(threshold, *gc.get_threshold()[1:])
    [agents] = counts(_PROGRAM, argv[:1] or [""])
    warm_up = trio.run(run_floor, agents)
    timer = GcTimer()
    gc.collect()
    run = trio.run(run_floor, agents, TURNS, timer)
    print(json.dumps([run.events, run.cpu_s, run.wall_s, timer.seconds, warm_up.rss_mb]))
    return 0


_PROGRAM = "python -m benchmarks.floor"

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
