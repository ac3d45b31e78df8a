"""A wait too large for a float is the longest wait of all, not a missing one.

``Retry-After: 1e400`` (or ``inf``, or ``retry-after-ms: 1e400``) asks for a wait
longer than ``Retry-After: 1e9`` does: the request fails at once with its
``retry_after`` set to ``math.inf``, and its admission lane pauses no longer than
for a 429 naming no wait, as after ``1e9`` (docs/providers.md, Retries and
Admission control; R10.3: the failure is raised from the stream). A NaN, negative
or unreadable value still asks for no wait at all.
"""

from __future__ import annotations

import json
import math

import pytest
import trio

from retinue.providers import (
    AdmissionController,
    ProviderError,
    RateLimitError,
    RetryNotice,
    RetryPolicy,
    manage,
)
from retinue.providers.mock import MockReply, MockServer, RawReply, ScriptedPolicy

from .support import JSON, collect, make_request, mock_adapter, one_after_another

VIRTUAL_DEADLINE = 10_000.0
RATE_LIMITED = json.dumps(
    {"error": {"message": "Rate limit reached for requests", "code": "rate_limit_exceeded"}}
).encode()
TOO_LARGE = [
    ("retry-after", "1e400"),
    ("retry-after", "inf"),
    ("retry-after-ms", "1e400"),
    ("retry-after", "9" * 400),
    ("retry-after", "Fri, 31 Dec 99999 23:59:59 GMT"),
]
SPENT_FOR_30_S = (("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "30s"))


def _refused(*headers: tuple[str, str]) -> RawReply:
    """A 429 with *headers* besides its content type."""
    return RawReply(429, JSON + headers, RATE_LIMITED)


async def _attempt(
    api: str, server: MockServer, notices: list[RetryNotice]
) -> tuple[ProviderError | None, float]:
    """Stream one request over *server* under the default policy; the error it failed
    with, if it did, and the virtual seconds it took."""
    async with mock_adapter(api, server) as adapter:
        model = manage(adapter, retry=RetryPolicy(), on_retry=notices.append)
        start = trio.current_time()
        with trio.fail_after(VIRTUAL_DEADLINE):
            try:
                await collect(model, make_request("hi"))
            except ProviderError as error:
                return error, trio.current_time() - start
        return None, trio.current_time() - start


@pytest.mark.parametrize("header", TOO_LARGE, ids=lambda header: f"{header[0]}={header[1][:8]}")
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
async def test_a_wait_too_large_for_a_float_fails_the_request_at_once(
    api: str, header: tuple[str, str], autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: one attempt, no retry notice, no wait: the 429 is raised with
    ``retry_after == math.inf``, as ``Retry-After: 1e9`` is raised with 1e9, the value not
    read as no header for the request to be retried on the backoff."""
    server = MockServer(ScriptedPolicy([_refused(header), MockReply(text="too soon")]))
    notices: list[RetryNotice] = []
    error, spent = await _attempt(api, server, notices)
    assert isinstance(error, RateLimitError)
    assert error.retry_after == math.inf
    assert (len(server.calls), notices) == (1, [])
    assert spent < 1.0


async def _times_of_two_requests(refusal: RawReply) -> tuple[list[float], list[str], float]:
    """Two requests of two sessions through one lane whose first answer is *refusal*:
    when each ended, how (``ok`` or the error's code), and the lane's pause right
    after the first."""
    server = MockServer(ScriptedPolicy([refusal, MockReply(text="fine")]))
    sent = await one_after_another(server, deadline=VIRTUAL_DEADLINE)
    outcomes = ["ok" if one.error is None else str(one.error.code) for one in sent]
    return [one.ended for one in sent], outcomes, sent[0].lanes[0].paused_for


@pytest.mark.parametrize("value", ["1e9", "1e400", "inf"])
async def test_a_wait_too_large_for_a_float_pauses_the_lane_as_1e9_does(
    value: str, autojump_clock: trio.abc.Clock
) -> None:
    """The lane pauses for the default second, not for ever nor ``max_retry_after``: the
    next request goes out after 1 s; ``1e400`` and ``inf`` fail the request at once, as
    ``1e9`` does, never retrying it until it succeeds."""
    ended, outcomes, pause = await _times_of_two_requests(_refused(("retry-after", value)))
    assert outcomes == ["rate_limit_exceeded", "ok"]
    assert ended == pytest.approx([0.0, 1.0], abs=0.01)
    assert pause == pytest.approx(1.0)


@pytest.mark.parametrize("value", ["-5", "-inf", "nan", "soon"])
async def test_a_negative_or_unreadable_retry_after_is_no_header_to_the_lane(
    value: str, autojump_clock: trio.abc.Clock
) -> None:
    """A 429 whose ``Retry-After`` is no wait pauses the lane for the default second, as
    one without the header does: ``-5`` does not pause it for nothing."""
    refusal = _refused(("retry-after", value))
    async with mock_adapter("chat", MockServer(ScriptedPolicy([refusal]))) as adapter:
        admission = AdmissionController()
        model = manage(adapter, retry=RetryPolicy(max_attempts=1), admission=admission)
        with trio.fail_after(VIRTUAL_DEADLINE), pytest.raises(RateLimitError) as caught:
            await collect(model, make_request("hi"))
    assert caught.value.retry_after is None
    assert admission.statistics().lanes[0].paused_for == pytest.approx(1.0)


@pytest.mark.parametrize("value", ["-5", "nan", "soon"])
@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_a_negative_or_unreadable_retry_after_leaves_the_spent_budget_as_the_wait(
    api: str, value: str, autojump_clock: trio.abc.Clock
) -> None:
    """A 429 whose ``Retry-After`` is no wait, and whose headers report the budget spent
    for 30 s, is retried after those 30 s, as one without the header is: ``-5`` is not
    read as a wait of 0, which would hide the budget and send the retry after the backoff
    to meet another 429."""
    refusal = _refused(("retry-after", value), *SPENT_FOR_30_S)
    server = MockServer(ScriptedPolicy([refusal, MockReply(text="ok")]))
    notices: list[RetryNotice] = []
    error, spent = await _attempt(api, server, notices)
    assert error is None
    assert [notice.delay for notice in notices] == [pytest.approx(30.0, abs=1.0)]
    assert spent == pytest.approx(30.0, abs=1.0)


@pytest.mark.parametrize("max_pause", [120.0, math.inf])
async def test_a_ticket_pauses_for_an_infinite_retry_after_as_for_none(
    max_pause: float, autojump_clock: trio.abc.Clock
) -> None:
    """Code using the controller directly reports the error's ``retry_after`` through its
    ticket (docs/providers.md, Admission control): ``math.inf`` pauses the lane for the
    default second, capped or not, instead of failing the report with a ``ValueError``."""
    admission = AdmissionController()
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with admission.admit(provider="p", model="m", max_pause=max_pause) as ticket:
            ticket.rate_limited(math.inf)
        [lane] = admission.statistics().lanes
    assert lane.throttled == 1
    assert lane.paused_for == pytest.approx(1.0)
