"""A store's worker threads are its own: an application holding every thread of trio's
shared limiter does not hold its flushes back."""

from __future__ import annotations

import threading
from pathlib import Path

import trio
import trio.testing

import retinue
from retinue import AgentOptions
from retinue.testing import Reply, ScriptedModel


async def hold_a_thread(release: threading.Event) -> None:
    """The application's own blocking call, in a thread of trio's shared limiter."""
    await trio.to_thread.run_sync(release.wait)


async def test_a_flush_runs_while_the_application_holds_every_shared_thread(
    tmp_path: Path,
) -> None:
    """R7.49: with every token of trio's default thread limiter held by the application's
    own blocking calls (an async tool's ``trio.to_thread.run_sync``, say), an agent's turn
    on a SQLite store is flushed within the flush timeout: no ``agent/error``, the turn
    stored. Real time: the threads are real."""
    release = threading.Event()
    errors: list[BaseException] = []
    limiter = trio.to_thread.current_default_thread_limiter()
    with trio.fail_after(30):
        async with trio.open_nursery() as blockers:
            try:
                for _ in range(int(limiter.total_tokens)):
                    blockers.start_soon(hold_a_thread, release)
                await trio.testing.wait_all_tasks_blocked()
                assert limiter.borrowed_tokens == limiter.total_tokens
                store = retinue.SQLiteStore(tmp_path / "sessions.db")
                model = ScriptedModel([Reply("stored")])
                async with retinue.open_runtime(models=model, store=store, flush_timeout=2) as rt:
                    rt.hooks.on(
                        "agent/error", lambda _agent, _turn, _step, error: errors.append(error)
                    )
                    agent = await rt.create_agent("a", AgentOptions(model="scripted"))
                    result = await agent.ask("go")
                    await agent.wait_idle()
                    assert result.text == "stored"
                    assert errors == []
                    assert store.statistics().buffered_events == 0
            finally:
                release.set()
