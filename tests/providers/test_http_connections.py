"""The adapters' connections: how many, what waiting for one says, settings refused up
front, redirects followed, and connection failures that name where and why.

Capacity and redirects are served by the in-process mock server over real
sockets (the pools are the adapters' own), so those tests run on the real clock
under a deadline.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Callable
from contextlib import aclosing

import httpx2
import pytest
import trio

from retinue.providers import ProviderConnectionError
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import Endless, MockCall, MockServer, RawReply, open_mock_server
from retinue.providers.openai import OpenAIModel

from .support import collect, make_request, served_by

REAL_DEADLINE = 20.0
BOTH_SDKS = pytest.mark.parametrize("api", ["chat", "messages"])
Adapter = OpenAIModel | AnthropicModel


async def _hold_streams(
    model: Adapter, server: MockServer, sessions: list[str | None]
) -> tuple[int, int]:
    """Open one endless stream per session id; returns (requests the server got, connections
    it had open) once every stream reached it, or when no more arrive for a second."""

    async def hold(session_id: str | None) -> None:
        request = make_request("hi", session_id=session_id)
        async with aclosing(model.stream(request)) as chunks:
            async for _ in chunks:
                pass

    async with trio.open_nursery() as nursery:
        for session_id in sessions:
            nursery.start_soon(hold, session_id)
        seen, still = -1, 0.0
        while server.statistics().requests < len(sessions) and still < 1.0:
            await trio.sleep(0.05)
            current = server.statistics().requests
            seen, still = current, (still + 0.05 if current == seen else 0.0)
        statistics = server.statistics()
        nursery.cancel_scope.cancel()
    return statistics.requests, statistics.connections_open


@BOTH_SDKS
@pytest.mark.parametrize(
    "sessions",
    [
        pytest.param(lambda _: None, id="no-session-id"),
        pytest.param(lambda _: "one-session", id="one-session-id"),
        pytest.param(lambda i: f"agent-{i}", id="a-session-id-each"),
    ],
)
async def test_requests_can_use_every_connection_whatever_their_session_ids(
    api: str, sessions: Callable[[int], str | None]
) -> None:
    """``max_connections`` is the total the adapter can use: with pools of 2, six concurrent
    streams get six connections whether their session ids spread over the pools or not."""
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server(lambda _call: Endless(0.2)) as server,
            served_by(api, server, max_connections=6, pool_size=2) as model,
        ):
            reached = await _hold_streams(model, server, [sessions(i) for i in range(6)])
    assert reached == (6, 6)


@BOTH_SDKS
async def test_no_more_than_max_connections_are_opened(api: str) -> None:
    """Eight streams with ``max_connections=3`` (pools of 2 and 1) open three connections;
    the others wait for one instead of exceeding the limit."""
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server(lambda _call: Endless(0.2)) as server,
            served_by(api, server, max_connections=3, pool_size=2) as model,
        ):
            reached = await _hold_streams(model, server, [f"agent-{i}" for i in range(8)])
    assert reached == (3, 3)


@BOTH_SDKS
async def test_a_request_that_finds_no_free_connection_says_so(api: str) -> None:
    """R10.3: a request still waiting for one of the adapter's connections when its timeout
    ends fails with ``POOL_TIMEOUT`` naming the wait, not as a server that sent no headers;
    nothing reached the server for it."""
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server(lambda _call: Endless(0.1)) as server,
            served_by(api, server, max_connections=1, timeout=1.0) as model,
        ):
            busy = model.stream(make_request("hi", session_id="busy"))
            await busy.__anext__()  # the stream is under way: it holds the one connection
            with pytest.raises(ProviderConnectionError) as caught:
                await collect(model, make_request("hi", session_id="waiting"))
            assert server.statistics().requests == 1
            await busy.aclose()
    error = caught.value
    assert (error.code, error.retryable) == ("POOL_TIMEOUT", True)
    assert "no free connection within 1.0 s" in error.message
    assert "all 1 (max_connections) were in use" in error.message


@BOTH_SDKS
@pytest.mark.parametrize(
    ("setting", "value", "complaint"),
    [
        ("max_connections", 0, "max_connections must be a positive integer, not 0"),
        ("max_connections", -5, "max_connections must be a positive integer, not -5"),
        ("max_connections", 2.5, "max_connections must be a positive integer, not 2.5"),
        ("pool_size", 0, "pool_size must be a positive integer, not 0"),
        ("timeout", -1, "timeout must be a positive, finite number of seconds, not -1"),
        ("timeout", 0, "timeout must be a positive, finite number of seconds, not 0"),
        ("timeout", math.nan, "timeout must be a positive, finite number of seconds, not nan"),
        ("timeout", math.inf, "timeout must be a positive, finite number of seconds, not inf"),
        ("connect_timeout", math.nan, "connect_timeout must be a positive, finite number"),
    ],
)
def test_connection_settings_that_cannot_work_are_refused_when_built(
    api: str, setting: str, value: float, complaint: str
) -> None:
    """A count below one would leave every request waiting forever, and a timeout that is
    not a positive finite number would fail every request: the constructor refuses them,
    naming the setting and its value."""
    options: dict[str, object] = {"base_url": "http://127.0.0.1:9", "api_key": "k", setting: value}
    cls: type[Adapter] = AnthropicModel if api == "messages" else OpenAIModel
    with pytest.raises(ValueError, match=complaint):
        cls(**options)  # type: ignore[arg-type]


@BOTH_SDKS
@pytest.mark.parametrize("status", [307, 308])
async def test_a_redirect_is_followed_as_the_sdks_own_clients_follow_it(
    api: str, status: int
) -> None:
    """A 307/308 (a moved gateway, http to https) is followed with the same request, as the
    official SDKs' default clients do, rather than failing as a final HTTP error."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server() as target:

            def moved(call: MockCall) -> RawReply:
                path = "/v1/messages" if call.api == "messages" else "/v1/chat/completions"
                headers = (("location", target.base_url + path), ("content-type", "text/html"))
                return RawReply(status, headers, b"<html>moved</html>")

            async with open_mock_server(moved) as gateway, served_by(api, gateway) as model:
                collected = await collect(model, make_request("hi"))
    assert collected.message.content
    assert (gateway.statistics().requests, target.statistics().requests) == (1, 1)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@BOTH_SDKS
async def test_a_refused_connection_names_the_url_and_the_cause(api: str) -> None:
    """A connection failure says where the request was going and what the OS said."""
    root = f"http://127.0.0.1:{_closed_port()}"
    model: Adapter = (
        AnthropicModel(base_url=root, api_key="k")
        if api == "messages"
        else OpenAIModel(base_url=root + "/v1", api_key="k")
    )
    path = "/v1/messages" if api == "messages" else "/v1/chat/completions"
    with trio.fail_after(REAL_DEADLINE):
        async with model:
            with pytest.raises(ProviderConnectionError) as caught:
                await collect(model, make_request("hi"))
    error = caught.value
    assert (error.code, error.retryable) == ("CONNECTION_ERROR", True)
    assert f"connection to {root}{path} failed: ConnectError: " in error.message
    assert "Connection refused" in error.message


class _Failing(httpx2.AsyncBaseTransport):
    """A transport whose every request fails as *error* does."""

    def __init__(self, error: Callable[[httpx2.Request], Exception]) -> None:
        self._error = error

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await trio.lowlevel.checkpoint()
        raise self._error(request)


@BOTH_SDKS
@pytest.mark.parametrize(
    ("error", "code", "said"),
    [
        (
            lambda request: httpx2.ConnectError(
                "[Errno -2] Name or service not known", request=request
            ),
            "CONNECTION_ERROR",
            "failed: ConnectError: [Errno -2] Name or service not known",
        ),
        (
            lambda request: httpx2.ConnectTimeout("timed out", request=request),
            "TIMEOUT",
            "timed out: ConnectTimeout: timed out",
        ),
    ],
    ids=["dns", "connect-timeout"],
)
async def test_a_connection_failure_names_the_url_and_the_transport_error(
    api: str, error: Callable[[httpx2.Request], Exception], code: str, said: str
) -> None:
    """A name that does not resolve or a connect timeout is reported with the request's URL
    and the transport's own words."""
    transport = _Failing(error)
    if api == "messages":
        model: Adapter = AnthropicModel(
            transport=transport, base_url="http://gateway.test", api_key="k"
        )
        url = "http://gateway.test/v1/messages"
    else:
        model = OpenAIModel(transport=transport, base_url="http://gateway.test/v1", api_key="k")
        url = "http://gateway.test/v1/chat/completions"
    async with model:
        with pytest.raises(ProviderConnectionError) as caught:
            await collect(model, make_request("hi"))
    assert caught.value.code == code
    assert f"connection to {url} {said}" in caught.value.message
