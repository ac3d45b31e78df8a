"""Agent lifecycle at scale: what creating, running and disposing one agent costs among many.

N agents are created one after another, each with two listeners scoped to
it (as a supervisor's per-agent hooks would be), then every agent asks one
prompt concurrently (one step, no tools), then every agent is disposed one
after another, oldest first. A second runtime disposes its N agents newest
first: a table kept as a list and searched from its head finds the oldest
agent's entry at once, so only this order shows what a search costs.
Prints one JSON line per N with the CPU microseconds per agent of each
phase, with and without the time CPython's cyclic GC took in it, and, given
two N or more, a last line with each phase's ratio of the largest N to the
smallest, without the GC: nothing an agent does may cost more because other
agents exist, so each ratio should stay near 1 (a registry or listener
table scanned per agent would make it grow with N). The GC's share does grow
with the heap, for any Python program holding that many objects.

This machine is noisy, so one run per figure can show growth that is not
there. Every N is measured R times (``--repeats R``, default 5), the sizes
alternating (smallest first, then largest first, ...) so neither always runs
first; each per-agent figure is the median over the repeats, and the last
line gives each phase's median ratio with the per-repeat ratios (repeat i
of the largest N over repeat i of the smallest) beside it.

Run: ``python -m benchmarks.lifecycle [N ...] [--repeats R]`` (default
1000 10000, 5 repeats: about 20 s a repeat, under two minutes in all).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import statistics
import sys
from collections.abc import Iterator
from typing import NamedTuple

import trio

import retinue
from retinue.testing import Reply, ScriptedModel

from ._common import GcTimer, Window, emit

_PHASES = ("create", "turn", "dispose", "dispose_newest_first")


def _ignore(*_args: object) -> None:
    """A listener that does nothing: the bus's bookkeeping is what is measured."""


class _Phase(NamedTuple):
    """CPU seconds of one phase, and the GC's share of them."""

    window: Window
    gc: GcTimer

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        with self.gc, self.window:
            yield


async def _lifecycle(agents: int, *, newest_first: bool) -> dict[str, _Phase]:
    """Create, turn and dispose phases; the dispose phase is named after its order."""
    model = ScriptedModel([Reply("done")], repeat_last=True, keep_requests=0)
    dispose = "dispose_newest_first" if newest_first else "dispose"
    phases = {phase: _Phase(Window(), GcTimer()) for phase in ("create", "turn", dispose)}
    async with retinue.open_runtime(models=model) as rt:

        def scoped_hooks(agent: retinue.Agent) -> None:
            rt.hooks.on("agent/pre-step", _ignore, agent=agent)
            rt.hooks.on("agent/status", _ignore, agent=agent)

        options = retinue.AgentOptions(model="scripted")
        with phases["create"].timed():
            handles = [
                await rt.create_agent(f"agent-{k}", options, setup=scoped_hooks)
                for k in range(agents)
            ]

        async def ask(agent: retinue.Agent) -> None:
            result = await agent.ask("hello")
            assert result.reason.kind == "completed", result

        with phases["turn"].timed():
            async with trio.open_nursery() as nursery:
                for agent in handles:
                    nursery.start_soon(ask, agent)

        with phases[dispose].timed():
            for agent in reversed(handles) if newest_first else handles:
                await agent.dispose()
        assert not rt.agents, "every agent was disposed"
    return phases


def _run(agents: int, *, newest_first: bool) -> dict[str, _Phase]:
    gc.collect()
    return trio.run(functools.partial(_lifecycle, agents, newest_first=newest_first))


def _measure_once(agents: int) -> dict[str, _Phase]:
    """Every phase for *agents* agents, once (two runtimes: one per dispose order)."""
    phases = _run(agents, newest_first=False)
    # Only the dispose phase differs between the two runs.
    phases["dispose_newest_first"] = _run(agents, newest_first=True)["dispose_newest_first"]
    return phases


def _per_agent(phase: _Phase, agents: int) -> dict[str, float]:
    """One phase's CPU, GC and CPU-without-GC microseconds per agent."""
    cpu, collected = phase.window.cpu_s, phase.gc.seconds
    return {
        "cpu": cpu / agents * 1e6,
        "gc": collected / agents * 1e6,
        "without_gc": (cpu - collected) / agents * 1e6,
    }


def _record(agents: int, repeats: list[dict[str, _Phase]]) -> dict[str, object]:
    """Median over *repeats* of each phase's microseconds per agent."""
    record: dict[str, object] = {
        "benchmark": "lifecycle",
        "agents": agents,
        "repeats": len(repeats),
    }
    for name in _PHASES:
        figures = [_per_agent(phases[name], agents) for phases in repeats]
        for kind in ("cpu", "gc", "without_gc"):
            median = statistics.median(figure[kind] for figure in figures)
            record[f"{name}_{kind}_us_per_agent"] = round(median, 1)
    return record


def _growth(
    runs: dict[int, list[dict[str, _Phase]]], small: int, large: int, repeats: int
) -> dict[str, object]:
    """Each phase's ratio of *large* agents to *small*, without the GC: the median and each repeat's."""
    growth: dict[str, object] = {
        "benchmark": "lifecycle-growth",
        "agents": [small, large],
        "repeats": repeats,
    }
    for phase in _PHASES:
        ratios = [
            _per_agent(big[phase], large)["without_gc"]
            / _per_agent(little[phase], small)["without_gc"]
            for little, big in zip(runs[small], runs[large], strict=True)
        ]
        growth[f"{phase}_ratio_without_gc"] = round(statistics.median(ratios), 2)
        growth[f"{phase}_ratios_without_gc"] = [round(ratio, 2) for ratio in ratios]
    return growth


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.lifecycle",
        description="Create, turn and dispose CPU per agent among N agents; growth smallest to largest N.",
    )
    parser.add_argument("sizes", nargs="*", type=int, default=[1000, 10000], metavar="N")
    parser.add_argument("--repeats", type=int, default=5, metavar="R")
    args = parser.parse_args(argv)
    sizes = sorted(set(args.sizes))
    if not sizes or sizes[0] < 1 or args.repeats < 1:
        parser.error("every N and R must be at least 1")
    runs: dict[int, list[dict[str, _Phase]]] = {agents: [] for agents in sizes}
    for repeat in range(args.repeats):
        # Alternate the order so neither end always runs first (on a warmer or a
        # quieter machine).
        for agents in sizes if repeat % 2 == 0 else reversed(sizes):
            runs[agents].append(_measure_once(agents))
    for agents in sizes:
        emit(_record(agents, runs[agents]))
    if len(sizes) > 1:
        # One N against itself would read as no growth, whatever it costs.
        emit(_growth(runs, sizes[0], sizes[-1], args.repeats))


if __name__ == "__main__":
    main(sys.argv[1:])
