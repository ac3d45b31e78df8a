"""The mock server's ``Timing(linger=)``: a stream's body held open after its last event."""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing

from retinue.providers import Finish
from retinue.providers.mock import MockReply, MockServer, ScriptedPolicy, Timing

from .support import collect, make_request, mock_adapter


@pytest.mark.parametrize(
    ("linger", "ended_at", "outcome"),
    [(0.0, 0.0, "completed"), (0.5, 0.5, "completed"), (math.inf, 1.0, "aborted")],
)
async def test_a_lingering_stream_ends_its_body_late_or_never(
    autojump_clock: trio.testing.MockClock, linger: float, ended_at: float, outcome: str
) -> None:
    """The answer is whole at once; the body ends *linger* seconds later, or, held for ever,
    the adapter closes it once its second of reading on past the last event is out."""
    reply = MockReply(text="hello there")
    server = MockServer(ScriptedPolicy([reply]), timing=Timing(linger=linger))
    with trio.fail_after(60):
        async with mock_adapter("chat", server) as model:
            collected = await collect(model, make_request("hi"))
    assert isinstance(collected.chunks[-1], Finish)
    assert trio.current_time() == pytest.approx(ended_at)
    stats = server.statistics()
    assert (stats.streams_completed, stats.streams_aborted) == (
        (1, 0) if outcome == "completed" else (0, 1)
    )


def test_a_linger_that_is_no_number_of_seconds_is_refused() -> None:
    """Checked when built, as the other delays are."""
    with pytest.raises(ValueError, match="linger"):
        Timing(linger=-1.0)
