"""An attempt that never reached the provider gives its admission charge back: its
connection refused, its adapter closed, its credentials missing, its request unsendable."""

from __future__ import annotations

from contextlib import aclosing

import httpx2
import pytest
import trio

from retinue.providers import (
    AdmissionController,
    AdmissionLimits,
    ProviderError,
    RetryPolicy,
    manage,
)
from retinue.providers._pools import PoolsClosedError
from retinue.providers.openai import OpenAIModel

from .support import make_request


class _Failing(httpx2.AsyncBaseTransport):
    """A transport each request fails with *error*."""

    def __init__(self, error: Exception) -> None:
        self._error = error

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await trio.lowlevel.checkpoint()
        raise self._error


async def _charged(model: OpenAIModel) -> tuple[str, int, int]:
    """The code one managed request of *model* fails with, and the requests and tokens
    its lane counts in its window after it."""
    admission = AdmissionController(AdmissionLimits(requests_per_minute=5, tokens_per_minute=10**6))
    managed = manage(model, retry=RetryPolicy(max_attempts=1), admission=admission)
    code = ""
    with trio.fail_after(30):
        try:
            async with aclosing(managed.stream(make_request("hello " * 50))) as chunks:
                async for _ in chunks:
                    pass
        except ProviderError as exc:
            code = exc.code or ""
    lane = admission.statistics().lanes[0]
    return code, lane.requests_in_window, lane.tokens_in_window


async def test_a_refused_connection_gives_its_charge_back(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R12.9: a request whose connection was refused reached no provider: its lane counts
    neither the request nor its tokens, where it held both for the window, holding back
    the next healthy request of a lane with a request budget."""
    refused = _Failing(httpx2.ConnectError("connection refused"))
    async with OpenAIModel(transport=refused, base_url="http://mock/v1", api_key="k") as model:
        assert await _charged(model) == ("CONNECTION_ERROR", 0, 0)


async def test_a_request_that_was_sent_keeps_its_charge(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A request whose response did not come (a read that timed out) reached the server,
    which may have counted it: its charge stays."""
    silent = _Failing(httpx2.ReadTimeout("timed out"))
    async with OpenAIModel(transport=silent, base_url="http://mock/v1", api_key="k") as model:
        code, requests, tokens = await _charged(model)
    assert (code, requests) == ("TIMEOUT", 1)
    assert tokens > 0


async def test_a_closed_adapters_refusal_gives_its_charge_back(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R12.9: a request to a closed adapter fails ``ADAPTER_CLOSED`` uncharged."""
    model = OpenAIModel(transport=_Failing(RuntimeError()), base_url="http://mock/v1", api_key="k")
    await model.aclose()
    assert await _charged(model) == ("ADAPTER_CLOSED", 0, 0)


async def test_missing_credentials_give_the_charge_back(
    autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R12.9: a request refused for want of credentials fails ``MISSING_CREDENTIALS``
    uncharged."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with OpenAIModel(transport=_Failing(RuntimeError())) as model:
        assert await _charged(model) == ("MISSING_CREDENTIALS", 0, 0)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (httpx2.ConnectTimeout("connect timed out"), "TIMEOUT"),
        (httpx2.ProxyError("the proxy refused the CONNECT"), "CONNECTION_ERROR"),
        (PoolsClosedError("the adapter's connection pools are closed"), "CONNECTION_ERROR"),
        (httpx2.LocalProtocolError("Illegal header value b'a\\nb'"), "CLIENT_ERROR"),
    ],
    ids=["connect-timeout", "proxy-refused", "pools-closed", "invalid-http"],
)
async def test_a_request_that_never_left_gives_its_charge_back(
    autojump_clock: trio.abc.Clock, error: Exception, code: str
) -> None:
    """R12.9: the request reached no provider: its lane counts neither it nor its tokens."""
    async with OpenAIModel(
        transport=_Failing(error), base_url="http://mock/v1", api_key="k"
    ) as model:
        assert await _charged(model) == (code, 0, 0)
