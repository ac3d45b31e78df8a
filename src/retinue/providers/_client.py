"""What both adapters do with their SDK client: post a body it can encode, close it once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Protocol, Self

import httpx2
import trio

from ._failures import ProviderError

__all__ = ["CLOSE_SECONDS", "ClientOwner", "post_encodable"]

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


async def post_encodable(
    post: Callable[[dict[str, object]], Awaitable[httpx2.Response]],
    body: dict[str, object],
    provider: str,
) -> httpx2.Response:
    """``post(body)``; a body with no UTF-8 form goes out with U+FFFD for each lone surrogate.

    A lone surrogate is lossless JSON, so the log keeps it (a file name that
    ``os.fsdecode`` gave), but the SDKs' UTF-8 encoding of the body refuses it
    before anything is sent. Replacing it only after that refusal leaves the
    usual request without an extra pass over the history.
    """
    try:
        return await post(body)
    except UnicodeEncodeError:
        pass
    cleaned = _without_lone_surrogates(body)
    assert isinstance(cleaned, dict)
    try:
        return await post(cleaned)
    except UnicodeEncodeError as exc:  # not the body: a header, say
        raise ProviderError(f"{provider} client error: {exc}", code="CLIENT_ERROR") from exc


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
