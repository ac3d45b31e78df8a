"""Agent lifecycle at scale: what creating, running and disposing one agent costs among many.

N agents are created one after another, each with two listeners scoped to
it (as a supervisor's per-agent hooks would be), then every agent asks one
prompt concurrently (one step, no tools), then every agent is disposed one
after another, oldest first. A second runtime disposes its N agents newest
first: a table kept as a list and searched from its head finds the oldest
agent's entry at once, so only this order shows what a search costs.
Prints one JSON line per N with the CPU microseconds per agent of each
phase, with and without the time CPython's cyclic GC took in it, and a last
line with each phase's ratio of the largest N to the smallest, without the
GC: nothing an agent does may cost more because other agents exist, so each
ratio should stay near 1 (a registry or listener table scanned per agent
would make it grow with N). The GC's share does grow with the heap, for any
Python program holding that many objects.

Run: ``python -m benchmarks.lifecycle [N ...]`` (default 1000 10000).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
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


def measure(agents: int) -> dict[str, object]:
    """CPU microseconds per agent of each phase for *agents* agents."""
    phases = _run(agents, newest_first=False)
    # Only the dispose phase differs between the two runs.
    phases["dispose_newest_first"] = _run(agents, newest_first=True)["dispose_newest_first"]
    record: dict[str, object] = {"benchmark": "lifecycle", "agents": agents}
    for name, phase in phases.items():
        record[f"{name}_cpu_us_per_agent"] = round(phase.window.cpu_s / agents * 1e6, 1)
        record[f"{name}_gc_us_per_agent"] = round(phase.gc.seconds / agents * 1e6, 1)
        record[f"{name}_without_gc_us_per_agent"] = round(
            (phase.window.cpu_s - phase.gc.seconds) / agents * 1e6, 1
        )
    return record


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.lifecycle",
        description="Create, turn and dispose CPU per agent among N agents; growth smallest to largest N.",
    )
    parser.add_argument("sizes", nargs="*", type=int, default=[1000, 10000], metavar="N")
    sizes = sorted(parser.parse_args(argv).sizes)
    if not sizes or sizes[0] < 1:
        parser.error("every N must be at least 1")
    records = [measure(agents) for agents in sizes]
    for record in records:
        emit(record)
    small, large = records[0], records[-1]
    emit(
        {
            "benchmark": "lifecycle-growth",
            "agents": [small["agents"], large["agents"]],
            **{
                f"{phase}_ratio_without_gc": round(
                    float(large[f"{phase}_without_gc_us_per_agent"])  # type: ignore[arg-type]
                    / float(small[f"{phase}_without_gc_us_per_agent"]),  # type: ignore[arg-type]
                    2,
                )
                for phase in _PHASES
            },
        }
    )


if __name__ == "__main__":
    main(sys.argv[1:])
