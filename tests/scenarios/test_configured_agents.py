"""Agents started from a loop configuration (SPEC R12.11, R13.3-R13.6).

The memory-store scenarios run on virtual time. The SQLite scenarios run on the
real clock: the store works in worker threads, and under autojump a worker
thread would let virtual time race ahead to the deadline.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, LoopConfig, SQLiteStore
from retinue.config import AgentEntry, ParallelCapSetting
from retinue.session import TurnStart, UserMessage
from retinue.supervisors import (
    CONFIG_START_FAILED,
    ConfigStartFailure,
    bind_parallel_cap,
    start_configured_agents,
)
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec
from tests.helpers import echo, nap, texts

FRESH_ID = re.compile(
    r"^writer-session-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$"
)
DEADLINE = 600.0
REAL_DEADLINE = 60.0


def model() -> ScriptedModel:
    """A model that answers every request."""
    return ScriptedModel([Reply("ok")], repeat_last=True)


def failures(rt: retinue.Runtime) -> list[ConfigStartFailure]:
    """Listen to ``agent-loop/config-start-failed`` and return the list it fills."""
    heard: list[ConfigStartFailure] = []
    rt.hooks.on(CONFIG_START_FAILED, heard.append)
    return heard


def turns(agent: retinue.Agent) -> list[int]:
    """The turn number of every ``turn/start`` in *agent*'s log."""
    return [e.data.turn for e in agent.session.events if isinstance(e.data, TurnStart)]


@asynccontextmanager
async def sqlite_runtime(path: Path, **options: object) -> AsyncIterator[retinue.Runtime]:
    """Open a runtime over the SQLite file *path* under a real-clock deadline."""
    with trio.fail_after(REAL_DEADLINE):
        async with retinue.open_runtime(
            models=model(),
            store=SQLiteStore(str(path)),
            **options,  # type: ignore[arg-type]
        ) as rt:
            yield rt


async def stored_ids(path: Path) -> list[str]:
    """The ids of every session stored in the SQLite file *path*."""
    async with SQLiteStore(str(path)) as store:
        return [header.id for header in await store.list()]


# -- memory store (virtual time) -------------------------------------------------------------


async def test_open_runtime_starts_configured_agents_before_yielding(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.11, R13.3: configured agents are live when the runtime is handed over, with their options."""
    scripted = model()
    config = LoopConfig(
        agents=(
            AgentEntry(
                "writer", model="m1", provider="openai", max_tokens=2048, cwd="/srv/project"
            ),
            AgentEntry("reviewer", session_id="reviewer-main"),
        )
    )
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=scripted, config=config) as rt:
            writer, reviewer = rt.agents.list()
            assert FRESH_ID.match(writer.id)
            assert writer.options == AgentOptions(
                model="m1", provider="openai", max_tokens=2048, cwd="/srv/project"
            )
            assert writer.session.header.cwd == "/srv/project"
            assert reviewer.id == "reviewer-main"
            assert (await writer.ask("hi")).reason.kind == "completed"
            request = scripted.requests[0]
            assert (request.session_id, request.model, request.max_tokens) == (
                writer.id,
                "m1",
                2048,
            )


async def test_an_entry_s_turn_limits_apply_to_its_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R13.3: an entry's ``max_steps`` and ``max_prompts_per_turn`` are its agent's options:
    a model asking for a tool at every step is stopped after one, and prompts queued
    behind a running turn are taken one a turn."""
    scripted = ScriptedModel(
        [CallTools([ToolCallSpec("echo", '{"text": "x"}')]), Reply("a"), Reply("b")]
    )
    config = LoopConfig(agents=(AgentEntry("w", model="m", max_steps=1, max_prompts_per_turn=1),))
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=scripted, tools=[echo], config=config) as rt:
            [agent] = rt.agents.list()
            assert (agent.options.max_steps, agent.options.max_prompts_per_turn) == (1, 1)
            capped = await agent.ask("loop")
            assert (capped.reason.kind, capped.reason.code) == ("error", "MAX_STEPS")
            agent.send("one")
            agent.send("two")
            await agent.wait_idle()
            prompts = [
                texts(event.data.content)
                for event in agent.session.events
                if isinstance(event.data, UserMessage)
            ]
            assert prompts == ["loop", "one", "two"]
            assert turns(agent) == [1, 2, 3]


async def test_an_entry_s_model_settings_and_persona_reach_its_requests(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R13.3: an entry's ``temperature``, ``stop`` and ``system_prompt`` are its agent's
    options: its requests carry them, the persona filled from its cwd, in place of the
    runtime's persona."""
    scripted = model()
    entry = AgentEntry(
        "w",
        model="m",
        cwd="/srv/app",
        temperature=0.2,
        stop=("END",),
        system_prompt="You review {{cwd}}.",
    )
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(
            models=scripted, config=LoopConfig(agents=(entry,)), system_prompt="Be brief."
        ) as rt:
            [agent] = rt.agents.list()
            await agent.ask("hi")
    [request] = scripted.requests
    assert (request.temperature, request.stop) == (0.2, ("END",))
    assert request.system is not None
    assert "You review /srv/app." in request.system
    assert "Be brief." not in request.system


async def test_entries_without_exact_id_get_a_new_session_per_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F7 / R13.3: no exact id means a fresh ``<id>-session-<uuid4>`` per entry and per run."""
    config = LoopConfig(agents=(AgentEntry("writer"), AgentEntry("writer")))
    seen: list[str] = []
    with trio.fail_after(DEADLINE):
        for _run in range(2):
            async with retinue.open_runtime(models=model(), config=config) as rt:
                seen.extend(agent.id for agent in rt.agents.list())
    assert len(seen) == len(set(seen)) == 4
    assert all(FRESH_ID.match(agent_id) for agent_id in seen)


async def test_session_id_is_restored_when_the_runtime_starts_it_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R13.3: a ``session_id`` the store holds is restored, not created again, even by a memory
    store; turn numbers continue."""
    config = LoopConfig(agents=(AgentEntry("keeper", session_id="kept"),))
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model(), config=config) as rt:
            heard = failures(rt)
            agent = rt.agents.get("kept")
            assert agent is not None
            await agent.ask("hi")
            await agent.dispose()
            (again,) = await start_configured_agents(rt, config)
            await again.ask("again")
            assert (again.id, turns(again), heard) == ("kept", [1, 2], [])


async def test_session_id_is_restored_from_a_memory_store_two_runtimes_share(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R13.3: "restored if stored, else created" holds for a memory store opened once and
    shared by two runtimes in turn: the second restores what the first created."""
    config = LoopConfig(agents=(AgentEntry("keeper", session_id="kept"),))
    store = retinue.MemoryStore()
    with trio.fail_after(DEADLINE):
        async with store:
            async with retinue.open_runtime(models=model(), store=store, config=config) as rt:
                first = rt.agents.get("kept")
                assert first is not None
                await first.ask("one")
            async with retinue.open_runtime(models=model(), store=store, config=config) as rt:
                again = rt.agents.get("kept")
                assert again is not None
                await again.ask("two")
                assert turns(again) == [1, 2]


async def test_resume_session_id_resumes_the_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F7 / R13.3: ``resume_session_id`` resumes the stored session; turn numbers continue."""
    config = LoopConfig(agents=(AgentEntry("archivist", resume_session_id="archive"),))
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model()) as rt:
            first = await rt.create_agent("archivist", session_id="archive")
            await first.ask("one")
            await first.dispose()
            sources: list[str] = []
            rt.hooks.on("agent/session-start", lambda _agent, source: sources.append(source))
            (again,) = await start_configured_agents(rt, config)
            await again.ask("two")
            assert (again.id, sources, turns(again)) == ("archive", ["resume"], [1, 2])


async def test_start_failures_are_contained_logged_and_notified(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R13.4: a failing entry is logged and notified with {session_id, error}; the others start."""
    config = LoopConfig(
        agents=(AgentEntry("ghost", resume_session_id="ghost-1"), AgentEntry("writer"))
    )
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model()) as rt:
            heard = failures(rt)
            started = await start_configured_agents(rt, config)
            assert [FRESH_ID.match(agent.id) is not None for agent in started] == [True]
            assert [(f.session_id, f.label) for f in heard] == [("ghost-1", "ghost")]
            assert isinstance(heard[0].error, retinue.StoreError)
            assert heard[0].error.code == "SESSION_NOT_FOUND"
    (record,) = [r for r in caplog.records if "failed to start" in r.getMessage()]
    assert "configured agent ghost-1 (ghost) failed to start" in record.getMessage()
    assert record.exc_info is None  # a typed error's message says it all


async def test_failed_listener_of_the_notification_is_logged(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R13.4: a listener failure is logged and contained; startup goes on."""
    config = LoopConfig(agents=(AgentEntry("ghost", resume_session_id="ghost-1"),))

    def broken(_failure: ConfigStartFailure) -> None:
        raise RuntimeError("listener bug")

    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model()) as rt:
            rt.hooks.on(CONFIG_START_FAILED, broken)
            heard = failures(rt)
            assert await start_configured_agents(rt, config) == ()
            assert len(heard) == 1
    assert f"agent-loop/config-start-failed listener ({__name__}." in caplog.text
    assert ".broken) failed for agent 'ghost-1' (contained)" in caplog.text
    assert "listener bug" in caplog.text


async def test_no_notification_once_the_runtime_is_shutting_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R13.4: startup failures after shutdown began are not notified."""
    config = LoopConfig(agents=(AgentEntry("late"),))
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model()) as rt:
            heard = failures(rt)
            await rt.aclose()
            assert await start_configured_agents(rt, config) == ()
            assert heard == []
            assert len(rt.agents) == 0


async def test_runtime_says_when_it_is_closing(autojump_clock: trio.testing.MockClock) -> None:
    """R12.10: ``closing`` turns true once shutdown begins, and no agent starts after it."""
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model()) as rt:
            assert not rt.closing
            await rt.aclose()
            assert rt.closing
            with pytest.raises(RuntimeError, match="closing or closed: it starts no more"):
                await rt.create_agent("late")
        with pytest.raises(RuntimeError, match="closing or closed: it starts no more"):
            await rt.create_agent("after")


# -- the cap (R13.1, R13.6) ------------------------------------------------------------------


def four_naps() -> ScriptedModel:
    """Four one-second parallel-safe tool calls per prompt, then an answer."""
    return ScriptedModel.tool_loop(["nap"], calls_per_step=4, arguments={"nap": '{"seconds": 1}'})


async def timed_ask(agent: retinue.Agent) -> float:
    """Virtual seconds one ``ask`` takes."""
    start = trio.current_time()
    assert (await agent.ask("go")).reason.kind == "completed"
    return trio.current_time() - start


async def test_configured_cap_bounds_parallel_tool_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R13.1: the configuration's cap is the runtime's ``max_parallel_tool_calls``."""
    config = LoopConfig(max_parallel_tool_calls=2, agents=(AgentEntry("worker", model="m"),))
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=four_naps(), tools=[nap], config=config) as rt:
            (agent,) = rt.agents.list()
            assert await timed_ask(agent) == pytest.approx(2.0)


async def test_runtime_cap_is_readable_and_refuses_invalid_writes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R13.1, R13.6: the cap reads back as configured; an invalid write keeps the last good value."""
    config = LoopConfig(max_parallel_tool_calls=3)
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=four_naps(), tools=[nap], config=config) as rt:
            assert rt.max_parallel_tool_calls == 3
            rt.max_parallel_tool_calls = 4
            for bad in (0, -1, True, 2.5):
                with pytest.raises(retinue.ConfigError):
                    rt.max_parallel_tool_calls = bad  # type: ignore[assignment]
            assert rt.max_parallel_tool_calls == 4
            agent = await rt.create_agent("worker", AgentOptions(model="m"))
            assert await timed_ask(agent) == pytest.approx(1.0)


async def test_runtime_cap_is_the_configured_one_else_the_default(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R13.1: with no cap given to ``open_runtime``, the configuration's applies, else 10."""
    config = LoopConfig(max_parallel_tool_calls=3)
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=model(), config=config) as rt:
            assert rt.max_parallel_tool_calls == 3
        async with retinue.open_runtime(models=model(), max_parallel_tool_calls=None) as rt:
            assert rt.max_parallel_tool_calls == 10


async def test_editable_cap_applies_good_writes_and_keeps_the_last_good_value(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R13.6: writes reach the scheduler; a refused write leaves it on the last good value."""
    setting = ParallelCapSetting(1)
    with trio.fail_after(DEADLINE):
        async with retinue.open_runtime(models=four_naps(), tools=[nap]) as rt:
            unbind = bind_parallel_cap(rt, setting)
            agent = await rt.create_agent("worker", AgentOptions(model="m"))
            assert await timed_ask(agent) == pytest.approx(4.0)
            setting.value = 4
            assert await timed_ask(agent) == pytest.approx(1.0)
            with pytest.raises(retinue.ConfigError):
                setting.value = 0
            assert setting.value == 4
            assert await timed_ask(agent) == pytest.approx(1.0)
            unbind()
            setting.value = 2
            assert await timed_ask(agent) == pytest.approx(1.0)


# -- SQLite (persistence) --------------------------------------------------------------------


async def test_session_id_with_persistence_creates_then_restores(tmp_path: Path) -> None:
    """R13.3: with a durable store a session id is created once, then restored on later runs."""
    path = tmp_path / "sessions.db"
    config = LoopConfig(agents=(AgentEntry("reviewer", session_id="reviewer-main"),))
    async with sqlite_runtime(path, config=config) as rt:
        agent = rt.agents.get("reviewer-main")
        assert agent is not None
        await agent.ask("first")
    async with sqlite_runtime(path, config=config) as rt:
        again = rt.agents.get("reviewer-main")
        assert again is not None
        assert turns(again) == [1]
        await again.ask("second")
        assert turns(again) == [1, 2]
    assert await stored_ids(path) == ["reviewer-main"]


async def test_session_id_with_persistence_reports_a_real_failure(tmp_path: Path) -> None:
    """R13.3, R13.4: if resume fails and the store lists the id, the error is reported, not replaced."""
    path = tmp_path / "sessions.db"
    config = LoopConfig(agents=(AgentEntry("reviewer", session_id="busy"),))
    async with sqlite_runtime(path) as rt:
        heard = failures(rt)
        live = await rt.create_agent("reviewer", AgentOptions(model="m"), session_id="busy")
        await live.ask("hi")
        assert await start_configured_agents(rt, config) == ()
        assert [f.session_id for f in heard] == ["busy"]
        error = heard[0].error
        assert isinstance(error, retinue.SessionError)
        assert error.code == "SESSION_ALREADY_EXISTS"
        assert rt.agents.list() == [live]


MOVED = [
    AgentEntry("reviewer", session_id="reviewer-main", cwd="/new/project"),
    AgentEntry("reviewer", resume_session_id="reviewer-main", cwd="/new/project"),
]


@pytest.mark.parametrize("entry", MOVED, ids=["session_id", "resume_session_id"])
async def test_a_configured_cwd_other_than_the_stored_one_is_reported(
    tmp_path: Path, entry: AgentEntry
) -> None:
    """R11.15, R13.4: a stored session keeps its header's cwd, so an entry naming another one
    is a start failure, reported; the session is let go, free for a start that agrees."""
    path = tmp_path / "sessions.db"
    async with sqlite_runtime(path) as rt:
        first = await rt.create_agent("reviewer", session_id="reviewer-main", cwd="/old/project")
        await first.ask("one")
    async with sqlite_runtime(path) as rt:
        heard = failures(rt)
        assert await start_configured_agents(rt, LoopConfig(agents=(entry,))) == ()
        assert [f.session_id for f in heard] == ["reviewer-main"]
        error = heard[0].error
        assert isinstance(error, retinue.SessionError)
        assert error.code == "CWD_MISMATCH"
        assert "'/old/project'" in error.message
        assert "'/new/project'" in error.message
        with trio.fail_after(REAL_DEADLINE):
            async with SQLiteStore(str(path)) as other:  # would be locked out by a kept claim
                await other.detach(await other.load("reviewer-main"))
        again = await rt.resume_agent("reviewer-main")
        assert again.session.header.cwd == "/old/project"


async def test_resume_session_id_with_persistence(tmp_path: Path) -> None:
    """T-F7 / R13.3, R13.4: ``resume_session_id`` resumes a stored session; an unknown one is reported."""
    path = tmp_path / "sessions.db"
    async with sqlite_runtime(path) as rt:
        await (await rt.create_agent("archivist", session_id="archive")).ask("one")
    config = LoopConfig(
        agents=(
            AgentEntry("archivist", resume_session_id="archive"),
            AgentEntry("ghost", resume_session_id="never-stored"),
        )
    )
    async with sqlite_runtime(path) as rt:
        heard = failures(rt)
        (again,) = await start_configured_agents(rt, config)
        await again.ask("two")
        assert (again.id, turns(again)) == ("archive", [1, 2])
        assert [f.session_id for f in heard] == ["never-stored"]
    assert await stored_ids(path) == ["archive"]


async def test_entries_without_exact_id_with_persistence_never_collide(tmp_path: Path) -> None:
    """R13.3: a fresh session per run, so persisted logs of earlier runs are left alone."""
    path = tmp_path / "sessions.db"
    config = LoopConfig(agents=(AgentEntry("writer"),))
    ids: list[str] = []
    for _run in range(2):
        async with sqlite_runtime(path, config=config) as rt:
            (agent,) = rt.agents.list()
            await agent.ask("hi")
            ids.append(agent.id)
    assert ids[0] != ids[1]
    assert sorted(await stored_ids(path)) == sorted(ids)


async def test_session_id_with_persistence_reports_why_a_stored_session_did_not_load(
    tmp_path: Path,
) -> None:
    """R13.3, R13.4: a stored but unloadable session is reported as such, never created afresh."""
    root = tmp_path / "sessions"
    with trio.fail_after(REAL_DEADLINE):
        async with retinue.open_runtime(models=model(), store=retinue.JSONLStore(root)) as rt:
            await (await rt.create_agent("reviewer", session_id="reviewer-main")).ask("hi")
        (log_file,) = root.rglob("*.jsonl")
        lines = log_file.read_text().splitlines()
        lines[2] = "{not json"
        log_file.write_text("\n".join(lines) + "\n")
        config = LoopConfig(agents=(AgentEntry("reviewer", session_id="reviewer-main"),))
        async with retinue.open_runtime(models=model(), store=retinue.JSONLStore(root)) as rt:
            heard = failures(rt)
            assert await start_configured_agents(rt, config) == ()
            assert [f.session_id for f in heard] == ["reviewer-main"]
            assert isinstance(heard[0].error, retinue.SessionError)
            assert heard[0].error.code == "CORRUPT_SESSION"
