"""Shared benchmark helpers: CPU and wall timing, RSS, JSON output and the workload shape."""

from __future__ import annotations

import gc
import json
import resource
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Self

import trio

if TYPE_CHECKING:
    # Only for annotations: the floor's process must not import the runtime,
    # whose import footprint would move where the floor's collections land.
    import retinue

TURNS = 5
STEPS_PER_TURN = 2
ANSWER_CHUNKS = 20


def rss_mb() -> float:
    """Current resident set size in MiB (Linux /proc)."""
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Turns(NamedTuple):
    """What one side's turns cost: events logged, CPU and wall seconds, RSS grown in MiB."""

    events: int
    cpu_s: float
    wall_s: float
    rss_mb: float


class Window:
    """CPU and wall seconds spent inside ``with window:``."""

    def __init__(self) -> None:
        self.cpu_s = self.wall_s = 0.0

    def __enter__(self) -> Self:
        self.cpu_s, self.wall_s = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.cpu_s = time.process_time() - self.cpu_s
        self.wall_s = time.perf_counter() - self.wall_s


def counts(program: str, args: Sequence[str], *, least: int = 1) -> list[int]:
    """*args* as counts (of agents, repeats), each a whole number of at least *least*.

    Checked before anything runs: a count of 0 agents would fail with a division
    by zero in a child process, or after minutes under callgrind, and a negative
    one would print figures for no work at all. (A GC threshold of 0 is a count
    that means something: the cyclic GC never runs on its own.)

    Raises:
        SystemExit: 2, after a usage line on stderr naming the bad count.
    """
    for arg in args:
        if not (arg.isdecimal() and int(arg) >= least):
            print(
                f"{program}: a count must be a whole number of at least {least}, got {arg!r}",
                file=sys.stderr,
            )
            raise SystemExit(2)
    return [int(arg) for arg in args]


def gc_threshold(program: str, argv: list[str]) -> tuple[list[str], int | None]:
    """Take ``--gc-threshold T`` out of *argv*; 0 turns the automatic cyclic GC off."""
    if "--gc-threshold" not in argv:
        return argv, None
    at = argv.index("--gc-threshold")
    [threshold] = counts(program, argv[at + 1 : at + 2] or [""], least=0)
    return argv[:at] + argv[at + 2 :], threshold


def emit(record: dict[str, Any]) -> None:
    """Print one JSON line."""
    print(json.dumps(record), flush=True)
    sys.stdout.flush()


class GcTimer:
    """CPU time spent in CPython's cyclic GC while inside ``with timer:`` (gc callbacks)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._started = 0.0

    def _callback(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started
            self.collections += 1

    def __enter__(self) -> Self:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *_exc: object) -> None:
        gc.callbacks.remove(self._callback)


async def drive_all(agents: list[retinue.Agent], turns: int) -> None:
    """Ask every agent *turns* prompts, the agents concurrently; each turn must complete."""

    async def drive(agent: retinue.Agent) -> None:
        for turn in range(turns):
            result = await agent.ask(f"prompt {turn}")
            assert result.reason.kind == "completed", result

    async with trio.open_nursery() as nursery:
        for agent in agents:
            nursery.start_soon(drive, agent)
