"""A session/event listener scoped to one agent relays that agent's appends alone (R6.5):
the other agents' sessions are not observed for it, however many agents there are."""

from __future__ import annotations

import trio.testing

from retinue.session import Event, Session
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, runtime


async def test_a_listener_scoped_to_one_agent_leaves_the_other_sessions_unobserved(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        heard = await rt.create_agent("heard", OPTIONS)
        quiet = await rt.create_agent("quiet", OPTIONS)
        seen: list[tuple[str, str]] = []

        def note(session: Session, event: Event) -> None:
            seen.append((session.id, event.type))

        # The store buffers each session through an observer of its own.
        base = len(heard.session._observers)
        assert len(quiet.session._observers) == base
        remove = rt.hooks.on("session/event", note, agent=heard)
        assert len(heard.session._observers) == base + 1, "the heard agent's appends are relayed"
        assert len(quiet.session._observers) == base, "the other's are not observed for it"
        await heard.ask("one")
        await quiet.ask("two")
        assert {session_id for session_id, _ in seen} == {heard.id}
        remove()
        assert len(heard.session._observers) == base
        everyone = rt.hooks.on("session/event", note)
        assert len(heard.session._observers) == base + 1
        assert len(quiet.session._observers) == base + 1
        everyone()
        assert len(heard.session._observers) == base
        assert len(quiet.session._observers) == base


async def test_each_agent_is_heard_by_its_own_listener_whatever_others_the_seam_has(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.5: a listener scoped to an agent is heard though another agent's listener came
    first (the seam was not empty), and removing a listener of every agent stops the relay of
    an agent no listener of its own hears, while another agent's scoped one stays."""
    model = ScriptedModel([Reply("ok")], repeat_last=True)
    async with runtime(model) as rt:
        first = await rt.create_agent("first", OPTIONS)
        second = await rt.create_agent("second", OPTIONS)
        base = len(second.session._observers)
        heard: list[str] = []

        def note(session: Session, _event: Event) -> None:
            heard.append(session.id)

        rt.hooks.on("session/event", note, agent=first)
        remove_second = rt.hooks.on("session/event", note, agent=second)
        await second.ask("one")
        assert heard
        assert set(heard) == {second.id}
        remove_second()
        everyone = rt.hooks.on("session/event", note)
        assert len(second.session._observers) == base + 1
        everyone()
        assert len(second.session._observers) == base, "no listener hears it any more"
        heard.clear()
        await second.ask("two")
        assert heard == []
        await first.ask("three")
        assert heard
        assert set(heard) == {first.id}
