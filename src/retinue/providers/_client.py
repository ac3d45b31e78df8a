"""What both adapters do with their SDK client: post a body it can encode, close it once."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Protocol, Self

import httpx2
import trio

from ._failures import ProviderConnectionError, ProviderError, never_sent, unsent
from ._http import server_named
from ._sending import close_response, send_within

__all__ = ["CLOSE_SECONDS", "ClientOwner", "json_body", "post_json", "prime_platform"]

CLOSE_SECONDS = 1.0
"""How long closing an adapter may hold off a cancellation."""


def _without_lone_surrogates(value: object) -> object:
    """*value* (JSON data) with each lone surrogate in its strings replaced by U+FFFD.

    A surrogate pair held as two code points becomes its character, as a JSON
    round trip through the session log makes it.
    """
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {
            _without_lone_surrogates(key): _without_lone_surrogates(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    return value


def json_body(body: dict[str, object]) -> bytes:
    """*body* as the SDKs encode a JSON body: compact UTF-8 JSON, no NaN.

    Encoded here and sent as the request's content: given the body as data,
    the Anthropic SDK first copies it whole, walking it in Python (about ten
    times what encoding it costs), on every request of a session whose
    history grows with each.
    """
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


async def post_json(
    post: Callable[[bytes], Awaitable[httpx2.Response]],
    body: dict[str, object],
    provider: str,
) -> httpx2.Response:
    """``post(content)`` of *body* encoded; one with no UTF-8 form goes out with U+FFFD
    for each lone surrogate.

    A lone surrogate is lossless JSON, so the log keeps it (a file name that
    ``os.fsdecode`` gave), but UTF-8 has no form for it. Replacing it only
    after encoding failed leaves the usual request without an extra pass over
    the history.
    """
    try:
        content = json_body(body)
    except UnicodeEncodeError:
        cleaned = _without_lone_surrogates(body)
        assert isinstance(cleaned, dict)
        content = json_body(cleaned)
    try:
        return await post(content)
    except UnicodeEncodeError as exc:  # not the body: a header, say
        refused = ProviderError(f"{provider} client error: {exc}", code="CLIENT_ERROR")
        raise unsent(refused) from exc


def prime_platform(client: object, detect: Callable[[], object]) -> None:
    """Detect the platform now rather than in a worker thread on the first request.

    The SDK runs that detection (*detect*, its ``get_platform``) through a
    thread on its first request; waiting for a thread under a virtual clock
    lets the clock jump past deadlines.
    """
    if getattr(client, "_platform", "unset") is None:
        client._platform = detect()  # type: ignore[attr-defined]


class _SdkClient(Protocol):
    """What the adapters need of an SDK client: its base URL and ``close``."""

    @property
    def base_url(self) -> object: ...

    async def close(self) -> None: ...


class ClientOwner:
    """The lifecycle both adapters share: own one SDK client, close it once.

    Adapters are async context managers because nothing closes an SDK client
    for them under trio.
    """

    _client: _SdkClient
    _closed: bool = False
    provider: str
    _read_timeout: float

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return str(self._client.base_url)

    async def __aenter__(self) -> Self:
        await trio.lowlevel.checkpoint()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the SDK client and its connections; idempotent, always a checkpoint.

        The close is shielded from cancellation for at most ``CLOSE_SECONDS``
        (then sockets are left to the OS), and a cancellation is raised only
        after it, so an adapter left during shutdown or a timeout is closed too.
        """
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        # Marked first, so a request started while the pools close is refused.
        self._closed = True
        with trio.CancelScope(shield=True, deadline=trio.current_time() + CLOSE_SECONDS):
            await self._client.close()
        await trio.lowlevel.checkpoint()

    def _check_open(self) -> None:
        """Refuse a request to a closed adapter (``ADAPTER_CLOSED``)."""
        if self._closed:
            raise unsent(self._closed_error())

    def _closed_error(self) -> ProviderError:
        return ProviderError(f"{self!r} is closed", code="ADAPTER_CLOSED")

    @contextmanager
    def _closed_as_such(self) -> Iterator[None]:
        """Report a stream cut by this adapter's own close as ``ADAPTER_CLOSED``.

        Closing the pools breaks the connections of the streams still reading
        their bodies; each would otherwise fail as a cut stream, retryable, and
        be retried on the closed adapter.
        """
        try:
            yield
        except ProviderConnectionError as exc:
            if self._closed:
                raise self._closed_error() from exc
            raise

    async def _send_open(self, send: Callable[[], Awaitable[httpx2.Response]]) -> httpx2.Response:
        """:func:`send_within` ``send()``, for an adapter still open when it is done.

        A request that waited for a connection or its headers while the adapter
        closed fails ``ADAPTER_CLOSED`` (its connection failure the cause), and
        a response that came anyway is closed: a transport of the caller's own
        may send through the close, and its connection would stay open.
        """
        try:
            response = await send_within(
                send,
                self._read_timeout,
                self.provider,
                server=server_named(self.provider, self.base_url),
            )
        except ProviderConnectionError as exc:
            if self._closed:
                closed = self._closed_error()
                raise (unsent(closed) if never_sent(exc) else closed) from exc
            raise
        if self._closed:
            await close_response(response)
            raise self._closed_error()
        return response
