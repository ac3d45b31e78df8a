"""A source given as a str names a plugin, never the user (R1.3)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from retinue import HookContext, MessageSource
from retinue.testing import Reply, ScriptedModel
from tests.helpers import OPTIONS, of_type, runtime

_USER = "^source 'user' would name a plugin called 'user': a str names a plugin; pass None"


async def test_every_verb_refuses_the_str_user_as_a_source(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R1.3: a str source names a plugin, so ``source="user"`` would name a plugin called "user":
    the user's own words would be logged as a plugin's and shown to the model as ``<context
    source="plugin">``. ask, send, steer and inject refuse it with a ValueError saying to pass None,
    and nothing is sent; so does a HookContext."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        for verb in (agent.send, agent.steer, agent.inject):
            with pytest.raises(ValueError, match=_USER):
                verb("hi", "user")
        with pytest.raises(ValueError, match=_USER):
            await agent.ask("hi", "user")
        with pytest.raises(ValueError, match=_USER):
            HookContext("hi", "user")
        await agent.wait_idle()
        assert list(agent.session.events) == []
        assert model.statistics().calls == 0


async def test_a_plugin_named_user_is_still_given_in_full(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R1.3: the open union keeps every name a plugin may have, spelled out."""
    model = ScriptedModel([Reply("ok")])
    async with runtime(model) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        named = MessageSource("plugin", "user")
        await agent.ask("hi", named)
        assert of_type(agent.session.events, "user/message")[0].data.source == named  # type: ignore[union-attr]
