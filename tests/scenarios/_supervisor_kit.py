"""Recording an agent's hook calls, crashing its flusher and slowing its store's commits,
for the supervision tests."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import retinue
from retinue.loop import _core, _driver, _turn
from retinue.session import Session
from retinue.stores import MemoryStore
from retinue.testing import DelegatingStore


def record(rt: retinue.Runtime, agent: retinue.Agent, name: str) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []
    rt.hooks.on(name, lambda _agent, *args: seen.append(args), agent=agent)  # type: ignore[call-overload]
    return seen


class DriverBugError(RuntimeError):
    """The simulated bug."""


def crash_in_the_post_turn_flush(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the driver's post-turn flush raise once, after the turn's ``turn/end`` is logged."""
    real = _turn.flush
    crashes: list[int] = []

    async def broken(core: _core.AgentCore, turn: int, step: int) -> None:
        if not crashes:
            crashes.append(1)
            raise DriverBugError("flush bug")
        await real(core, turn, step)

    monkeypatch.setattr(_turn, "flush", broken)
    return crashes


class FlusherBugError(RuntimeError):
    """The simulated bug in an agent's flusher."""


def crash_flusher(monkeypatch: pytest.MonkeyPatch, times: int, after: float = 0) -> list[int]:
    """Make the flusher's ``flush`` raise *times* times (a bug, not a store failure),
    each *after* virtual seconds of flushing."""
    real = _turn.flush  # what _driver imported
    crashes: list[int] = []

    async def flush(core: _core.AgentCore, turn: int, step: int) -> None:
        if len(crashes) < times:
            crashes.append(1)
            await trio.sleep(after)
            raise FlusherBugError(f"flusher bug #{len(crashes)}")
        await real(core, turn, step)

    monkeypatch.setattr(_driver, "flush", flush)
    return crashes


class SlowFlushStore(DelegatingStore):
    """A memory store whose flush takes 5 virtual seconds, as a real commit takes time;
    flushed shielded and bounded, as every ``DelegatingStore`` is, so a cancel from outside
    does not cut its flush short."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())

    def committed(self) -> int:
        """How many of the session's events are committed."""
        store = self.store
        assert isinstance(store, MemoryStore)
        return store.statistics().committed_events

    async def flush(self, session: Session) -> None:
        await trio.sleep(5)
        await self.store.flush(session)
