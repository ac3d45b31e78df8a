"""A 503 is an overload, as a 529 is: it pauses its admission lane and halves its
concurrency limit (docs/providers.md, Admission control).

Both are an ``OverloadedError``; OpenAI answers "the engine is currently overloaded"
and "slow down" with a 503, and RFC 9110 gives a 503 for a temporary overload.
"""

from __future__ import annotations

import json

import pytest
import trio

from retinue.providers import (
    AdmissionController,
    AdmissionLimits,
    LaneStatistics,
    OverloadedError,
    RetryPolicy,
)
from retinue.providers.mock import MockReply, MockServer, RawReply, ScriptedPolicy

from .support import JSON, SSE, one_after_another, sse_body

VIRTUAL_DEADLINE = 600.0
OVERLOADED = json.dumps(
    {"error": {"message": "The engine is currently overloaded", "type": "server_error"}}
).encode()


async def _after_a_refusal(
    api: str, refusal: RawReply
) -> tuple[list[float], list[str], LaneStatistics]:
    """Two requests of two sessions through one lane whose first answer is *refusal*,
    not retried: when each ended, how (``ok`` or the error's class) and the lane
    right after the first."""
    server = MockServer(ScriptedPolicy([refusal, MockReply(text="fine")]))
    sent = await one_after_another(
        server,
        api=api,
        retry=RetryPolicy(max_attempts=1),
        admission=AdmissionController(AdmissionLimits(max_concurrent=8)),
        deadline=VIRTUAL_DEADLINE,
    )
    outcomes = ["ok" if one.error is None else type(one.error).__name__ for one in sent]
    return [one.ended for one in sent], outcomes, sent[0].lanes[0]


@pytest.mark.parametrize(("status", "retry_after"), [(503, 3.0), (503, None), (529, 3.0)])
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_a_503_pauses_its_lane_and_halves_its_limit_as_a_529_does(
    api: str, status: int, retry_after: float | None, autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: the 503 is raised as an ``OverloadedError``, the lane counts it throttled,
    cuts its limit to half the requests in flight (1) and holds the next request back
    for its ``Retry-After`` (the default second without one), not leaving the lane as it
    was, which would send the next request at once into the same overload."""
    headers = JSON if retry_after is None else (*JSON, ("retry-after", f"{retry_after:g}"))
    ended, outcomes, lane = await _after_a_refusal(api, RawReply(status, headers, OVERLOADED))
    pause = 1.0 if retry_after is None else retry_after
    assert outcomes == [OverloadedError.__name__, "ok"]
    assert (lane.throttled, lane.concurrency_limit) == (1, 1.0)
    assert lane.paused_for == pytest.approx(pause)
    assert ended == pytest.approx([0.0, pause], abs=0.01)


async def test_a_503_sent_inside_a_stream_pauses_its_lane(
    autojump_clock: trio.abc.Clock,
) -> None:
    """An error event whose numeric code is 503 (as vLLM and LiteLLM send it) carries
    that status, and throttles the lane as the HTTP 503 does."""
    event = json.dumps({"error": {"message": "overloaded", "code": 503}}).encode()
    ended, outcomes, lane = await _after_a_refusal("chat", RawReply(200, SSE, sse_body(event)))
    assert outcomes == ["ProviderStreamError", "ok"]
    assert lane.throttled == 1
    assert ended == pytest.approx([0.0, 1.0], abs=0.01)
