"""Persistence, resume and fork of agents (SPEC 11.5, 12; T-F4..T-F6, T-X7)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing

import retinue
from retinue import AgentOptions, Message, Text
from retinue.session import Event
from retinue.testing import Reply, ScriptedModel, check_session_invariants
from tests.helpers import OPTIONS, of_type, runtime, texts, types


def turn_numbers(events: Sequence[Event]) -> list[int]:
    """The number of every ``turn/start``."""
    return [e.data.turn for e in of_type(events, "turn/start")]  # type: ignore[union-attr]


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


@pytest.mark.parametrize(
    ("spelled", "same"),
    [
        ("/old/project/", True),
        ("/old/./project", True),
        ("/old//project", True),
        ("/old/x/../project", False),
    ],
)
async def test_resume_takes_the_stored_cwd_spelled_otherwise(
    autojump_clock: trio.testing.MockClock, spelled: str, same: bool
) -> None:
    """R11.15: options naming the stored cwd spelled otherwise (a trailing slash, a ``.``,
    a doubled separator) name the same directory: the session resumes, its header's cwd
    kept. A ``..`` is refused (``CWD_MISMATCH``): through a link, ``x/..`` is elsewhere."""
    async with runtime(ScriptedModel([Reply("ok")], repeat_last=True)) as rt:
        agent = await rt.create_agent("a", OPTIONS, session_id="s", cwd="/old/project")
        await agent.ask("hi")
        await agent.dispose()
        options = AgentOptions(model="scripted", cwd=spelled)
        if not same:
            with pytest.raises(retinue.SessionError) as raised:
                await rt.resume_agent("s", options)
            assert raised.value.code == "CWD_MISMATCH"
            return
        resumed = await rt.resume_agent("s", options)
        assert resumed.session.header.cwd == "/old/project"
        assert (await resumed.ask("again")).turn == 2


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


# -- T-X7 fork -------------------------------------------------------------------


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
    """R11.17: ``start_forked`` takes the Session ``fork_agent_session`` returned; anything else
    (its id, say) is a TypeError naming the argument, not an AttributeError from reading its ``.id``
    that names no argument."""
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


async def _resume_refusal(rt: retinue.Runtime, agent_id: str) -> tuple[str, str | None]:
    """The type and code of what ``rt.resume_agent(agent_id)`` raised."""
    try:
        await rt.resume_agent(agent_id, OPTIONS)
    except (retinue.RetinueError, RuntimeError) as exc:
        return type(exc).__name__, getattr(exc, "code", None)
    raise AssertionError(f"resuming {agent_id!r} was not refused")


async def test_resume_refusals_say_why_the_id_cannot_be_resumed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R12.3, R12.7: a resume of an id the store does not hold, of one live in this runtime,
    and of one another runtime sharing the store writes is refused with the code its
    docstring names; once the runtime is shutting down, with ``RuntimeError``."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    store = retinue.MemoryStore()
    async with store, runtime(model, store=store) as rt, runtime(model, store=store) as other:
        agent = await rt.create_agent("a", OPTIONS, session_id="s")
        await agent.ask("stored")
        assert await _resume_refusal(rt, "missing") == ("StoreError", "SESSION_NOT_FOUND")
        assert await _resume_refusal(rt, "s") == ("SessionError", "SESSION_ALREADY_EXISTS")
        assert await _resume_refusal(other, "s") == ("StoreError", "SESSION_TRACKED")
        await agent.dispose()
        await rt.aclose()
        assert await _resume_refusal(rt, "s") == ("RuntimeError", None)
