"""A real process stopped midway through a tool call, by SIGKILL or by SIGTERM, and the
session a new runtime resumes from its SQLite file (R11.8, R7.49, R12.10)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import trio

import retinue
from retinue.session import Event, ToolResultEvent, TurnEnd, TurnEndReason
from retinue.stores import SQLiteStore
from retinue.testing import Reply, ScriptedModel, check_session_invariants

ROOT = Path(__file__).resolve().parents[2]


def _stopped_midway(mode: str, path: Path, sigterms: int) -> tuple[int, list[str]]:
    """Run the child until its tool body starts and send it *sigterms* SIGTERMs, the second
    once its final flush has begun; its exit status and what it printed."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.stores._signal_child", mode, str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    printed: list[str] = []
    try:
        assert child.stdout is not None
        for expected in ["charging", "final flush"][:sigterms] or ["charging"]:
            printed.append(child.stdout.readline().strip())
            assert printed[-1] == expected, child.stderr.read() if child.stderr else printed
            if sigterms:
                child.send_signal(signal.SIGTERM)
        rest, errors = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode in (0, -signal.SIGKILL), errors
    return child.returncode, printed + rest.split()


async def _resumed_events(path: Path) -> list[Event]:
    """The stored session as a new runtime resumes it, then runs one more turn on it."""
    store = SQLiteStore(str(path))
    async with retinue.open_runtime(models=ScriptedModel([Reply("ok")]), store=store) as rt:
        agent = await rt.resume_agent("shop-1", retinue.AgentOptions(model="scripted"))
        assert (await agent.ask("Again?")).reason.kind == "completed"
        return list(agent.session.events)


def _first_turn(events: list[Event]) -> tuple[list[ToolResultEvent], TurnEndReason]:
    results = [e.data for e in events if isinstance(e.data, ToolResultEvent)]
    [end, *_] = [e.data.reason for e in events if isinstance(e.data, TurnEnd)]
    return results, end


def test_a_tool_call_flushed_before_its_body_survives_a_sigkill_in_the_body(
    tmp_path: Path,
) -> None:
    """R11.8, R11.12: a call a ``tools/pre-execute`` listener flushed is on record when
    the process is killed in its body; loading closes the turn ``interrupted`` and
    answers the call with an error result, so the model and the caller see a call
    whose outcome is unknown rather than no call at all."""
    path = tmp_path / "shop.db"
    assert _stopped_midway("kill", path, 0) == (-signal.SIGKILL, ["charging"])
    events = trio.run(_resumed_events, path)
    check_session_invariants(events)
    [result], end = _first_turn(events)
    assert result.is_error
    assert end == TurnEndReason.interrupted()


def test_a_sigterm_cancelling_the_runtime_stores_the_turn_in_flight_disposed(
    tmp_path: Path,
) -> None:
    """R12.10, R7.49: a SIGTERM that cancels the runtime (as a service manager stops a
    process) ends it as Ctrl-C does: the turn in flight is closed ``disposed``, its
    call answered, and all of it stored before the process exits."""
    path = tmp_path / "shop.db"
    assert _stopped_midway("term", path, 1) == (0, ["charging", "exited"])
    events = trio.run(_resumed_events, path)
    check_session_invariants(events)
    [result], end = _first_turn(events)
    assert result.is_error
    assert end == TurnEndReason.disposed()


def test_a_second_sigterm_during_the_final_flush_is_taken_by_the_receiver(
    tmp_path: Path,
) -> None:
    """R12.10: the documented SIGTERM pattern reads its receiver until the runtime has
    closed, so a second SIGTERM landing in the final flush neither cuts the flush
    short nor kills the process once it is done: the process exits on its own."""
    path = tmp_path / "shop.db"
    assert _stopped_midway("term-twice", path, 2) == (0, ["charging", "final flush", "exited"])
    events = trio.run(_resumed_events, path)
    check_session_invariants(events)
    assert _first_turn(events)[1] == TurnEndReason.disposed()
