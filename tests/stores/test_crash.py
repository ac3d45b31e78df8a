"""Crash safety with real processes: agents on a durable store, killed with SIGKILL (R11.8-R11.16)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from retinue._errors import StoreError
from retinue.session import Event, RequestHeader, Session, TurnEnd, TurnStart
from retinue.session._codec import encode_event
from retinue.stores._writebehind import BufferedStore
from retinue.testing import check_history_replay, check_session_invariants
from tests.stores._crash_child import open_store
from tests.stores.conftest import postgres_dsn

pytestmark = pytest.mark.crash

AGENTS = 50
SEEDS = int(os.environ.get("RETINUE_CRASH_SEEDS", "20"))
ROOT = Path(__file__).resolve().parents[2]


def _spawn(spec: str, side: Path, seed: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.stores._crash_child",
            spec,
            str(side),
            str(seed),
            str(AGENTS),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run_and_kill(spec: str, side: Path, seed: int) -> str:
    """Start a child, SIGKILL it at a random moment (sometimes before it is ready)."""
    rng = random.Random(seed)
    child = _spawn(spec, side, seed)
    try:
        if rng.random() < 0.25:
            trio.run(trio.sleep, rng.uniform(0.2, 1.5))
            moment = "during startup or resume"
        else:
            assert child.stdout is not None
            line = child.stdout.readline()
            assert line.strip() == "ready", child.stderr.read() if child.stderr else line
            trio.run(trio.sleep, rng.uniform(0.05, 1.0))
            moment = "while agents run"
    finally:
        child.send_signal(signal.SIGKILL)
        _, errors = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, errors
    return moment


def _acknowledged(side: Path, agent_id: str) -> list[str]:
    """The event lines the child saw flushed.

    A kill can cut the child's last line short: that event was never
    acknowledged, and the cut line is removed so that the next run's first
    line does not continue it.
    """
    path = side / f"{agent_id}.lines"
    if not path.exists():
        return []
    complete, _, cut = path.read_text().rpartition("\n")
    if cut:
        path.write_text(f"{complete}\n" if complete else "")
    return complete.split("\n") if complete else []


class Tracker:
    """What the parent knows about each agent's log across runs.

    Each load must hold the log the previous load verified as its exact
    prefix: the child only appends, and a load's repair (R11.8, R11.9) only
    closes or trims what lies past a flushed, balanced log, which the previous
    load already made durable. So an acknowledged line matched against that
    prefix once still matches, and only the lines acknowledged since need
    matching; the invariants and the replay still run over the whole log.
    """

    def __init__(self) -> None:
        self.logs: dict[str, tuple[Event, ...]] = {}
        self.matched: dict[str, int] = {}
        self.last_turns: dict[str, int] = {}
        self.repaired = 0
        self.resumed_turns = 0

    @property
    def lengths(self) -> dict[str, int]:
        return {agent_id: len(log) for agent_id, log in self.logs.items()}

    def check(self, session: Session, acknowledged: list[str]) -> None:
        events = tuple(session.events)
        check_session_invariants(events)
        check_history_replay(events)
        assert not session.is_turn_open
        before = self.logs.get(session.id, ())
        assert events[: len(before)] == before, f"{session.id}: a verified event changed"
        for line in acknowledged[self.matched.get(session.id, 0) :]:
            seq = json.loads(line)["seq"]
            assert seq < len(events), f"{session.id}: acknowledged seq {seq} is missing"
            assert encode_event(events[seq]) == line, f"{session.id}: seq {seq} changed"
        last = events[-1].data if events else None
        if isinstance(last, TurnEnd) and last.reason.kind == "interrupted":
            self.repaired += 1
        self._check_resume(session.id, events[len(before) :])
        self.logs[session.id] = events
        self.matched[session.id] = len(acknowledged)

    def _check_resume(self, agent_id: str, added: tuple[Event, ...]) -> None:
        """R11.16: after a resume, turns continue and the first request logs a resume header."""
        starts = [event.data for event in added if isinstance(event.data, TurnStart)]
        headers = [event.data for event in added if isinstance(event.data, RequestHeader)]
        if agent_id in self.logs and starts:
            assert starts[0].turn == self.last_turns.get(agent_id, 0) + 1
            self.resumed_turns += 1
        if agent_id in self.logs and headers:
            assert headers[0].reason == "resume", (
                f"{agent_id}: first header after resume is {headers[0].reason}"
            )
        if starts:
            self.last_turns[agent_id] = starts[-1].turn


async def _load(store: BufferedStore, agent_id: str) -> Session:
    """Load *agent_id*, waiting out a claim the killed child still holds on the server.

    The server ends a killed client's backends (and their locks) only once it
    notices the closed socket, which under load can take a moment.
    """
    with trio.fail_after(30):
        while True:
            try:
                return await store.load(agent_id)
            except StoreError as exc:
                if exc.code != "SESSION_LOCKED":
                    raise
            await trio.sleep(0.1)


async def _verify(spec: str, side: Path, tracker: Tracker) -> int:
    loaded = 0
    async with open_store(spec) as store:
        for index in range(AGENTS):
            agent_id = f"crash-{index}"
            acknowledged = _acknowledged(side, agent_id)
            if not await store.exists(agent_id):
                assert not acknowledged, f"{agent_id}: flushed events but the session is not stored"
                continue
            session = await _load(store, agent_id)
            tracker.check(session, acknowledged)
            loaded += 1
    return loaded


def _crash_cycles(spec: str, side: Path) -> Tracker:
    tracker = Tracker()
    moments: list[str] = []
    for seed in range(SEEDS):
        moments.append(_run_and_kill(spec, side, seed))
        trio.run(_verify, spec, side, tracker)
    assert "while agents run" in moments
    assert len(tracker.lengths) == AGENTS
    assert tracker.resumed_turns > 0
    print(
        f"{spec.partition(':')[0]}: {SEEDS} kills, {tracker.repaired} repaired loads, "
        f"{tracker.resumed_turns} resumed agents ran turns, {sum(tracker.lengths.values())} events"
    )
    return tracker


def test_crash_sqlite_store_survives_sigkill(tmp_path: Path) -> None:
    """R11.8-R11.16: SQLiteStore under SIGKILL keeps every flushed event, repairs, and resumes."""
    side = tmp_path / "side"
    side.mkdir()
    tracker = _crash_cycles(f"sqlite:{tmp_path / 'sessions.db'}", side)
    assert sum(tracker.lengths.values()) > AGENTS * 20


def test_crash_jsonl_store_survives_sigkill(tmp_path: Path) -> None:
    """R11.8-R11.16: JSONLStore under SIGKILL keeps every flushed event, repairs torn tails, and resumes."""
    side = tmp_path / "side"
    side.mkdir()
    tracker = _crash_cycles(f"jsonl:{tmp_path / 'sessions'}", side)
    assert sum(tracker.lengths.values()) > AGENTS * 20


def test_crash_postgres_store_survives_sigkill(
    tmp_path: Path, postgres_schema: tuple[str, str]
) -> None:
    """R11.8-R11.16: PostgresStore under SIGKILL keeps every flushed event, repairs, and resumes."""
    dsn, schema = postgres_schema
    side = tmp_path / "side"
    side.mkdir()
    tracker = _crash_cycles(f"postgres:{schema}@{dsn}", side)
    assert sum(tracker.lengths.values()) > AGENTS * 20


_ = postgres_dsn
