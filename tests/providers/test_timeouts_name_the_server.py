"""Header and stream timeouts name the server as well as the provider, so two adapters of
one provider name (two OpenAI-compatible servers) can be told apart."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest
import trio

from retinue.providers import ProviderError
from retinue.providers.openai import OpenAIModel

from .support import collect, make_request


class _Silent(httpx2.AsyncBaseTransport):
    """Sends no headers (*headers* false), or headers and then no body."""

    def __init__(self, *, headers: bool) -> None:
        self._headers = headers

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if not self._headers:
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_SilentBody()
        )


class _SilentBody(httpx2.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        await trio.sleep_forever()
        yield b""  # pragma: no cover - never reached


async def _timeout_message(base_url: str, *, headers: bool) -> str:
    async with OpenAIModel(
        transport=_Silent(headers=headers), base_url=base_url, api_key="k", timeout=1.5
    ) as model:
        with pytest.raises(ProviderError) as caught:
            await collect(model, make_request("hi"))
    assert caught.value.code == "TIMEOUT"
    return caught.value.message


@pytest.mark.parametrize(
    ("headers", "said"),
    [(False, "sent no response headers within 1.5 s"), (True, "sent nothing for 1.5 s")],
)
async def test_a_timeout_names_the_server(
    autojump_clock: trio.abc.Clock, *, headers: bool, said: str
) -> None:
    """A wait for headers, or a silence in the stream, that outlasts ``timeout`` fails
    naming the provider and its server's host (and port, when the URL gives one), where
    it named only the provider: ``openai sent no response headers within 1.5 s``."""
    with trio.fail_after(30):
        first = await _timeout_message("http://first.example/v1", headers=headers)
        second = await _timeout_message("http://127.0.0.1:8001/v1", headers=headers)
    assert first.startswith(f"openai (first.example) {said}")
    assert second.startswith(f"openai (127.0.0.1:8001) {said}")
