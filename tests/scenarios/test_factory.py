"""Creation: identity, the session-start source, setup and publication (SPEC 12; T-F1..T-F3)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime


def record(rt: retinue.Runtime, log: list[str], *names: str) -> None:
    """Append ``"<name> <agent id>"`` to *log* whenever one of the notifications fires."""
    for name in names:
        rt.hooks.on(name, lambda target, *_args, name=name: log.append(f"{name} {target.id}"))  # type: ignore[call-overload]


# -- T-F1 identity ------------------------------------------------------------


async def test_create_agent_uses_the_callers_session_id(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F1 / R1.5, R12.2: the caller's session id is the agent id and the session id."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("writer", OPTIONS, session_id="exact-id")
        assert (agent.id, agent.session.id) == ("exact-id", "exact-id")
        assert rt.agents.get("exact-id") is agent
        await agent.ask("hi")
        assert model.requests[0].session_id == "exact-id"


async def test_create_agent_without_session_id_gets_a_fresh_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F1 / R13.3: without an exact id each agent gets a fresh ``<name>-session-<uuid>``."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        first = await rt.create_agent("writer", OPTIONS)
        second = await rt.create_agent("writer", OPTIONS)
        assert first.id != second.id
        assert first.id.startswith("writer-session-")
        assert second.id.startswith("writer-session-")


async def test_create_agent_rejects_a_live_duplicate_before_anything(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F1 / R12.2: a duplicate live id is refused before setup runs or anything is announced."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        announced: list[str] = []
        record(rt, announced, "agent/created", "agent/session-start")
        first = await rt.create_agent("a", OPTIONS, session_id="taken")
        setups: list[str] = []
        with pytest.raises(retinue.SessionError) as raised:
            await rt.create_agent(
                "b", OPTIONS, session_id="taken", setup=lambda a: setups.append(a.id)
            )
        assert raised.value.code == "SESSION_ALREADY_EXISTS"
        assert setups == []
        assert announced == ["agent/created taken", "agent/session-start taken"]
        assert rt.agents.get("taken") is first
        assert (await first.ask("still mine")).reason.kind == "completed"


async def test_create_agent_rejects_a_stored_id(autojump_clock: trio.testing.MockClock) -> None:
    """T-F1 / R11.3: an id already in the store (a disposed agent's log) cannot be created again."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="kept")
        await agent.ask("hi")
        await agent.dispose()
        with pytest.raises(retinue.SessionError) as raised:
            await rt.create_agent("a", OPTIONS, session_id="kept")
        assert raised.value.code == "SESSION_ALREADY_EXISTS"
        assert rt.agents.get("kept") is None


@pytest.mark.parametrize("options", [{"model": "scripted"}, "scripted"], ids=["dict", "str"])
async def test_create_and_resume_refuse_options_that_are_not_agent_options(
    autojump_clock: trio.testing.MockClock, options: object
) -> None:
    """R2.5: ``options`` is an AgentOptions or None; anything else is a TypeError naming it."""
    message = rf"^options must be an AgentOptions or None, got {type(options).__name__}$"
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        await (await rt.create_agent("a", OPTIONS, session_id="s")).dispose()
        with pytest.raises(TypeError, match=message):
            await rt.create_agent("b", options)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=message):
            await rt.resume_agent("s", options)  # type: ignore[arg-type]
        assert len(rt.agents) == 0


@pytest.mark.parametrize("setup", [5, "configure"], ids=["int", "str"])
async def test_every_way_to_start_an_agent_refuses_a_setup_that_is_not_callable(
    autojump_clock: trio.testing.MockClock, setup: object
) -> None:
    """R12.6: ``setup`` is a callable taking the agent, or None; anything else is a TypeError naming
    it, before the session is made or loaded, not a failed call of an int ("'int' object is not
    callable") naming no argument."""
    message = rf"^setup must be a callable taking the agent, or None, got {setup!r}$"
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True)) as rt:
        source = await rt.create_agent("a", OPTIONS, session_id="s")
        await source.ask("hi")
        fork = rt.fork_agent_session("s", "fork")
        await source.dispose()
        with pytest.raises(TypeError, match=message):
            await rt.create_agent("b", OPTIONS, session_id="b", setup=setup)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=message):
            await rt.resume_agent("s", OPTIONS, setup=setup)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=message):
            await rt.start_forked(fork, OPTIONS, setup=setup)  # type: ignore[arg-type]
        assert len(rt.agents) == 0
        assert not await rt.store.exists("b")
        assert (await (await rt.resume_agent("s", OPTIONS)).ask("again")).reason.kind == (
            "completed"
        )


async def test_create_agent_takes_its_cwd_from_the_keyword_or_the_options(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.23: the ``cwd`` keyword, else ``options.cwd``, is the session's cwd and the agent's."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        by_keyword = await rt.create_agent("a", OPTIONS, cwd="/srv")
        by_options = await rt.create_agent("b", AgentOptions(model="scripted", cwd="/opt"))
        by_both = await rt.create_agent("c", AgentOptions(cwd="/opt"), cwd="/opt")
        cwds = [(a.session.header.cwd, a.options.cwd) for a in (by_keyword, by_options, by_both)]
        assert cwds == [("/srv", "/srv"), ("/opt", "/opt"), ("/opt", "/opt")]


@pytest.mark.parametrize(
    ("cwd", "message"),
    [
        ("/srv", r"^cwd '/srv' conflicts with options\.cwd '/opt'"),
        ("", r"^cwd must be an absolute path, got ''$"),
        ("relative/dir", r"^cwd must be an absolute path, got 'relative/dir'$"),
    ],
    ids=["conflicting", "empty", "relative"],
)
async def test_create_agent_refuses_a_cwd_keyword_that_is_invalid_or_conflicts(
    autojump_clock: trio.testing.MockClock, cwd: str, message: str
) -> None:
    """R4.23: an invalid ``cwd`` keyword is refused as ``AgentOptions(cwd=...)`` refuses it,
    and one that differs from ``options.cwd`` is refused rather than one of them dropped."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        with pytest.raises(retinue.ConfigError, match=message):
            await rt.create_agent("a", AgentOptions(model="scripted", cwd="/opt"), cwd=cwd)
        assert len(rt.agents) == 0


# -- T-F2 session-start source ------------------------------------------------


async def test_session_start_source_is_startup_then_resume(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F2 / R11.15: a created agent starts with ``startup``; a resumed one with ``resume``."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        sources: list[tuple[str, str]] = []
        rt.hooks.on("agent/session-start", lambda agent, source: sources.append((agent.id, source)))
        agent = await rt.create_agent("a", OPTIONS, session_id="s")
        await agent.ask("hi")
        await agent.dispose()
        await rt.resume_agent("s", OPTIONS)
        assert sources == [("s", "startup"), ("s", "resume")]


# -- T-F3 setup ---------------------------------------------------------------


async def test_setup_runs_before_publication(autojump_clock: trio.testing.MockClock) -> None:
    """T-F3 / R12.5, R12.6: setup (sync or async) runs unpublished; driving verbs are locked during it."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        order: list[str] = []
        record(rt, order, "agent/created", "agent/session-start")
        rt.hooks.on(
            "session/created", lambda session: order.append(f"session/created {session.id}")
        )
        refused: list[str] = []

        async def setup(agent: retinue.Agent) -> None:
            await trio.sleep(1)
            order.append(f"setup {agent.id}")
            assert rt.agents.get(agent.id) is None
            for verb in (agent.send, agent.steer, agent.inject):
                try:
                    verb("too early")
                except retinue.RetinueError as exc:
                    refused.append(exc.code or "")

        agent = await rt.create_agent("a", OPTIONS, session_id="s", setup=setup)
        assert order == ["setup s", "session/created s", "agent/created s", "agent/session-start s"]
        assert refused == ["AGENT_NOT_READY"] * 3
        assert list(agent.session.events) == []
        assert rt.agents.get("s") is agent
        assert (await agent.ask("now")).reason.kind == "completed"


async def test_cancel_during_setup_raises(autojump_clock: trio.testing.MockClock) -> None:
    """T-F3 / R12.6: ``cancel`` is a driving verb too; calling it during setup raises."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        outcomes: list[str] = []

        def setup(agent: retinue.Agent) -> None:
            try:
                agent.cancel("too early")
            except retinue.RetinueError as exc:
                outcomes.append(exc.code or type(exc).__name__)
            else:
                outcomes.append("accepted")

        await rt.create_agent("a", OPTIONS, setup=setup)
        assert outcomes == ["AGENT_NOT_READY"]


async def test_raising_setup_publishes_nothing_and_frees_the_id(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F3 / R12.4, R12.6: a raising setup publishes nothing, undoes its scoped work and releases the id."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        announced: list[str] = []
        record(rt, announced, "agent/created", "agent/session-start")
        rt.hooks.on(
            "session/created", lambda session: announced.append(f"session/created {session.id}")
        )
        heard: list[str] = []

        async def setup(agent: retinue.Agent) -> None:
            remove = rt.hooks.on(
                "agent/status", lambda _a, status: heard.append(status), agent=agent
            )
            rt.scoped(agent, remove)
            await trio.sleep(1)
            raise ValueError("bad plugin config")

        with pytest.raises(ValueError, match="bad plugin config"):
            await rt.create_agent("a", OPTIONS, session_id="s", setup=setup)
        assert announced == []
        assert rt.agents.get("s") is None
        assert not rt.hooks.has_listeners("agent/status")
        assert "s" not in [header.id for header in await rt.store.list()]
        again = await rt.create_agent("a", OPTIONS, session_id="s")
        assert (await again.ask("hi")).reason.kind == "completed"
        assert heard == []


async def never_settles(_agent: retinue.Agent) -> None:
    await trio.sleep_forever()


async def test_cancelled_setup_publishes_nothing_and_frees_the_id(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F3 / R12.4: a creation abandoned by its caller during a never-settling setup leaves nothing behind."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        announced: list[str] = []
        record(rt, announced, "agent/created", "agent/session-start")
        with trio.move_on_after(5) as scope:
            await rt.create_agent("a", OPTIONS, session_id="s", setup=never_settles)
        assert scope.cancelled_caught
        assert announced == []
        assert rt.agents.get("s") is None
        agent = await rt.create_agent("a", OPTIONS, session_id="s")
        assert announced == ["agent/created s", "agent/session-start s"]
        assert (await agent.ask("hi")).reason.kind == "completed"
