"""An event, or a whole JSON body, longer than any answer is refused once it passes the
limit, not held in memory until it ends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest
import trio

from retinue.providers import ProviderStreamError
from retinue.providers.anthropic import AnthropicModel
from retinue.providers.openai import OpenAIModel

from .support import collect, make_request

MEBIBYTE = 1024 * 1024
MAX_EVENT_BYTES = 32 * MEBIBYTE
"""The longest event or JSON body the adapters read: the largest request the APIs take."""
SERVED = MAX_EVENT_BYTES + 8 * MEBIBYTE


class _Unending(httpx2.AsyncByteStream):
    """A body that opens one line and never ends it; counts the bytes it sent."""

    def __init__(self, opening: bytes) -> None:
        self.opening = opening
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        part = b"x" * MEBIBYTE
        yield self.opening
        while self.sent < SERVED:
            self.sent += len(part)
            yield part


def _adapter(api: str, content_type: str, body: _Unending) -> OpenAIModel | AnthropicModel:
    def answer(_request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": content_type}, stream=body)

    transport = httpx2.MockTransport(answer)
    if api == "messages":
        return AnthropicModel(base_url="http://mock", api_key="k", transport=transport)
    return OpenAIModel(base_url="http://mock/v1", api_key="k", api=api, transport=transport)  # type: ignore[arg-type]


@pytest.mark.parametrize("api", ["chat", "messages"])
@pytest.mark.parametrize(
    ("content_type", "opening", "where"),
    [
        ("text/event-stream", b'data: {"text": "', "stream, event 1"),
        ("application/json", b'{"text": "', "response body"),
    ],
    ids=["event", "json-body"],
)
async def test_an_event_longer_than_any_answer_is_refused_at_the_limit(
    api: str, content_type: str, opening: bytes, where: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: a line that runs past ``MAX_EVENT_BYTES`` fails as malformed data, read no
    further than the limit, not read and held whole until the body ends."""
    body = _Unending(opening)
    with trio.fail_after(60):
        async with _adapter(api, content_type, body) as model:
            with pytest.raises(ProviderStreamError) as caught:
                await collect(model, make_request("hi"))
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert f" {where}: longer than {MAX_EVENT_BYTES} bytes" in str(caught.value)
    assert body.sent <= MAX_EVENT_BYTES + MEBIBYTE
