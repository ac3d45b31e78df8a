"""Child process of the crash tests: runs agents on a durable store until it is killed.

Usage: ``python -m tests.stores._crash_child STORE SIDE_DIR SEED AGENTS`` where
STORE is ``sqlite:PATH``, ``jsonl:DIR`` or ``postgres:SCHEMA@DSN``. Every agent
that exists in the store is resumed, the others are created; then each runs
turns (two parallel tool calls with random sleeps, then a streamed answer)
forever, while a flusher commits every session at random moments (mid-turn
too). After every flush returns, the canonical lines of the events it made
durable are appended to ``SIDE_DIR/<id>.lines``, so the parent knows what was
acknowledged before the kill. Prints ``ready`` once every agent runs.
"""

from __future__ import annotations

import os
import random
import sys

import trio

import retinue
from retinue.session import Session
from retinue.session._codec import encode_event
from retinue.stores import JSONLStore, PostgresStore, SQLiteStore
from retinue.stores._writebehind import BufferedStore
from retinue.testing import DelegatingStore, ScriptedModel

_rng = random.Random()


def open_store(spec: str) -> BufferedStore:
    """Build a store from a ``kind:location`` spec."""
    kind, _, location = spec.partition(":")
    if kind == "sqlite":
        return SQLiteStore(location)
    if kind == "jsonl":
        return JSONLStore(location)
    schema, _, dsn = location.partition("@")
    return PostgresStore(dsn, schema=schema)


class RecordingStore(DelegatingStore):
    """Delegates to a store; after each flush returns, records what it made durable."""

    def __init__(self, store: BufferedStore, side_dir: str) -> None:
        super().__init__(store)
        self.side_dir = side_dir
        self.recorded: dict[str, int] = {}

    def attach(self, session: Session) -> None:
        self.store.attach(session)
        self.recorded[session.id] = len(session.events)

    def attach_new(self, session: Session) -> None:
        self.store.attach_new(session)
        self.recorded[session.id] = 0

    async def flush(self, session: Session) -> None:
        end = len(session.events)
        await self.store.flush(session)
        start = self.recorded.get(session.id, end)
        if end > start:
            data = "".join(encode_event(event) + "\n" for event in session.events[start:end])
            fd = os.open(
                os.path.join(self.side_dir, f"{session.id}.lines"),
                os.O_WRONLY | os.O_APPEND | os.O_CREAT,
            )
            try:
                os.write(fd, data.encode())
            finally:
                os.close(fd)
            self.recorded[session.id] = end

    async def detach(self, session: Session) -> None:
        await self.flush(session)
        await self.store.detach(session)


@retinue.tool(parallel_safe=True)
async def wait(ms: int) -> str:
    """Sleep up to *ms* milliseconds.

    Args:
        ms: The longest sleep.
    """
    await trio.sleep(_rng.random() * ms / 1000)
    return "done waiting"


async def main(spec: str, side_dir: str, seed: int, agents: int) -> None:
    """Resume or create the agents, then drive them until killed."""
    _rng.seed(seed)
    store = RecordingStore(open_store(spec), side_dir)
    model = ScriptedModel.tool_loop(
        ["wait"], calls_per_step=2, answer_chunks=4, arguments={"wait": '{"ms": 40}'}, delay=0.002
    )
    async with retinue.open_runtime(models=model, tools=[wait], store=store) as rt:
        options = retinue.AgentOptions(model="m")
        handles = []
        for index in range(agents):
            agent_id = f"crash-{index}"
            if await store.exists(agent_id):
                handles.append(await rt.resume_agent(agent_id, options))
            else:
                handles.append(await rt.create_agent("crash", options, session_id=agent_id))
        print("ready", flush=True)

        async def drive(agent: retinue.Agent) -> None:
            turn = 0
            while True:
                turn += 1
                await agent.ask(f"seed {seed} prompt {turn}")

        async def flush_mid_turn() -> None:
            """Flush every session at random moments, so kills also land after mid-turn commits."""
            while True:
                await trio.sleep(_rng.uniform(0.005, 0.05))
                async with trio.open_nursery() as flushes:
                    for agent in handles:
                        flushes.start_soon(store.flush, agent.session)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flush_mid_turn)
            for agent in handles:
                nursery.start_soon(drive, agent)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
