"""A new agent's id is claimed in its store from its creation on: two runtimes on two stores of
one storage creating one id meet at the second creation, not at a flush (R12.2, R12.7)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
import trio

import retinue
from retinue._errors import StoreError
from retinue.stores import SQLiteStore
from retinue.testing import DelegatingStore, Reply, ScriptedModel
from tests.helpers import OPTIONS, user_texts
from tests.stores._kit import REAL_DEADLINE, refusal
from tests.stores.conftest import StoreKit


def _runtime(kit: StoreKit) -> AbstractAsyncContextManager[retinue.Runtime]:
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    return retinue.open_runtime(models=model, store=kit.open())


def _create(rt: retinue.Runtime, agent_id: str) -> Callable[[], Awaitable[object]]:
    return lambda: rt.create_agent("b", OPTIONS, session_id=agent_id)


async def test_a_runtime_creating_an_id_another_store_has_live_is_refused_either_way(
    blocking_kit: StoreKit,
) -> None:
    """R12.7: an id another store of the storage created is refused ``SESSION_ALREADY_EXISTS``
    at the creation, whether that store's agent has flushed yet or not; that agent's log is
    whole, with none of its checkpoints failed."""
    with trio.fail_after(REAL_DEADLINE):
        async with _runtime(blocking_kit) as one, _runtime(blocking_kit) as two:
            first = await one.create_agent("a", OPTIONS, session_id="s")
            errors: list[object] = []
            one.hooks.on("agent/error", lambda *args: errors.append(args[-1]), agent=first)
            assert await refusal(_create(two, "s")) == ("SessionError", "SESSION_ALREADY_EXISTS")
            assert (await first.ask("first")).reason.kind == "completed"
            assert await refusal(_create(two, "s")) == ("SessionError", "SESSION_ALREADY_EXISTS")
            await first.dispose()
            assert await refusal(_create(two, "s")) == ("SessionError", "SESSION_ALREADY_EXISTS")
            resumed = await two.resume_agent("s", OPTIONS)
            assert user_texts(resumed.session.events) == ["first"]
        assert errors == []


async def test_a_fork_and_a_creation_of_one_id_through_two_stores_meet_at_the_second(
    blocking_kit: StoreKit,
) -> None:
    """A fork's start claims its id as a creation does: started over an id another store's
    agent holds unstored, it is refused, and a creation of the id a started fork holds is."""
    taken = ("SessionError", "SESSION_ALREADY_EXISTS")
    with trio.fail_after(REAL_DEADLINE):
        async with _runtime(blocking_kit) as one, _runtime(blocking_kit) as two:
            source = await one.create_agent("a", OPTIONS, session_id="source")
            assert (await source.ask("hello")).reason.kind == "completed"
            await two.create_agent("b", OPTIONS, session_id="created")
            fork = one.fork_agent_session("source", "created")
            assert await refusal(lambda: one.start_forked(fork, OPTIONS)) == taken
            child = await one.start_forked(one.fork_agent_session("source", "forked"), OPTIONS)
            assert await refusal(_create(two, "forked")) == taken
            assert (await child.ask("again")).reason.kind == "completed"
            assert user_texts(child.session.events) == ["hello", "again"]


async def _failing_setup(agent: retinue.Agent) -> None:
    await trio.lowlevel.checkpoint()
    raise ValueError("setup failed")


async def _endless_setup(agent: retinue.Agent) -> None:
    await trio.sleep_forever()


async def test_a_creation_that_fails_or_is_cancelled_gives_the_id_up(
    blocking_kit: StoreKit,
) -> None:
    """The claim of a creation whose setup fails, or that is cancelled before publication, is
    given up: another store of the storage creates the id, and runs its agent on it."""
    with trio.fail_after(REAL_DEADLINE):
        async with _runtime(blocking_kit) as one, _runtime(blocking_kit) as two:
            with pytest.raises(ValueError, match="setup failed"):
                await one.create_agent("a", OPTIONS, session_id="failed", setup=_failing_setup)
            with trio.move_on_after(0.2) as cancelled:
                await one.create_agent("a", OPTIONS, session_id="cancelled", setup=_endless_setup)
            assert cancelled.cancelled_caught
            for agent_id in ("failed", "cancelled"):
                agent = await two.create_agent("b", OPTIONS, session_id=agent_id)
                assert (await agent.ask(agent_id)).reason.kind == "completed"
                await agent.dispose()
                resumed = await two.resume_agent(agent_id, OPTIONS)
                assert user_texts(resumed.session.events) == [agent_id]


class _WithoutNewClaims(DelegatingStore):
    """A custom store of the seam as it was before new claims: no ``claim_new``."""

    claim_new = None  # type: ignore[assignment]


async def test_a_store_without_new_claims_is_asked_whether_the_id_is_stored(
    tmp_path: Path,
) -> None:
    """A custom store lacking ``claim_new`` keeps working: a creation is refused for a stored
    id alone, and its first flush stores the session."""
    path = tmp_path / "sessions.db"
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    with trio.fail_after(REAL_DEADLINE):
        store = _WithoutNewClaims(SQLiteStore(path))
        async with retinue.open_runtime(models=model, store=store) as rt:
            agent = await rt.create_agent("a", OPTIONS, session_id="s")
            assert (await agent.ask("hello")).reason.kind == "completed"
            await agent.dispose()
            assert await refusal(_create(rt, "s")) == ("SessionError", "SESSION_ALREADY_EXISTS")
        async with SQLiteStore(path) as reader:
            assert user_texts((await reader.load("s")).events) == ["hello"]
            with pytest.raises(StoreError):
                await reader.load("missing")


async def test_a_delegating_store_claims_new_ids_in_the_store_it_wraps(tmp_path: Path) -> None:
    """Two runtimes, each over a ``DelegatingStore`` of its own ``SQLiteStore`` of one file,
    creating one id: the second is refused at its creation, as over the stores themselves."""
    path = tmp_path / "sessions.db"
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    with trio.fail_after(REAL_DEADLINE):
        async with (
            retinue.open_runtime(models=model, store=DelegatingStore(SQLiteStore(path))) as one,
            retinue.open_runtime(models=model, store=DelegatingStore(SQLiteStore(path))) as two,
        ):
            first = await one.create_agent("a", OPTIONS, session_id="s")
            assert await refusal(_create(two, "s")) == ("SessionError", "SESSION_ALREADY_EXISTS")
            assert (await first.ask("first")).reason.kind == "completed"
            with pytest.raises(ValueError, match="setup failed"):
                await two.create_agent("b", OPTIONS, session_id="t", setup=_failing_setup)
            second = await one.create_agent("c", OPTIONS, session_id="t")
            assert (await second.ask("second")).reason.kind == "completed"


async def test_a_refusal_of_an_id_created_elsewhere_says_another_writer_holds_it(
    blocking_kit: StoreKit,
) -> None:
    """An id another store is creating is listed nowhere yet: the refusal says who has it,
    where a bare "already exists" would read as a mistake."""
    with trio.fail_after(REAL_DEADLINE):
        async with _runtime(blocking_kit) as one, _runtime(blocking_kit) as two:
            await one.create_agent("a", OPTIONS, session_id="s")
            with pytest.raises(retinue.SessionError) as caught:
                await two.create_agent("b", OPTIONS, session_id="s")
            assert caught.value.code == "SESSION_ALREADY_EXISTS"
            assert str(caught.value) == (
                "session 's' already exists: another store or process is creating, writing or deleting it"
            )
