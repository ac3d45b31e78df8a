"""The transport under the adapters: rate-limit headers, retries, admission and connections
when a provider (or a custom model) sends what the usual paths do not expect."""

from __future__ import annotations

import json
import math
import traceback

import httpx2
import pytest
import trio
import trio.testing

from retinue._errors import ModelError
from retinue.providers import (
    AdmissionController,
    AdmissionLimits,
    ManagedStatistics,
    ProviderConnectionError,
    RateLimitError,
    RetryPolicy,
    manage,
)
from retinue.providers._failures import status_error
from retinue.providers._ratelimits import parse_duration
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import (
    EchoPolicy,
    MockReply,
    MockServer,
    RawReply,
    ScriptedPolicy,
    Timing,
    open_mock_server,
)
from retinue.providers.openai import OpenAIModel

from .support import JSON, FakeModel, collect, make_request, mock_adapter

VIRTUAL_DEADLINE = 600.0
REAL_DEADLINE = 20.0
OVERFLOWING_RESET = "9" * 400 + "s"
"""A reset duration whose digits are finite text but no finite float."""
RATE_LIMITED = json.dumps(
    {"error": {"message": "Rate limit reached for requests", "code": "rate_limit_exceeded"}}
).encode()


def test_a_reset_duration_too_large_for_a_float_is_an_infinite_one() -> None:
    """A reset no float can hold is further off than any wait, as ``inf`` is: the 429's
    ``retry_after`` is ``math.inf``, not a crash nor no wait at all."""
    assert parse_duration(OVERFLOWING_RESET) == math.inf
    assert parse_duration("1" + "0" * 305 + "h") == math.inf
    headers = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "9" * 400}
    assert status_error(429, RATE_LIMITED, headers, provider="p").retry_after == math.inf


@pytest.mark.timeout(10)  # a backtracking scan takes its length squared: hours for this one
def test_a_reset_header_too_long_to_be_a_duration_is_read_at_once() -> None:
    """A reset header of a megabyte of digits is read as the one huge number it is, and
    a megabyte of anything else as no duration, without stalling every agent on the trio
    thread while a scan backtracks over it."""
    assert parse_duration("1" * 1_000_000) == math.inf
    assert parse_duration("1" * 1_000_000 + "x") is None
    assert parse_duration("1h" * 500_000) is None
    assert parse_duration(" 1h2m3.5s ") == 3723.5


@pytest.mark.parametrize(
    "reset", [OVERFLOWING_RESET, "1e400", "inf"], ids=["digits", "1e400", "inf"]
)
async def test_a_429_with_an_overflowing_reset_fails_at_once_and_frees_the_lane(
    reset: str, autojump_clock: trio.abc.Clock
) -> None:
    """A 429 whose spent budget resets after an overflowing duration fails at once as
    that 429, as one resetting in six hours does, and its attempt leaves the lane,
    instead of a bare ``ValueError`` holding the lane's only place for good, the reset
    not read as none for the 429 to be retried on the backoff."""
    spent = (("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", reset))
    reply = RawReply(429, JSON + spent, RATE_LIMITED)
    server = MockServer(ScriptedPolicy([reply, MockReply(text="ok")]))
    admission = AdmissionController(AdmissionLimits(max_concurrent=1))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with mock_adapter("chat", server) as adapter:
            model = manage(adapter, retry=RetryPolicy(max_attempts=2), admission=admission)
            with pytest.raises(RateLimitError) as caught:
                await collect(model, make_request("hi"))
    assert caught.value.retry_after == math.inf
    assert len(server.calls) == 1
    assert admission.statistics().in_flight == 0


@pytest.mark.parametrize("wait", [math.nan, -1.0, math.inf])
async def test_a_custom_models_unusable_wait_neither_hides_its_error_nor_holds_the_lane(
    wait: float, autojump_clock: trio.abc.Clock
) -> None:
    """A rate limit a custom model raises with a wait no lane can pause for (NaN, negative,
    infinite) still propagates, and its attempt still leaves the lane."""
    admission = AdmissionController(AdmissionLimits(max_concurrent=1))
    error = RateLimitError("slow down", status=429, retry_after=wait, retryable=True)
    model = manage(FakeModel([error]), admission=admission)
    with trio.fail_after(VIRTUAL_DEADLINE):
        with pytest.raises(RateLimitError):
            await collect(model, make_request("hi"))
    assert admission.statistics().in_flight == 0


def _keyed(api: str, server: MockServer, key: str) -> OpenAIModel | AnthropicModel:
    """The adapter for *api* at *server*'s socket, sending *key*."""
    if api == "messages":
        return AnthropicModel(base_url=server.base_url, api_key=key)
    return OpenAIModel(base_url=server.openai_base_url, api_key=key)


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_a_key_with_a_line_break_is_refused_when_built_without_quoting_it(
    api: str,
) -> None:
    """A key pasted with its line break makes a header HTTP forbids: the adapter is
    refused when built, naming the setting, as a key with a non-ASCII letter is, and the
    error, which reaches logs, does not quote the key."""
    secret = "sk-secret-4f9a"
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server(EchoPolicy()) as server:
            with pytest.raises(ValueError, match="api_key holds the control character") as caught:
                _keyed(api, server, secret + "\n")
    assert secret not in "".join(traceback.format_exception(caught.value))


def test_admission_shared_by_two_trio_runs_keeps_its_window_in_the_later_runs_time() -> None:
    """A controller kept from one ``trio.run`` to the next holds its requests to the
    window's minute in the next run too: each run's clock has an origin of its own, and
    the window, kept in the earlier run's times, must not hold the lane until that clock's
    time comes round (here, 1000 s after it began)."""
    admission = AdmissionController(AdmissionLimits(requests_per_minute=1))
    waits: list[float] = []

    async def admit_once(start: float) -> None:
        with trio.fail_after(VIRTUAL_DEADLINE * 10):
            await trio.sleep(start)
            async with admission.admit(provider="p", model="m"):
                waits.append(trio.current_time() - start)

    trio.run(admit_once, 1000.0, clock=trio.testing.MockClock(autojump_threshold=0))
    trio.run(admit_once, 0.0, clock=trio.testing.MockClock(autojump_threshold=0))
    assert waits[0] == 0.0
    assert 59.0 < waits[1] <= 60.0


async def test_a_stream_failing_with_a_plain_model_error_counts_as_a_failure(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A model error that is no provider's failure is never retried, but its stream still
    ended with an error after its last attempt: ``failures`` counts it."""
    model = manage(FakeModel([ModelError("no such route", code="NO_ADAPTER")]), retry=RetryPolicy())
    with trio.fail_after(VIRTUAL_DEADLINE):
        with pytest.raises(ModelError):
            await collect(model, make_request("hi"))
    assert model.statistics() == ManagedStatistics(requests=1, attempts=1, retries=0, failures=1)


async def test_a_request_cancelled_while_waiting_for_admission_made_no_provider_call(
    autojump_clock: trio.abc.Clock,
) -> None:
    """``attempts`` counts provider calls made: a request cancelled while it waited for
    admission is a request, and its wait leaves the lane, but it called no provider."""
    server = MockServer(EchoPolicy(), timing=Timing(latency=10.0))
    admission = AdmissionController(AdmissionLimits(max_concurrent=1))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with mock_adapter("chat", server) as adapter:
            model = manage(adapter, admission=admission)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(collect, model, make_request("first"))
                await trio.sleep(1.0)
                with trio.move_on_after(1.0):
                    await collect(model, make_request("second", session_id="other"))
    assert len(server.calls) == 1
    assert model.statistics() == ManagedStatistics(requests=2, attempts=1, retries=0, failures=0)
    assert (admission.statistics().waiting, admission.statistics().in_flight) == (0, 0)


class _Refusing(httpx2.AsyncBaseTransport):
    """A transport that refuses every connection."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await trio.lowlevel.checkpoint()
        raise httpx2.ConnectError("[Errno 111] Connection refused", request=request)


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_a_connection_failure_names_the_url_without_its_password(api: str) -> None:
    """A gateway behind basic auth is given as ``http://user:password@host``: the failure
    names the URL the request went to, but not the password in it (nor its query)."""
    root = "http://user:s3cret@gateway.internal:8080"
    model: OpenAIModel | AnthropicModel = (
        AnthropicModel(base_url=root, api_key="k", transport=_Refusing())
        if api == "messages"
        else OpenAIModel(base_url=root + "/v1", api_key="k", transport=_Refusing())
    )
    with trio.fail_after(REAL_DEADLINE):
        async with model:
            with pytest.raises(ProviderConnectionError) as caught:
                await collect(model, make_request("hi"))
    assert "connection to http://gateway.internal:8080/v1/" in caught.value.message
    assert "s3cret" not in caught.value.message


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_an_adapter_shows_its_url_without_its_password(api: str) -> None:
    """An adapter's repr, and the ``ADAPTER_CLOSED`` error that quotes it, name the host
    and path of its base URL but not the password a gateway's URL may carry."""
    root = "http://user:s3cret@gateway.internal:8080"
    model: OpenAIModel | AnthropicModel = (
        AnthropicModel(base_url=root, api_key="k", transport=_Refusing())
        if api == "messages"
        else OpenAIModel(base_url=root + "/v1", api_key="k", transport=_Refusing())
    )
    async with model:
        pass
    with trio.fail_after(REAL_DEADLINE), pytest.raises(ModelError) as caught:
        await collect(model, make_request("hi"))
    assert caught.value.code == "ADAPTER_CLOSED"
    for shown in (repr(model), caught.value.message):
        assert "gateway.internal:8080" in shown
        assert "s3cret" not in shown
