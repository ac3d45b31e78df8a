"""The ``httpx2.AsyncClient`` an adapter sends through, and its settings checked.

Requests reach the API through sharded pools (:mod:`._pools`), through the proxies
the environment names, or through one the caller gives, as ``httpx2.AsyncClient``
sends them by default; a transport the caller gives replaces them all.
"""

from __future__ import annotations

import logging
from typing import final

import httpx2
from httpx2._utils import get_environment_proxies

from retinue._checks import finite_number_error, positive_int_error

from ._pools import MAX_CONNECTIONS, SHARD_HEADER, ShardedTransport
from ._sending import note_answer

__all__ = ["check_http_settings", "make_http_client"]

log = logging.getLogger("retinue.providers")


@final
class _ShardHeaderStripper(httpx2.AsyncBaseTransport):
    """A caller's transport, minus the shard header.

    Only :class:`ShardedTransport` reads (and removes) the header; any other
    transport would send the session id upstream.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send *request* through the wrapped transport without the shard header."""
        if SHARD_HEADER in request.headers:
            del request.headers[SHARD_HEADER]
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the wrapped transport."""
        await self._inner.aclose()


def check_http_settings(
    *, max_connections: int, pool_size: int, timeout: float, connect_timeout: float
) -> None:
    """Refuse connection settings no request could work with, when the adapter is built.

    A zero count would leave every request waiting for a connection that never
    comes; a negative or NaN timeout would fail every request. A count past
    :data:`MAX_CONNECTIONS` is taken: :func:`make_http_client` opens no more than that.

    Raises:
        ValueError: naming the setting and its value.
    """
    _check_count("max_connections", max_connections)
    _check_count("pool_size", pool_size)
    _check_seconds("timeout", timeout)
    _check_seconds("connect_timeout", connect_timeout)


def _check_count(name: str, value: object) -> None:
    # Always a ValueError here, as the adapters have documented it.
    if positive_int_error(value) is not None:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")


def _check_seconds(name: str, value: object) -> None:
    if finite_number_error(value) is not None:
        raise ValueError(f"{name} must be a positive, finite number of seconds, not {value!r}")


_TRANSPORT_METHODS = ("handle_async_request", "aclose")


def make_http_client(
    *,
    max_connections: int,
    pool_size: int,
    timeout: float,
    connect_timeout: float,
    transport: httpx2.AsyncBaseTransport | None = None,
    proxy: str | None = None,
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` over ``ceil(max_connections / pool_size)`` sharded pools.

    *max_connections* past :data:`MAX_CONNECTIONS` is that many: the pools it
    would add could never all be used, and they cost memory and time to build.
    It follows redirects, as the SDKs' own clients do. Requests go through
    *proxy* when given, else through the proxies ``HTTP_PROXY``, ``HTTPS_PROXY``
    and ``ALL_PROXY`` name, except to ``NO_PROXY`` hosts. A given *transport*
    replaces the pools and proxies; the shard header never reaches it.

    Raises:
        TypeError: *transport* is no transport (it lacks ``handle_async_request`` or ``aclose``).
        ValueError: *proxy* is not an http, https or socks5 URL, or comes with a *transport*.
    """
    mounts: dict[str, httpx2.AsyncBaseTransport | None] = {}
    if transport is not None:
        if not all(callable(getattr(transport, name, None)) for name in _TRANSPORT_METHODS):
            # Taken as it is, it would fail the first request with an AttributeError (or,
            # through the Anthropic SDK, a connection error retried as one) and the close.
            raise TypeError(
                "transport must be None or an httpx2 transport (with handle_async_request "
                f"and aclose), got {transport!r}"
            )
        if proxy is not None:
            raise ValueError("pass proxy or transport, not both: a transport is used as given")
        if not isinstance(transport, ShardedTransport):
            transport = _ShardHeaderStripper(transport)
    else:
        connections = min(max_connections, MAX_CONNECTIONS)
        shards = -(-connections // pool_size)
        transport = ShardedTransport(
            shards, pool_size, max_connections=connections, proxy=_given_proxy(proxy)
        )
        if proxy is None:
            mounts = _environment_routes(transport)
    return httpx2.AsyncClient(
        transport=transport,
        mounts=mounts,
        timeout=httpx2.Timeout(timeout, connect=connect_timeout, pool=None),
        follow_redirects=True,
        event_hooks={"response": [note_answer]},
    )


def _given_proxy(url: str | None) -> httpx2.Proxy | None:
    """*url* as a proxy, refused now rather than on the first request."""
    if url is None:
        return None
    try:
        return httpx2.Proxy(url)
    except (ValueError, httpx2.InvalidURL):
        # Not echoed: a proxy URL may hold a password.
        raise ValueError(
            "proxy must be an http://, https://, socks5:// or socks5h:// URL"
        ) from None


def _proxied_or_none(direct: ShardedTransport, url: str, pattern: str) -> ShardedTransport | None:
    """Pools through the environment's proxy *url*; ``None`` (direct) if it cannot be used.

    The environment is set for every program the user runs: a proxy httpx2
    cannot use (a ``socks5://`` one without ``socksio``, an ``ftp://`` one)
    must not stop this adapter from being built, as it would refuse even
    servers the proxy was never meant for.
    """
    try:
        return direct.through(httpx2.Proxy(url))
    except (ImportError, ValueError, httpx2.InvalidURL) as exc:
        # Neither the URL nor a parser's word on it ("Invalid port: 'pw'"), which quotes
        # a piece of it: it may hold a password. A missing package is named.
        why = (
            f"{type(exc).__name__}: {exc}"
            if isinstance(exc, ImportError)
            else "not an http://, https://, socks5:// or socks5h:// URL"
        )
        log.warning(
            "the environment's proxy for %s cannot be used (%s); those requests go direct",
            pattern,
            why,
        )
        return None


_LOOPBACK = ("all://localhost", "all://127.0.0.1", "all://[::1]")


def _environment_routes(direct: ShardedTransport) -> dict[str, httpx2.AsyncBaseTransport | None]:
    """Proxied pools for each URL pattern the environment's proxy settings name.

    These are the patterns ``httpx2.AsyncClient`` mounts when given no
    transport, and loopback hosts; ``None`` (a ``NO_PROXY`` host, loopback)
    leaves the pattern to *direct*.
    One proxy named for several patterns gets one set of pools.
    """
    proxied: dict[str, ShardedTransport | None] = {}
    routes: dict[str, httpx2.AsyncBaseTransport | None] = {}
    found = get_environment_proxies()
    if any(url is not None for url in found.values()):
        # A proxy elsewhere cannot reach this machine's servers (the embedded mock
        # provider, a local gateway): loopback goes direct, as in Go's clients.
        found = dict.fromkeys(_LOOPBACK) | found
    for pattern, url in found.items():
        if url is not None and url not in proxied:
            proxied[url] = _proxied_or_none(direct, url, pattern)
        routes[pattern] = None if url is None else proxied[url]
    return routes
