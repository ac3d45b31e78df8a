"""Tunnels through an HTTP proxy that give their pool place back when they fail to open.

httpcore's tunnel connection opens itself on its first request: a ``CONNECT`` to the
proxy, then the provider's TLS handshake over the tunnel. When that handshake fails
(it times out, or the caller cancels it), httpcore leaves the proxy's connection
waiting on the ``CONNECT`` answer it never closed: neither closed nor idle, the pool
keeps it as a connection in use for good, and each later request to that host waits
for a place in the pool that never frees. These close such a connection.
"""

from __future__ import annotations

from typing import final

import httpcore2
import httpx2
import trio
from httpcore2._async.http_proxy import AsyncTunnelHTTPConnection

__all__ = ["mend_tunnels"]


@final
class _MendedTunnel(AsyncTunnelHTTPConnection):
    """A tunnel that closes itself when a request leaves it neither closed nor idle."""

    async def handle_async_request(self, request: httpcore2.Request) -> httpcore2.Response:
        try:
            return await super().handle_async_request(request)
        except BaseException:
            # A request that failed on an open tunnel leaves its connection closed or
            # idle: only a tunnel that never opened is left in use, by no request.
            if not (self.is_closed() or self.is_idle()):
                with trio.CancelScope(shield=True):
                    await self.aclose()
            raise


@final
class _MendingProxy(httpcore2.AsyncHTTPProxy):
    """httpx2's pool of connections through an HTTP proxy, its tunnels mended."""

    def create_connection(self, origin: httpcore2.Origin) -> httpcore2.AsyncConnectionInterface:
        connection = super().create_connection(origin)
        if type(connection) is AsyncTunnelHTTPConnection:
            # Built by httpcore from the pool's settings: made a mended one in place,
            # as the subclass adds no state.
            connection.__class__ = _MendedTunnel
        return connection


def mend_tunnels(transport: httpx2.AsyncHTTPTransport) -> None:
    """Make *transport*'s tunnels through an HTTP proxy close when they fail to open.

    httpx2 builds the proxy's pool itself, from its own settings: it is made a
    :class:`_MendingProxy` in place (the subclass adds no state). A transport with
    no HTTP proxy is left as it is.
    """
    pool = getattr(transport, "_pool", None)
    if type(pool) is httpcore2.AsyncHTTPProxy:
        pool.__class__ = _MendingProxy
