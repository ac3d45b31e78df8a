"""The lane a routed request is admitted in: the provider of the route that served it."""

from __future__ import annotations

import trio

from retinue._stream import STOP, Finish, TextDelta
from retinue.providers import (
    AdmissionController,
    AdmissionLimits,
    ModelRouter,
    RateLimitError,
    RetryNotice,
    RetryPolicy,
    manage,
)

from .support import FakeModel, collect, make_request

OK = [TextDelta(0, "hi"), Finish(STOP)]


async def test_two_servers_of_one_model_routed_by_provider_keep_lanes_of_their_own(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.7: a request served by an exact ``(provider, model)`` route is admitted under that
    route's provider, whatever provider its adapter names: two servers of one adapter type
    (an OpenAI adapter for Azure beside OpenAI's own) keep apart, each under its own limits."""
    azure = FakeModel([OK] * 2, provider="openai", delay=1.0)
    openai = FakeModel([OK] * 2, provider="openai", delay=1.0)
    router = ModelRouter.of({("azure", "gpt-4o"): azure, ("openai", "gpt-4o"): openai})
    limits = {("azure", "gpt-4o"): AdmissionLimits(max_concurrent=1)}
    admission = AdmissionController(per_model=limits)
    model = manage(router, admission=admission)
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            for index in range(4):
                provider = "azure" if index % 2 == 0 else "openai"
                request = make_request(
                    "hi", model="gpt-4o", provider=provider, session_id=f"s{index}"
                )
                nursery.start_soon(collect, model, request)
    assert azure.started == [0.0, 1.0]
    assert openai.started == [0.0, 0.0]
    lanes = {(lane.provider, lane.model): lane.admitted for lane in admission.statistics().lanes}
    assert lanes == {("azure", "gpt-4o"): 2, ("openai", "gpt-4o"): 2}


async def test_a_throttled_route_pauses_its_own_lane_alone(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.7: a 429 from one exact route's server pauses that route's lane, not the lane of
    another server of the same model, and its retry is reported under that route."""
    throttled = RateLimitError("slow down", code="rate_limit_exceeded", status=429, retry_after=5.0)
    azure = FakeModel([throttled, OK], provider="openai")
    openai = FakeModel([OK], provider="openai")
    router = ModelRouter.of({("azure", "gpt-4o"): azure, ("openai", "gpt-4o"): openai})
    notices: list[RetryNotice] = []
    model = manage(
        router,
        admission=AdmissionController(),
        retry=RetryPolicy(max_attempts=2, base_delay=0.0),
        on_retry=notices.append,
    )
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect, model, make_request("hi", model="gpt-4o", provider="azure"))
            await trio.sleep(1.0)
            await collect(model, make_request("hi", model="gpt-4o", provider="openai"))
    assert azure.started == [0.0, 5.0]
    assert openai.started == [1.0]
    assert [notice.provider for notice in notices] == ["azure"]
