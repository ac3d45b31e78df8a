"""Creation, setup, publication, resume, fork and teardown (SPEC 11.5, 12; T-F1..T-F8, T-X5..T-X7)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, Message, MessageSource, ModelRouter, Text
from retinue.session import Event
from retinue.testing import Hang, Reply, ScriptedModel, check_session_invariants
from tests.helpers import OPTIONS, of_type, record_statuses, runtime, texts, turn_ends, types


def turn_numbers(events: Sequence[Event]) -> list[int]:
    """The number of every ``turn/start``."""
    return [e.data.turn for e in of_type(events, "turn/start")]  # type: ignore[union-attr]


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
    """R12.6: ``setup`` is a callable taking the agent, or None; anything else is a
    TypeError naming it, before the session is made or loaded. It failed as the call of
    an int ("'int' object is not callable"), naming no argument."""
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


# -- T-F5 / T-F6 persistence and resume ---------------------------------------


async def test_idle_inject_is_flushed_on_its_own_and_survives_resume(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F5 / R2.21, R11.18: an idle inject is flushed without a turn following, and survives dispose + resume."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="s")
        flushed = trio.Event()
        rt.hooks.on("session/flush", lambda *_args: flushed.set(), agent=agent)
        agent.inject("remember the milk", source="notes")
        await flushed.wait()
        stored = await rt.store.inspect("s")  # type: ignore[attr-defined]
        assert types(stored.events) == ["turn/start", "context/message", "turn/end"]
        await agent.dispose()
        resumed = await rt.resume_agent("s", OPTIONS)
        assert types(resumed.session.events) == ["turn/start", "context/message", "turn/end"]
        result = await resumed.ask("what should I buy?")
        assert result.turn == 2
        assert (
            texts(model.requests[0].messages[0].content)
            == '<context source="plugin">remember the milk</context>'
        )
        check_session_invariants(resumed.session.events)


async def test_resume_continues_history_turns_and_seqs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F6 / R11.16: resume keeps the log, continues turn numbers and seqs, anchors a ``resume`` header."""
    model = ScriptedModel([Reply("one"), Reply("two"), Reply("three")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="s")
        await agent.ask("first")
        await agent.ask("second")
        before = agent.session.dump()
        history = agent.session.derive_messages()
        await agent.dispose()
        resumed = await rt.resume_agent("s", OPTIONS)
        assert resumed.session.dump() == before
        assert resumed.session.derive_messages() == history
        result = await resumed.ask("third")
        events = resumed.session.events
        assert result.turn == 3
        assert turn_numbers(events) == [1, 2, 3]
        assert [e.seq for e in events] == list(range(len(events)))
        headers = [e.data.reason for e in of_type(events, "request/header")]  # type: ignore[union-attr]
        assert headers == ["initial", "resume"]
        assert [texts(m.content) for m in model.requests[2].messages] == [
            "first",
            "one",
            "second",
            "two",
            "third",
        ]
        assert resumed.session.header.cwd is None
        check_session_invariants(events)


async def test_resume_recomposes_the_session_prefix(autojump_clock: trio.testing.MockClock) -> None:
    """T-F6 / R8.6, R11.16: a resumed driver composes the prefix again and anchors it in its header."""
    model = ScriptedModel([Reply("one"), Reply("two")])
    async with runtime(model) as rt:
        compositions: list[str] = []

        async def prefix(
            agent: retinue.Agent, _seed: object, _signal: object, proceed: object
        ) -> Any:
            compositions.append(agent.id)
            return [Message("user", (Text(f"prefix {len(compositions)}"),)), *await proceed()]  # type: ignore[operator, misc]

        rt.hooks.on("agent/session-prefix", prefix)
        agent = await rt.create_agent("a", OPTIONS, session_id="s")
        await agent.ask("first")
        await agent.dispose()
        resumed = await rt.resume_agent("s", OPTIONS)
        await resumed.ask("second")
        assert compositions == ["s", "s"]
        assert texts(model.requests[1].messages[0].content) == "prefix 2"
        last_header = of_type(resumed.session.events, "request/header")[-1].data
        assert last_header.reason == "resume"  # type: ignore[union-attr]
        assert texts(last_header.header.message_prefix[0].content) == "prefix 2"  # type: ignore[union-attr]


async def test_resume_of_unknown_or_live_ids_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F6 / R12.7, R11.1: resuming an id that is not stored, or is live, raises and starts nothing."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="live")
        with pytest.raises(retinue.RetinueError):
            await rt.resume_agent("never-stored", OPTIONS)
        with pytest.raises(retinue.RetinueError):
            await rt.resume_agent("live", OPTIONS)
        assert rt.agents.list() == [agent]


@pytest.mark.parametrize("stored", ["/old/project", None])
async def test_resume_refuses_options_naming_another_cwd(
    autojump_clock: trio.testing.MockClock, stored: str | None
) -> None:
    """R11.15: a resumed session keeps the cwd of its stored header; options naming another
    are refused (``CWD_MISMATCH``), and the same cwd, or none, resumes it."""
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="s", cwd=stored)
        await agent.ask("hi")
        await agent.dispose()
        with pytest.raises(retinue.SessionError) as raised:
            await rt.resume_agent("s", AgentOptions(model="scripted", cwd="/new/project"))
        assert raised.value.code == "CWD_MISMATCH"
        held = "no cwd" if stored is None else repr(stored)
        for named in ("session 's'", held, "'/new/project'"):
            assert named in raised.value.message
        assert rt.agents.get("s") is None
        resumed = await rt.resume_agent("s", AgentOptions(model="scripted", cwd=stored))
        assert (resumed.session.header.cwd, (await resumed.ask("again")).turn) == (stored, 2)


async def test_resumed_agent_can_be_disposed(autojump_clock: trio.testing.MockClock) -> None:
    """T-F6 / R2.35, R12.8: dispose is memoized per agent; a resumed agent reusing a disposed id really stops."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="s")
        await agent.ask("hi")
        await agent.dispose()
        resumed = await rt.resume_agent("s", OPTIONS)
        gone: list[str] = []
        rt.hooks.on("agent/disposed", lambda a: gone.append(a.id))
        await resumed.dispose()
        assert resumed.status == "disposed"
        assert rt.agents.get("s") is None
        assert gone == ["s"]
        with pytest.raises(retinue.AgentDisposedError):
            resumed.send("late")


# -- T-F8 scoped listeners ----------------------------------------------------


async def test_scoped_listeners_hear_only_their_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F8 / R6.5: a listener scoped to one agent hears none of another agent's dispatches."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        first = await rt.create_agent("a", OPTIONS)
        second = await rt.create_agent("b", OPTIONS)
        heard: list[str] = []

        async def submit(
            agent: retinue.Agent, _content: object, _source: object, proceed: object
        ) -> Any:
            heard.append(f"prompt-submit {agent.id}")
            return await proceed()  # type: ignore[operator]

        rt.hooks.on(
            "agent/status", lambda agent, _status: heard.append(f"status {agent.id}"), agent=first
        )
        rt.hooks.on(
            "session/event",
            lambda session, _event: heard.append(f"event {session.id}"),
            agent=first,
        )
        rt.hooks.on("agent/prompt-submit", submit, agent=first.id)
        await second.ask("not for you")
        assert heard == []
        await first.ask("for you")
        assert {entry.split(" ")[1] for entry in heard} == {first.id}
        assert f"prompt-submit {first.id}" in heard


async def test_setup_scoped_listeners_precede_session_start_and_die_with_the_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F8 / R12.5, R12.9: listeners registered in setup hear session-start and are removed at disposal."""
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        heard: list[str] = []

        def setup(agent: retinue.Agent) -> None:
            for name in ("agent/session-start", "agent/pre-step"):
                remove = rt.hooks.on(
                    name, lambda _agent, *_args, name=name: heard.append(name), agent=agent
                )
                rt.scoped(agent, remove)

        agent = await rt.create_agent("a", OPTIONS, setup=setup)
        await agent.ask("hi")
        assert heard == ["agent/session-start", "agent/pre-step"]
        await agent.dispose()
        assert not rt.hooks.has_listeners("agent/session-start")
        assert not rt.hooks.has_listeners("agent/pre-step")


async def test_agent_scoped_listeners_die_with_their_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F8 / R6.5, R12.9: a listener scoped to an agent handle does not outlive it (not even into a resume)."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="s")
        heard = record_statuses(rt, agent)
        await agent.ask("hi")
        await agent.dispose()
        heard.clear()
        resumed = await rt.resume_agent("s", OPTIONS)
        await resumed.ask("again")
        assert heard == []
        assert not rt.hooks.has_listeners("agent/status")


# -- T-X5 .. T-X7 ---------------------------------------------------------------


async def test_dispose_survives_raising_status_listeners(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X5 / R2.35: a raising ``disposed`` status listener breaks neither disposal nor registry removal."""
    async with runtime(ScriptedModel([Hang()])) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        gone: list[str] = []

        def raising(_agent: retinue.Agent, status: str) -> None:
            raise RuntimeError(f"status listener broke on {status}")

        rt.hooks.on("agent/status", raising, agent=agent)
        rt.hooks.on("agent/disposed", lambda a: gone.append(a.id), agent=agent)
        agent.send("go")
        await trio.sleep(1)
        await agent.dispose()
        assert agent.status == "disposed"
        assert turn_ends(agent.session.events) == ["disposed"]
        assert rt.agents.get(agent.id) is None
        assert gone == [agent.id]
        check_session_invariants(agent.session.events)


async def test_model_less_agent_fails_with_a_clear_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X6 / R2.8, R7.33: no model is an ``error`` turn naming the agent and both ways to supply one."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", AgentOptions(), session_id="no-model")
        errors: list[BaseException] = []
        rt.hooks.on(
            "agent/error", lambda _a, _turn, _step, error: errors.append(error), agent=agent
        )
        result = await agent.ask("hi")
        assert (result.reason.kind, result.reason.step) == ("error", 1)
        message = result.reason.message or ""
        assert "no-model" in message
        assert "AgentOptions(model=" in message
        assert "agent/request" in message
        assert len(errors) == 1
        assert model.statistics().calls == 0
        check_session_invariants(agent.session.events)


async def test_agent_request_listener_can_supply_the_model(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X6 / R2.8, R7.33: an ``agent/request`` listener returning a config with a model makes it work."""
    import attrs

    model = ScriptedModel({"picked": [Reply("ok")]})
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", AgentOptions())

        async def choose(
            _agent: retinue.Agent, _turn: int, _step: int, config: object, proceed: object
        ) -> Any:
            seed = await proceed()  # type: ignore[operator]
            return attrs.evolve(seed, model="picked")

        rt.hooks.on("agent/request", choose, agent=agent)
        result = await agent.ask("hi")
        assert result.reason.kind == "completed"
        assert model.requests[0].model == "picked"
        header = of_type(agent.session.events, "request/header")[0].data.header  # type: ignore[union-attr]
        assert header.config.model == "picked"


async def test_queued_notification_carries_the_resolved_source(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X6 / R1.3, R2.10: ``agent/queued`` reports the resolved source, never ``None``."""
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        queued: list[tuple[str, MessageSource, bool]] = []
        rt.hooks.on(
            "agent/queued",
            lambda _a, content, info: queued.append(
                (texts(content), info["source"], info["steering"])
            ),
            agent=agent,
        )
        agent.send("from the user")
        agent.send("from a plugin", source="reminders")
        await agent.wait_idle()
        assert queued == [
            ("from the user", MessageSource("user"), False),
            ("from a plugin", MessageSource("plugin", "reminders"), False),
        ]
        sources = [e.data.source for e in of_type(agent.session.events, "user/message")]  # type: ignore[union-attr]
        assert sources == [MessageSource("user"), MessageSource("plugin", "reminders")]


def test_duplicate_adapter_registration_is_refused() -> None:
    """T-X6 / R10.7: registering a second adapter for a model name fails all-or-nothing."""
    router = ModelRouter()
    router.add(ScriptedModel([Reply("a")]), "m1")
    with pytest.raises(retinue.ModelError) as raised:
        router.add(ScriptedModel([Reply("b")]), "m2", "m1")
    assert raised.value.code == "DUPLICATE_ADAPTER"
    assert sorted(name for _provider, name in router.routes) == ["m1"]


async def test_forked_agent_continues_turn_numbers(autojump_clock: trio.testing.MockClock) -> None:
    """T-X7 / R4.16, R4.25, R11.17: a fork keeps lineage and history, starts fresh and continues turn numbers."""
    model = ScriptedModel([Reply("one"), Reply("two"), Reply("forked three")])
    async with runtime(model) as rt:
        sources: list[tuple[str, str]] = []
        rt.hooks.on("agent/session-start", lambda agent, source: sources.append((agent.id, source)))
        parent = await rt.create_agent("p", OPTIONS, session_id="parent")
        await parent.ask("first")
        await parent.ask("second")
        session = rt.fork_agent_session("parent", "child")
        assert session.header.parent_session == "parent"
        assert session.header.seed_length == len(parent.session.events)
        child = await rt.start_forked(session, OPTIONS)
        result = await child.ask("third")
        assert child.id == "child"
        assert result.turn == 3
        assert turn_numbers(child.session.events) == [1, 2, 3]
        assert turn_numbers(parent.session.events) == [1, 2]
        assert sources[-1] == ("child", "startup")
        texts_seen = [texts(m.content) for m in model.requests[2].messages]
        assert texts_seen == ["first", "one", "second", "two", "third"]
        check_session_invariants(child.session.events)


async def test_start_forked_refuses_options_naming_another_cwd(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.25, R11.17: a fork keeps its source's cwd; options naming another are refused
    (``CWD_MISMATCH``) and nothing starts, and the same cwd starts it."""
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True)) as rt:
        parent = await rt.create_agent("p", OPTIONS, session_id="parent", cwd="/old")
        await parent.ask("first")
        session = rt.fork_agent_session("parent", "child")
        with pytest.raises(retinue.SessionError) as raised:
            await rt.start_forked(session, AgentOptions(model="scripted", cwd="/elsewhere"))
        assert raised.value.code == "CWD_MISMATCH"
        assert "'/old'" in raised.value.message
        assert "'/elsewhere'" in raised.value.message
        assert rt.agents.get("child") is None
        child = await rt.start_forked(session, AgentOptions(model="scripted", cwd="/old"))
        assert (child.session.header.cwd, (await child.ask("again")).turn) == ("/old", 2)


@pytest.mark.parametrize("session", ["child", None], ids=["id", "none"])
async def test_start_forked_refuses_what_is_no_session_naming_it(
    autojump_clock: trio.testing.MockClock, session: object
) -> None:
    """R11.17: ``start_forked`` takes the Session ``fork_agent_session`` returned; anything
    else (its id, say) is a TypeError naming the argument. It failed reading ``.id`` of
    it, an AttributeError naming no argument."""
    message = rf"^session must be a Session \(from fork_agent_session\), got {session!r}$"
    async with runtime(ScriptedModel([Reply("ok")])) as rt:
        with pytest.raises(TypeError, match=message):
            await rt.start_forked(session)  # type: ignore[arg-type]
        assert len(rt.agents) == 0


async def test_fork_at_an_earlier_boundary_continues_from_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-X7 / R4.16, R4.25: forking at turn 1's end makes the child's next turn 2, without turn 2's history."""
    model = ScriptedModel([Reply("one"), Reply("two"), Reply("branch")])
    async with runtime(model) as rt:
        parent = await rt.create_agent("p", OPTIONS, session_id="parent")
        await parent.ask("first")
        boundary = of_type(parent.session.events, "turn/end")[0].seq
        await parent.ask("second")
        child = await rt.start_forked(rt.fork_agent_session("parent", "child", boundary), OPTIONS)
        result = await child.ask("branch off")
        assert result.turn == 2
        assert [texts(m.content) for m in model.requests[2].messages] == [
            "first",
            "one",
            "branch off",
        ]
        with pytest.raises(retinue.SessionError) as raised:
            rt.fork_agent_session("parent", "child")
        assert raised.value.code == "SESSION_ALREADY_EXISTS"
        check_session_invariants(child.session.events)


async def test_resumed_fork_keeps_its_lineage_and_seed_boundary(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """T-F4 / R4.25, R11.16: a fork disposed and resumed keeps its parent, its seed
    boundary and the seeded history, and goes on numbering its turns."""
    model = ScriptedModel([Reply("one"), Reply("two"), Reply("forked"), Reply("resumed")])
    with trio.fail_after(60):
        async with runtime(model) as rt:
            parent = await rt.create_agent("p", OPTIONS, session_id="parent")
            await parent.ask("first")
            boundary = of_type(parent.session.events, "turn/end")[0].seq
            await parent.ask("second")
            child = await rt.start_forked(
                rt.fork_agent_session("parent", "child", boundary), OPTIONS
            )
            await child.ask("branch off")
            before = child.session.dump()
            await child.dispose()
            resumed = await rt.resume_agent("child", OPTIONS)
            header = resumed.session.header
            assert (header.parent_session, header.seed_length) == ("parent", boundary + 1)
            assert resumed.session.dump() == before
            assert (await resumed.ask("and on")).turn == 3
            assert [texts(m.content) for m in model.requests[3].messages] == [
                "first",
                "one",
                "branch off",
                "forked",
                "and on",
            ]
            check_session_invariants(resumed.session.events)
