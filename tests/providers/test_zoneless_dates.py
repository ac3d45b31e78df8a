"""A date that names no zone is read as UTC, whatever the host's zone.

An HTTP date is UTC in each of its forms (RFC 9110), asctime's that names no zone
included; a rate-limit reset is an RFC 3339 time. Read in the host's zone, a
``Retry-After`` 30 s off would be hours off west of UTC, and a wait of an hour none
east of it: the request would fail at once where it should be retried, or be retried
where it should fail at once (docs/providers.md, Retries; R10.3).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
import trio

from retinue.providers import ProviderError, RateLimitError, RetryNotice, RetryPolicy, manage
from retinue.providers.mock import MockReply, MockServer, RawReply, ScriptedPolicy

from .support import JSON, collect, make_request, mock_adapter

VIRTUAL_DEADLINE = 100_000.0
HOUR = 3600.0
WEST, EAST = "EST5", "JST-9"
"""POSIX zones five hours behind UTC and nine ahead: no zone database needed."""
RATE_LIMITED = json.dumps(
    {"error": {"message": "Rate limit reached for requests", "code": "rate_limit_exceeded"}}
).encode()


@pytest.fixture
def host_zone(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test with the host's local zone set to the parameter."""
    zone: str = request.param
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        yield zone
    finally:
        monkeypatch.undo()
        time.tzset()


def _asctime(seconds: float) -> str:
    """The asctime form of an HTTP date *seconds* from now: no zone named."""
    return time.asctime(time.gmtime(time.time() + seconds))


def _minus_zero(seconds: float) -> str:
    """The IMF form of an HTTP date *seconds* from now, zoned ``-0000``."""
    return time.strftime("%a, %d %b %Y %H:%M:%S -0000", time.gmtime(time.time() + seconds))


async def _outcome(
    api: str, refusal: RawReply, notices: list[RetryNotice]
) -> tuple[ProviderError | None, int]:
    """One request under the default policy whose first answer is *refusal*: the error it
    failed with, if any, and the calls the server saw."""
    server = MockServer(ScriptedPolicy([refusal, MockReply(text="ok")]))
    async with mock_adapter(api, server) as adapter:
        model = manage(adapter, retry=RetryPolicy(), on_retry=notices.append)
        with trio.fail_after(VIRTUAL_DEADLINE):
            try:
                await collect(model, make_request("hi"))
            except ProviderError as error:
                return error, len(server.calls)
    return None, len(server.calls)


@pytest.mark.parametrize("host_zone", [WEST, EAST], indirect=True)
@pytest.mark.parametrize("form", [_asctime, _minus_zero], ids=["asctime", "minus-zero"])
async def test_a_retry_after_date_naming_no_zone_is_waited_for_as_utc(
    host_zone: str, form: Callable[[float], str], autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: a ``Retry-After`` date 30 s off is retried after 30 s on any host: five
    hours behind UTC it does not read as 5 h off to fail the 429 at once."""
    refusal = RawReply(429, (*JSON, ("retry-after", form(30.0))), RATE_LIMITED)
    notices: list[RetryNotice] = []
    error, calls = await _outcome("chat", refusal, notices)
    assert (error, calls) == (None, 2)
    assert [notice.delay for notice in notices] == [pytest.approx(30.0, abs=2.0)]


@pytest.mark.parametrize("host_zone", [WEST, EAST], indirect=True)
async def test_a_retry_after_date_an_hour_off_naming_no_zone_fails_at_once(
    host_zone: str, autojump_clock: trio.abc.Clock
) -> None:
    """A ``Retry-After`` date an hour off fails the request at once on any host: nine
    hours ahead of UTC it does not read as a date long past to be retried at once."""
    refusal = RawReply(429, (*JSON, ("retry-after", _asctime(HOUR))), RATE_LIMITED)
    notices: list[RetryNotice] = []
    error, calls = await _outcome("chat", refusal, notices)
    assert isinstance(error, RateLimitError)
    assert error.retry_after == pytest.approx(HOUR, abs=2.0)
    assert (calls, notices) == (1, [])


@pytest.mark.parametrize("host_zone", [WEST, EAST], indirect=True)
async def test_a_reset_time_naming_no_offset_is_waited_for_as_utc(
    host_zone: str, autojump_clock: trio.abc.Clock
) -> None:
    """An Anthropic reset time 30 s off without an offset is the wait of a 429 naming
    none on any host: retried after 30 s, not read as hours off either way."""
    reset = datetime.fromtimestamp(time.time() + 30.0, UTC).replace(tzinfo=None)
    spent = (
        ("anthropic-ratelimit-requests-remaining", "0"),
        ("anthropic-ratelimit-requests-reset", reset.isoformat()),
    )
    notices: list[RetryNotice] = []
    error, calls = await _outcome("messages", RawReply(429, JSON + spent, RATE_LIMITED), notices)
    assert (error, calls) == (None, 2)
    assert [notice.delay for notice in notices] == [pytest.approx(30.0, abs=2.0)]
