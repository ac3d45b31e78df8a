"""``create_agent`` of an id that an agent of another runtime has live but not yet stored:
what the two runtimes see, on one store and on two stores of one SQLite file (SPEC R12.2,
R12.7, R7.49)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

import retinue
from retinue.testing import Reply, ScriptedModel
from tests.helpers import DEADLINE, OPTIONS, user_texts

REAL_DEADLINE = 60.0
"""Real seconds: the SQLite store works in threads, which a virtual clock would jump over."""


def _errors(rt: retinue.Runtime, agent: retinue.Agent) -> list[str | None]:
    """The codes of the errors *agent* reports on ``agent/error``, as they come."""
    codes: list[str | None] = []
    rt.hooks.on(
        "agent/error",
        lambda _agent, _turn, _step, error: codes.append(getattr(error, "code", None)),
        agent=agent,
    )
    return codes


async def _create_refusal(rt: retinue.Runtime, agent_id: str) -> tuple[str, str | None]:
    try:
        await rt.create_agent("b", OPTIONS, session_id=agent_id)
    except retinue.RetinueError as exc:
        return type(exc).__name__, exc.code
    raise AssertionError(f"creating {agent_id!r} was not refused")


async def test_an_id_live_in_a_runtime_sharing_the_store_is_refused_as_tracked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.7: one store shared by two runtimes knows the id the first one's agent holds, stored
    or not: the second creation is refused ``SESSION_TRACKED``, and the first agent runs on."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    store = retinue.MemoryStore()
    with trio.fail_after(DEADLINE):
        async with store:
            async with retinue.open_runtime(models=model, store=store) as first:
                agent = await first.create_agent("a", OPTIONS, session_id="s")
                async with retinue.open_runtime(models=model, store=store) as second:
                    assert await _create_refusal(second, "s") == ("StoreError", "SESSION_TRACKED")
                assert (await agent.ask("mine")).reason.kind == "completed"
            assert user_texts((await store.load("s")).events) == ["mine"]


async def test_an_id_live_but_unstored_through_another_store_of_one_file_is_refused(
    tmp_path: Path,
) -> None:
    """R12.2, R12.7: the first store of one SQLite file claims the id as its agent is created,
    before anything of it is stored: a creation through a second store of the file is refused
    ``SESSION_ALREADY_EXISTS`` at once, as for a stored id, and the first agent's log is whole."""
    path = str(tmp_path / "sessions.db")
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    with trio.fail_after(REAL_DEADLINE):
        async with retinue.open_runtime(models=model, store=retinue.SQLiteStore(path)) as one:
            first = await one.create_agent("a", OPTIONS, session_id="s")
            first_errors = _errors(one, first)
            async with retinue.open_runtime(models=model, store=retinue.SQLiteStore(path)) as two:
                assert await _create_refusal(two, "s") == ("SessionError", "SESSION_ALREADY_EXISTS")
                assert (await first.ask("first")).reason.kind == "completed"
                assert await _create_refusal(two, "s") == ("SessionError", "SESSION_ALREADY_EXISTS")
            assert (await first.ask("first again")).reason.kind == "completed"
        assert first_errors == []
        async with retinue.SQLiteStore(path) as store:
            assert user_texts((await store.load("s")).events) == ["first", "first again"]
