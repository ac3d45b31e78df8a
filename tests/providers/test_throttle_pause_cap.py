"""A throttle that names no wait pauses its lane no longer than the retry policy allows."""

from __future__ import annotations

import trio

import retinue
from retinue.providers import AdmissionController, RetryNotice, RetryPolicy
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import Fault, MockReply, MockServer, ScriptedPolicy

MAX_PAUSE = 0.1


async def test_ticket_caps_the_default_pause_of_a_rate_limit_at_max_pause(
    autojump_clock: trio.abc.Clock,
) -> None:
    """``max_pause`` caps every pause a ticket's reports cause, a 429 without ``Retry-After`` too."""
    admission = AdmissionController()
    with trio.fail_after(5):
        async with admission.admit(provider="p", model="m", max_pause=MAX_PAUSE) as ticket:
            ticket.rate_limited(None)
        [lane] = admission.statistics().lanes
    assert lane.paused_for <= MAX_PAUSE


async def test_overload_without_retry_after_pauses_the_lane_at_most_max_retry_after(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A 529 with no ``Retry-After`` pauses its lane no longer than ``max_retry_after``.

    docs/providers.md: a 429 or 529 pauses the lane for its Retry-After, capped at the
    retry policy's ``max_retry_after``; both caps are one value.
    """
    policy = ScriptedPolicy([Fault("overloaded", retry_after=None), MockReply(text="fine")])
    server = MockServer(policy)
    admission = AdmissionController()
    pauses: list[float] = []

    def on_retry(notice: RetryNotice) -> None:
        pauses.extend(lane.paused_for for lane in admission.statistics().lanes)

    retry = RetryPolicy(base_delay=0.01, max_delay=0.01, max_retry_after=MAX_PAUSE)
    anthropic = AnthropicModel(api_key="k", transport=server.transport())
    with trio.fail_after(30):
        async with (
            anthropic,
            retinue.open_runtime(models=anthropic, retry=retry, admission=admission) as rt,
        ):
            rt.hooks.on("agent/retry", lambda _agent, notice: on_retry(notice))
            agent = await rt.create_agent("a", retinue.AgentOptions(model="claude"))
            result = await agent.ask("hi")
    assert result.reason.kind == "completed"
    assert pauses
    assert max(pauses) <= MAX_PAUSE
