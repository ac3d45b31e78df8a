"""Adapters reach the API through the proxy the environment names, or the one they are given.

A forward proxy written here is the only way to a host name that resolves
nowhere; behind it the mock server answers, so a stream that completes went
through the proxy.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx2
import pytest
import trio

from retinue._content import Text
from retinue.providers import ProviderConnectionError
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.mock import MockServer, open_mock_server
from retinue.providers.openai import OpenAIModel

from .support import collect, make_request, mock_adapter

REAL_DEADLINE = 10.0
APIS = pytest.mark.parametrize("api", ["chat", "responses", "messages"])
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")

HIDDEN_HOST = "llm.internal.example"
"""A host name no resolver knows: only the test proxy reaches it."""

HIDDEN_URL = f"http://{HIDDEN_HOST}"

_BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


@attrs.define
class ForwardProxy:
    """An HTTP forward proxy that knows one host: :data:`HIDDEN_HOST`, the mock server.

    It relays the first request of each connection and what follows on it,
    which is enough for tests that send one request per adapter. It tunnels
    nothing: a ``CONNECT`` (for an ``https://`` URL) gets a 502.
    """

    upstream_port: int
    url: str = ""
    heads: list[bytes] = attrs.field(factory=list)
    """The head of every request it received, as received."""

    async def serve(self, client: trio.SocketStream) -> None:
        async with client:
            head, rest = await _read_head(client)
            self.heads.append(head)
            method, target, tail = head.split(b" ", 2)
            url = httpx2.URL(target.decode("ascii"))
            if method == b"CONNECT" or url.host != HIDDEN_HOST:
                await client.send_all(_BAD_GATEWAY)
                return
            async with await trio.open_tcp_stream("127.0.0.1", self.upstream_port) as upstream:
                # A server expects the path alone; the full URL is for proxies.
                await upstream.send_all(b" ".join((method, url.raw_path, tail)) + rest)
                await _relay_both_ways(client, upstream)


async def _read_head(stream: trio.SocketStream) -> tuple[bytes, bytes]:
    """A request's head (through its blank line) and the bytes read past it."""
    data = b""
    while b"\r\n\r\n" not in data:
        part = await stream.receive_some()
        if not part:
            raise AssertionError(f"the connection ended inside a request head: {data!r}")
        data += part
    end = data.index(b"\r\n\r\n") + 4
    return data[:end], data[end:]


async def _relay_both_ways(one: trio.SocketStream, other: trio.SocketStream) -> None:
    """Copy bytes each way until either side ends."""
    async with trio.open_nursery() as nursery:

        async def copy(source: trio.SocketStream, sink: trio.SocketStream) -> None:
            try:
                async for part in source:
                    await sink.send_all(part)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            nursery.cancel_scope.cancel()

        nursery.start_soon(copy, one, other)
        nursery.start_soon(copy, other, one)


@asynccontextmanager
async def open_proxy(server: MockServer) -> AsyncIterator[ForwardProxy]:
    """A :class:`ForwardProxy` to *server*, listening on localhost for the block."""
    proxy = ForwardProxy(int(server.base_url.rsplit(":", 1)[1]))
    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, proxy.serve, 0, host="127.0.0.1")
        listeners = await nursery.start(serve)
        proxy.url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        yield proxy
        nursery.cancel_scope.cancel()


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """*monkeypatch*, with no proxy variable set to start with (in either case)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def adapter_at(api: str, base_url: str, **options: Any) -> OpenAIModel | AnthropicModel:
    """The adapter for *api* (``messages``, ``chat`` or ``responses``) at *base_url*."""
    if api == "messages":
        return AnthropicModel(base_url=base_url, api_key="k", **options)
    return OpenAIModel(base_url=f"{base_url}/v1", api_key="k", api=api, **options)  # type: ignore[arg-type]


async def echoed_text(model: OpenAIModel | AnthropicModel) -> str:
    """The text the mock server's echo policy answers a ``ping`` with."""
    async with model:
        collected = await collect(model, make_request("ping"))
    assert collected.assembler.finish.kind == "stop"
    text = collected.message.content[0]
    assert isinstance(text, Text)
    return text.text


@APIS
async def test_http_proxy_from_the_environment_carries_the_requests(
    api: str, environment: pytest.MonkeyPatch
) -> None:
    """With ``HTTP_PROXY`` set, a request to a host only the proxy reaches goes through the
    proxy, in the absolute form proxies expect and without the shard header, and the stream
    completes."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server() as server, open_proxy(server) as proxy:
            environment.setenv("HTTP_PROXY", proxy.url)
            assert "ping" in await echoed_text(adapter_at(api, HIDDEN_URL))
    [head] = proxy.heads
    assert head.startswith(f"POST {HIDDEN_URL}{PATHS[api]} HTTP/1.1\r\n".encode())
    assert b"x-retinue-shard" not in head.lower()


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_https_proxy_from_the_environment_is_asked_for_a_tunnel_to_an_https_url(
    api: str, environment: pytest.MonkeyPatch
) -> None:
    """With ``HTTPS_PROXY`` set, a request to an ``https://`` URL asks that proxy for a
    tunnel to the host; a proxy that refuses it fails the request as a connection error."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server() as server, open_proxy(server) as proxy:
            environment.setenv("HTTPS_PROXY", proxy.url)
            with pytest.raises(ProviderConnectionError) as caught:
                await echoed_text(adapter_at(api, f"https://{HIDDEN_HOST}"))
    assert caught.value.code == "CONNECTION_ERROR"
    [head] = proxy.heads
    assert head.startswith(f"CONNECT {HIDDEN_HOST}:443 HTTP/1.1\r\n".encode())


async def test_all_proxy_covers_http_urls_beside_an_https_proxy(
    environment: pytest.MonkeyPatch,
) -> None:
    """``ALL_PROXY`` covers an ``http://`` URL when ``HTTPS_PROXY`` (for ``https://`` only) is
    set too: the request goes through the ``ALL_PROXY`` proxy."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server() as server, open_proxy(server) as proxy:
            environment.setenv("ALL_PROXY", proxy.url)
            environment.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
            assert "ping" in await echoed_text(adapter_at("chat", HIDDEN_URL))
    assert len(proxy.heads) == 1


@APIS
async def test_a_host_no_proxy_lists_is_reached_directly(
    api: str, environment: pytest.MonkeyPatch
) -> None:
    """A host ``NO_PROXY`` lists bypasses the proxy ``HTTP_PROXY`` names: the stream
    completes and the proxy sees nothing."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server() as server, open_proxy(server) as proxy:
            environment.setenv("HTTP_PROXY", proxy.url)
            environment.setenv("NO_PROXY", f"{HIDDEN_HOST},127.0.0.1")
            assert "ping" in await echoed_text(adapter_at(api, server.base_url))
    assert proxy.heads == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_this_machine_is_reached_directly_whatever_proxy_the_environment_names(
    host: str, environment: pytest.MonkeyPatch
) -> None:
    """With ``HTTP_PROXY`` set and no ``NO_PROXY``, a server on this machine (the embedded
    mock provider) is reached directly: a proxy elsewhere could not reach it."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server() as server, open_proxy(server) as proxy:
            environment.setenv("HTTP_PROXY", proxy.url)
            url = server.base_url.replace("127.0.0.1", host)
            for api in ("chat", "messages"):
                assert "ping" in await echoed_text(adapter_at(api, url))
    assert proxy.heads == []


@APIS
async def test_a_given_proxy_carries_the_requests_without_environment_variables(
    api: str, environment: pytest.MonkeyPatch
) -> None:
    """``proxy=`` sends every request through that proxy, with no proxy variable set."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server() as server, open_proxy(server) as proxy:
            assert "ping" in await echoed_text(adapter_at(api, HIDDEN_URL, proxy=proxy.url))
    assert len(proxy.heads) == 1


async def test_a_given_proxy_wins_over_the_environment(environment: pytest.MonkeyPatch) -> None:
    """``proxy=`` is used instead of the proxy ``HTTP_PROXY`` names, and even for a host
    ``NO_PROXY`` lists, as ``httpx2.AsyncClient(proxy=...)`` does."""
    with trio.fail_after(REAL_DEADLINE):
        async with (
            open_mock_server() as server,
            open_proxy(server) as given,
            open_proxy(server) as named,
        ):
            environment.setenv("HTTP_PROXY", named.url)
            environment.setenv("NO_PROXY", HIDDEN_HOST)
            for api in ("chat", "messages"):
                assert "ping" in await echoed_text(adapter_at(api, HIDDEN_URL, proxy=given.url))
    assert (len(given.heads), named.heads) == (2, [])


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_a_given_transport_is_used_as_given_whatever_the_environment(
    api: str, environment: pytest.MonkeyPatch
) -> None:
    """An adapter built with ``transport=`` sends through that transport, not the proxy
    ``HTTP_PROXY`` names."""
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server() as server, open_proxy(server) as proxy:
            environment.setenv("HTTP_PROXY", proxy.url)
            assert "ping" in await echoed_text(mock_adapter(api, server))
    assert proxy.heads == []


@pytest.mark.parametrize("api", ["chat", "messages"])
@pytest.mark.parametrize("url", ["ftp://user:secret@proxy.example", "proxy.example:3128", ""])
def test_a_proxy_that_is_not_a_proxy_url_is_refused_when_the_adapter_is_built(
    api: str, url: str
) -> None:
    """A ``proxy=`` without an http, https or socks5 scheme is a ``ValueError`` from the
    constructor, whose message does not repeat the URL (it may hold a password)."""
    with pytest.raises(ValueError, match="proxy must be an http://") as caught:
        adapter_at(api, HIDDEN_URL, proxy=url)
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize("api", ["chat", "messages"])
def test_a_proxy_with_a_transport_is_refused(api: str) -> None:
    """A transport is used as given, so a ``proxy=`` beside it could not be honoured: the
    constructor refuses the pair."""
    with pytest.raises(ValueError, match="proxy or transport, not both"):
        adapter_at(
            api,
            HIDDEN_URL,
            proxy="http://127.0.0.1:9",
            transport=httpx2.MockTransport(lambda _request: httpx2.Response(200)),
        )


@pytest.mark.parametrize(
    "proxy",
    [
        "ftp://user:secret@proxy.example:21",
        "socks5://127.0.0.1:9",
        "http://user:secret/pw@proxy.example:8080",
    ],
    ids=["ftp", "socks", "slash-in-the-password"],
)
async def test_a_proxy_the_environment_names_but_cannot_be_used_is_passed_over(
    proxy: str, environment: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A proxy variable httpx2 cannot use (an unknown scheme, SOCKS without ``socksio``)
    does not stop an adapter from being built: its requests go direct and
    a warning names the variable's pattern, not the URL (it may hold a password), nor a
    parser's word on it, which quoted the password's start as a port."""
    if proxy.startswith("socks") and importlib.util.find_spec("socksio") is not None:
        pytest.skip("socksio is installed here: httpx2 can use a SOCKS proxy")
    environment.setenv("ALL_PROXY", proxy)
    with trio.fail_after(REAL_DEADLINE):
        async with open_mock_server() as server:
            for api in ("chat", "messages"):
                assert "ping" in await echoed_text(adapter_at(api, server.base_url))
    warnings = [r.getMessage() for r in caplog.records if r.name == "retinue.providers"]
    assert warnings
    assert all("all://" in warning and "secret" not in warning for warning in warnings)
