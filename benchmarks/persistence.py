"""Persistence: 1000 agents x 10 turns (24 events per turn) on every session store.

Two measurements per store, each in a fresh subprocess:

* ``runtime``: real agents (``open_runtime`` with a zero-latency ScriptedModel,
  one tool step and one answer step per turn); the loop flushes after every
  turn. A turn logs 24 events: turn/start, user/message, per step
  step/start, assistant/message and step/end, 13 assistant/chunk across the
  two steps, tool/call, tool/result and turn/end; the first turn adds a
  request/header, so ``events_per_turn`` reads 24 + 1/T (24.1 at the default
  ten turns). Reports wall time, events/s, per-turn flush latencies (only
  flushes started while the turns run: the runtime's closing flushes, one
  per agent with nothing left to write, are left out) and the slowdown
  against the memory store's wall time.
* ``raw``: the store without the agent loop. 1000 tasks each append a
  realistic turn (22 events) to their session and flush, ten times,
  concurrently; events/s and flush latencies.

Each flush is timed in two parts. ``flush_p50_ms``/``flush_p99_ms`` run from
the flush call until the backend write holding its events has returned
(read in the writer's thread for sqlite, jsonl and postgres): the store's
latency, its group-commit queue included. ``resume_wait_p50_ms``/``_p99_ms``
run from that write's return until the flushing task runs again: the wait
in trio's run queue behind every other ready task, which says how busy the
event loop is, not how fast the store is. In ``runtime`` mode the memory
store is flushed as the loop flushes a bare ``MemoryStore``
(``flush_nowait``: a synchronous commit, no task switch), so its resume
wait is only the timer's own microseconds; in ``raw`` mode every store's
flush is awaited.

``store_events_per_s`` is committed events divided by the seconds spent
inside ``backend.write`` (encoding, I/O, fsync). For sqlite, jsonl and
postgres that write runs in a worker thread while the trio thread keeps
running the agents, so it shares the GIL and this machine's cores with
them: it is the write path's throughput under this load, not the store's
ceiling alone. For the memory store the write runs inline on the trio thread.

Every record carries ``slowdown_vs_memory``: its wall time over the memory
store's, measured first in the same run and mode, whether or not ``--stores``
names ``memory`` (``null`` if that floor's measurement failed). A failed
measurement is reported on stderr and makes the run exit 1.

Run: ``python -m benchmarks.persistence [--agents N] [--turns T] [--stores memory,sqlite,jsonl,postgres]``.
PostgreSQL is measured when ``RETINUE_TEST_POSTGRES_DSN`` is set (see
``scripts/postgres.sh``). Every run on a durable store then loads back a
sample of the stored sessions (every ``max(1, agents // 20)``-th: all of
them below 40 agents, otherwise 20 to 39) and checks that each has every
event and passes the log invariants.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import trio

import retinue
from retinue.session import Session
from retinue.stores import AppendBatch, JSONLStore, MemoryStore, PostgresStore, SQLiteStore
from retinue.stores._writebehind import BufferedStore
from retinue.testing import DelegatingStore, ScriptedModel, check_session_invariants

from ._common import drive_all

POSTGRES_ENV = "RETINUE_TEST_POSTGRES_DSN"


@retinue.tool(parallel_safe=True)
async def lookup(city: str) -> str:
    """Weather for a city.

    Args:
        city: Which city.
    """
    await trio.lowlevel.checkpoint()
    return f"sunny in {city}"


class TimedStore(DelegatingStore):
    """Delegates to a store and times each flush started while ``timing``, in two parts.

    ``commit_latencies`` holds, per flush that wrote something, the seconds from the
    flush call until the backend write holding its events returned (read in
    the writer's thread for a blocking backend): the store's own latency,
    group-commit queueing included. ``resume_waits`` holds the seconds from that
    write's return until the flushing task ran again: the wait for trio's
    scheduler, which no store can shorten.

    Like a plain store, it offers ``flush_nowait``, so the loop commits a
    store that is not durable synchronously through it, as it does a bare
    ``MemoryStore``, and the memory floor costs what it costs without the
    wrapper.
    """

    def __init__(self, store: BufferedStore) -> None:
        super().__init__(store)
        # Its flush adds no wait to the wrapped store's, which may take the unguarded path.
        self.durable = store.durable
        self.commit_latencies: list[float] = []
        self.resume_waits: list[float] = []
        self.timing = False
        self._written: dict[str, float] = {}
        backend = store._backend
        write = backend.write

        def timed_write(batches: Sequence[AppendBatch]) -> list[retinue.StoreError | None]:
            results = write(batches)
            done = time.perf_counter()
            for batch in batches:
                self._written[batch.session_id] = done
            return results

        backend.write = timed_write  # type: ignore[method-assign]

    def _record(self, session: Session, start: float, end: float) -> None:
        done = self._written.pop(session.id, None)
        if done is not None and done >= start:
            self.commit_latencies.append(done - start)
            self.resume_waits.append(max(0.0, end - done))

    async def flush(self, session: Session) -> None:
        timing, start = self.timing, time.perf_counter()
        self._written.pop(session.id, None)
        await self.store.flush(session)
        if timing:
            self._record(session, start, time.perf_counter())

    def flush_nowait(self, session: Session) -> bool:
        timing, start = self.timing, time.perf_counter()
        self._written.pop(session.id, None)
        committed = self.store.flush_nowait(session)
        if timing and committed:
            self._record(session, start, time.perf_counter())
        return committed


def _make_store(kind: str, where: str) -> BufferedStore:
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SQLiteStore(os.path.join(where, "sessions.db"))
    if kind == "jsonl":
        return JSONLStore(os.path.join(where, "sessions"))
    return PostgresStore(os.environ[POSTGRES_ENV], schema=where)


async def _run_runtime(kind: str, where: str, agents: int, turns: int) -> dict[str, Any]:
    store = TimedStore(_make_store(kind, where))
    model = ScriptedModel.tool_loop(
        ["lookup"], calls_per_step=1, answer_chunks=6, arguments={"lookup": '{"city": "Paris"}'}
    )
    async with retinue.open_runtime(models=model, tools=[lookup], store=store) as rt:
        handles = [
            await rt.create_agent("agent", retinue.AgentOptions(model="m"), session_id=f"agent-{i}")
            for i in range(agents)
        ]
        store.timing, start = True, time.perf_counter()

        await drive_all(handles, turns)
        store.timing, wall = False, time.perf_counter() - start
        events = sum(len(agent.session.events) for agent in handles)
        stats = store.statistics()
    return {
        "wall_s": wall,
        "events": events,
        "commit_latencies": store.commit_latencies,
        "resume_waits": store.resume_waits,
        "stats": stats,
    }


async def _run_raw(kind: str, where: str, agents: int, turns: int) -> dict[str, Any]:
    from tests.stores._kit import run_turn

    store = TimedStore(_make_store(kind, where))
    sessions = [Session.create(f"raw-{i}") for i in range(agents)]
    async with store:
        store.timing, start = True, time.perf_counter()

        async def drive(session: Session) -> None:
            store.attach_new(session)
            for turn in range(turns):
                run_turn(session, f"prompt {turn}")
                await store.flush(session)

        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(drive, session)
        store.timing, wall = False, time.perf_counter() - start
        stats = store.statistics()
    events = sum(len(session.events) for session in sessions)
    return {
        "wall_s": wall,
        "events": events,
        "commit_latencies": store.commit_latencies,
        "resume_waits": store.resume_waits,
        "stats": stats,
    }


async def _verify(kind: str, where: str, expected: int, sample: list[str]) -> None:
    if kind == "memory":
        return
    async with _make_store(kind, where) as store:
        for session_id in sample:
            session = await store.load(session_id)
            check_session_invariants(session.events)
            assert len(session.events) == expected, (session_id, len(session.events), expected)


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def measure(mode: str, kind: str, agents: int, turns: int) -> dict[str, Any]:
    """Run one mode on one store in this process; return its figures."""
    where = tempfile.mkdtemp(prefix="retinue-bench-")
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    location = schema if kind == "postgres" else where
    runner: Callable[..., Any] = _run_runtime if mode == "runtime" else _run_raw
    try:
        result = trio.run(runner, kind, location, agents, turns)
        prefix = "agent-" if mode == "runtime" else "raw-"
        per_session = result["events"] // agents
        trio.run(
            _verify,
            kind,
            location,
            per_session,
            [f"{prefix}{i}" for i in range(0, agents, max(1, agents // 20))],
        )
    finally:
        shutil.rmtree(where, ignore_errors=True)
        if kind == "postgres":
            _drop_schema(schema)
    commits, resumes = result["commit_latencies"], result["resume_waits"]
    return {
        "benchmark": "persistence",
        "mode": mode,
        "store": kind,
        "agents": agents,
        "turns": turns,
        "events": result["events"],
        "events_per_turn": round(result["events"] / (agents * turns), 1),
        "wall_s": round(result["wall_s"], 3),
        "events_per_s": round(result["events"] / result["wall_s"]),
        "flushes": len(commits),
        "commits": result["stats"].commits,
        "store_write_s": round(result["stats"].write_seconds, 3),
        "store_events_per_s": round(
            result["stats"].committed_events / max(result["stats"].write_seconds, 1e-9)
        ),
        "flush_p50_ms": round(_percentile(commits, 0.50) * 1000, 3),
        "flush_p99_ms": round(_percentile(commits, 0.99) * 1000, 3),
        "resume_wait_p50_ms": round(_percentile(resumes, 0.50) * 1000, 3),
        "resume_wait_p99_ms": round(_percentile(resumes, 0.99) * 1000, 3),
    }


def _drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(os.environ[POSTGRES_ENV], autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main(argv: list[str]) -> int:
    """Run every (mode, store) pair in its own subprocess and print one JSON line each."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.persistence")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--stores", default="memory,sqlite,jsonl,postgres")
    parser.add_argument("--modes", default="runtime,raw")
    parser.add_argument("--one", nargs=2, metavar=("MODE", "STORE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one[0], args.one[1], args.agents, args.turns)), flush=True)
        return 0
    requested = args.stores.split(",")
    # The memory store is the floor every record is compared with: always measured, first.
    stores = ["memory"] + [
        kind
        for kind in requested
        if kind != "memory" and (kind != "postgres" or os.environ.get(POSTGRES_ENV))
    ]
    if "postgres" in requested and "postgres" not in stores:
        print(f"# postgres skipped: {POSTGRES_ENV} is not set", file=sys.stderr)
    failed = False
    for mode in args.modes.split(","):
        baseline: float | None = None
        for kind in stores:
            command = [sys.executable, "-m", "benchmarks.persistence", "--one", mode, kind]
            command += ["--agents", str(args.agents), "--turns", str(args.turns)]
            out = subprocess.run(command, check=False, capture_output=True, text=True)
            if out.returncode != 0:
                failed = True
                print(f"# {mode}/{kind} failed:\n{out.stderr[-3000:]}", file=sys.stderr, flush=True)
                continue
            record = json.loads(out.stdout.strip().splitlines()[-1])
            if kind == "memory":
                baseline = record["wall_s"]
            record["slowdown_vs_memory"] = (
                round(record["wall_s"] / baseline, 2) if baseline else None
            )
            print(json.dumps(record), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
