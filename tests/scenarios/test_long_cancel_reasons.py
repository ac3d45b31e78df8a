"""A cancel's reason is the turn's end's whole (R2.28); each cut-off call's result tells the
model a long one by its start and length, not a copy of it per call."""

from __future__ import annotations

import trio
import trio.testing

from retinue._content import content_text
from retinue.session import ToolResultEvent, TurnEnd
from retinue.testing import CallTools, Reply, ScriptedModel, ToolCallSpec, check_session_invariants
from tests.helpers import OPTIONS, nap, of_type, runtime


async def _cancelled_results(reason: str) -> tuple[list[str], str | None]:
    """The texts of three cut-off calls' results and the turn's end reason, cancelled with *reason*."""
    calls = [ToolCallSpec("nap", '{"seconds": 5}') for _ in range(3)]
    model = ScriptedModel([CallTools(calls), Reply("never")])
    async with runtime(model, tools=[nap]) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        agent.send("go")
        await trio.sleep(1)
        agent.cancel(reason)
        await agent.wait_idle()
        events = agent.session.events
        check_session_invariants(events)
        results = [event.data for event in of_type(events, "tool/result")]
        texts = [content_text(r.content) for r in results if isinstance(r, ToolResultEvent)]
        end = of_type(events, "turn/end")[-1].data
        assert isinstance(end, TurnEnd)
        return texts, end.reason.reason


async def test_a_long_cancel_reason_is_told_by_its_start_and_length(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.28, R9.25: the turn ends aborted with the whole reason; each of the three results
    quotes its first thousand characters and says how long it is, where each held it whole."""
    reason = "x" * 10_000_000
    texts, ended = await _cancelled_results(reason)
    assert ended == reason
    assert len(texts) == 3
    for text in texts:
        assert f"cancelled ({'x' * 1000}... (10000000 characters))" in text
        assert len(text) < 1200


async def test_a_cancel_reason_of_a_thousand_characters_is_told_whole(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.28: a reason up to a thousand characters is quoted whole in each result."""
    reason = "y" * 1000
    texts, _ended = await _cancelled_results(reason)
    assert all(f"cancelled ({reason})" in text for text in texts)


async def test_a_long_cancel_reason_is_cut_where_a_character_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R2.28: the quoted start of a long reason does not part a letter from its accent,
    which would show the model a different character."""
    reason = "x" * 999 + "e\u0301" + "y" * 2000
    texts, _ended = await _cancelled_results(reason)
    for text in texts:
        assert f"cancelled ({'x' * 999}... (3001 characters))" in text
