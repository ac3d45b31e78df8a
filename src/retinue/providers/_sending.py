"""Sending a request within a deadline: the response headers, or the error that says why not."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Literal, final

import httpx2
import trio

from ._bodies import keep_error_body_decodable
from ._failures import ProviderConnectionError, ProviderError, status_error, unsent
from ._feedback import report_unsent

__all__ = [
    "brief_seconds",
    "close_response",
    "current_answer",
    "note_answer",
    "send_within",
    "server_named",
]


async def close_response(response: httpx2.Response) -> None:
    """Close *response* and its connection, shielded from cancellation for at most a second.

    A stream abandoned by an abort must not leave its connection half-read.
    """
    with trio.CancelScope(shield=True, deadline=trio.current_time() + 1.0):
        await response.aclose()


def server_named(provider: str, url: str | httpx2.URL) -> str:
    """*provider* and the server at *url*: its host, and its port when the URL gives one.

    So the timeouts of two adapters of one provider name (two OpenAI-compatible
    servers) can be told apart, as their connection failures are by their URLs.
    """
    try:
        parsed = httpx2.URL(url)
    except (httpx2.InvalidURL, TypeError):
        return provider
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    if not host:
        return provider
    return (
        f"{provider} ({host}:{parsed.port})" if parsed.port is not None else f"{provider} ({host})"
    )


Stage = Literal["unknown", "waiting", "connecting", "sending", "sent"]
"""How far a request through the adapter's own pools got: waiting for a free
connection, holding one not yet ready (being opened), being written, or written
whole. A transport of the caller's own says nothing: ``unknown``, taken as sent."""


@final
class _Answer:
    """The response headers of the request being sent, once they arrived, and how far it got."""

    __slots__ = ("response", "stage", "waited", "waited_for")

    def __init__(self) -> None:
        self.response: httpx2.Response | None = None
        self.stage: Stage = "unknown"
        self.waited_for: int | None = None
        """When the request waited for a free connection: how many there are in all."""
        self.waited = 0.0
        """Seconds the request spent waiting for free connections."""

    @property
    def unsent(self) -> bool:
        """Whether the request is known not to have reached the server: it was not written
        whole, and no response (a redirect's) came. Until then the server has no whole
        request to act on."""
        return self.stage in ("waiting", "connecting", "sending") and self.response is None

    @property
    def failed(self) -> bool:
        """Whether the response has a status the SDKs raise an error for (any but 2xx)."""
        response = self.response
        # A 3xx with a Location is followed (the client follows redirects): not the SDK's to raise.
        return (
            response is not None and not response.is_success and not response.has_redirect_location
        )

    async def close(self) -> None:
        """Close the response, if there is one (the SDK left it open when its body failed)."""
        if self.response is None:
            await trio.lowlevel.checkpoint()
        else:
            await close_response(self.response)

    def timed_out(self, provider: str, seconds: float, server: str) -> ProviderConnectionError:
        """The error for a send that outlasted *seconds* with no failed response."""
        if self.stage in ("waiting", "connecting", "sending"):
            error = self._not_sent(provider, seconds, server)
            # A redirect's first request reached a server, which may have counted it.
            return unsent(error) if self.unsent else error
        late = "sent no response headers"
        redirect = self.response
        # A redirect is read whole before the client follows it.
        if redirect is not None and not _read_whole(redirect):
            late = f"sent a {redirect.status_code} redirect whose body did not arrive"
        elif redirect is not None:
            server = _redirected_to(redirect, provider, server)
        return ProviderConnectionError(
            f"{server} {late} {self._server_time(seconds)}", code="TIMEOUT", retryable=True
        )

    def _server_time(self, seconds: float) -> str:
        """How long of *seconds* the server had: a wait for a free connection was not its."""
        if round(self.waited, 2) <= 0.0:
            return f"within {seconds} s"
        had = brief_seconds(max(0.0, seconds - self.waited))
        return (
            f"within {had} s (the request spent {brief_seconds(self.waited)} s of its"
            f" {seconds} s timeout waiting for a free connection)"
        )

    def _not_sent(self, provider: str, seconds: float, server: str) -> ProviderConnectionError:
        """The error for a request not written whole within *seconds*: no server can act on it.

        After a redirect it is the request to the server redirected to.
        """
        if self.waited_for is not None and (self.stage == "waiting" or self.waited * 2 >= seconds):
            # Given a connection only as its time ran out (one freed by another request
            # giving up), it spent that time waiting, not on the server. One given it
            # with most of its time left spent that on the server.
            late = "" if self.stage == "waiting" else " until too late to send the request whole"
            # After a redirect a server read the first request: only its sequel went nowhere.
            sent = "nothing was sent"
            if self.response is not None:
                sent = "the request it was redirected to was not sent"
            return ProviderConnectionError(
                f"{provider} had no free connection within {seconds} s: all"
                f" {self.waited_for} (max_connections) were in use{late}; {sent}",
                code="POOL_TIMEOUT",
                retryable=True,
            )
        what = "a connection" if self.stage == "connecting" else "the whole request"
        request = "the request"
        if self.response is not None:
            server = _redirected_to(self.response, provider, server)
            request = "the request it was redirected to"
        return ProviderConnectionError(
            f"{server} did not take {what} {self._server_time(seconds)}: {request} was not sent",
            code="TIMEOUT",
            retryable=True,
        )

    def error(self, provider: str, detail: str) -> ProviderError:
        """The error for a response whose body could not be had: its status's, when it has one."""
        response = self.response
        if response is None or not self.failed:
            return ProviderConnectionError(
                f"{provider} response failed: {detail}", code="CONNECTION_ERROR", retryable=True
            )
        return status_error(
            response.status_code, None, response.headers, provider=provider, detail=detail
        )


def _redirected_to(redirect: httpx2.Response, provider: str, server: str) -> str:
    """The server *redirect* sent the request on to, named as :func:`server_named` does;
    *server* when its location cannot be read."""
    try:
        target = redirect.url.join(redirect.headers["location"])
    except (KeyError, RuntimeError, httpx2.InvalidURL):
        return server
    return server_named(provider, target)


def brief_seconds(seconds: float) -> str:
    """*seconds* to two decimals, or to one significant digit under 0.01 s (at least
    0.0001, written without an exponent), so that time a request had never reads as none."""
    if 0.0 < seconds < 0.01:
        return f"{max(seconds, 0.0001):.1g}"
    return f"{round(seconds, 2)}"


def _read_whole(response: httpx2.Response) -> bool:
    try:
        response.content  # noqa: B018 - raises while the body is unread
    except httpx2.ResponseNotRead:
        return False
    return True


current_answer: ContextVar[_Answer | None] = ContextVar("retinue_answer", default=None)
"""The request :func:`send_within` is sending in this task, if any."""


async def note_answer(response: httpx2.Response) -> None:  # noqa: ASYNC910 - records only
    """An event hook: note the response the SDK is about to handle, for :func:`send_within`."""
    keep_error_body_decodable(response)
    answer = current_answer.get()
    if answer is not None:
        answer.response = response


async def send_within(
    send: Callable[[], Awaitable[httpx2.Response]],
    seconds: float,
    provider: str,
    *,
    server: str | None = None,
) -> httpx2.Response:
    """Await ``send()`` (the request up to its response headers) for at most *seconds*.

    A server that sent no headers in time is named *server* (the provider and
    its host), or *provider* when not given.

    The SDKs read an error status's body themselves, outside their own
    handling of connection errors: a body that breaks, cannot be decoded or
    does not arrive in time raises the error of the status (typed, retryable
    as that status is), not a bare ``httpx2`` error or a header timeout.
    """
    answer = _Answer()
    token = current_answer.set(answer)
    try:
        with trio.move_on_after(seconds):
            try:
                return await send()
            except (httpx2.TransportError, httpx2.DecodingError) as exc:
                error = answer.error(provider, f"its body could not be read: {exc!r}")
                await answer.close()
                raise error from exc
    except ProviderError as exc:
        # A connection the server closed before it took the whole request (httpcore
        # reads for an answer after a failed write): nothing it could act on.
        if answer.unsent:
            unsent(exc)
        raise
    except BaseException:
        # A caller's cancel (an agent's abort, an outer deadline) before the request
        # was written whole: admission gives its charge back.
        if answer.unsent:
            report_unsent()
        raise
    finally:
        current_answer.reset(token)
    if answer.failed:
        await answer.close()
        raise answer.error(provider, f"its body did not arrive within {seconds} s")
    raise answer.timed_out(provider, seconds, server or provider)
