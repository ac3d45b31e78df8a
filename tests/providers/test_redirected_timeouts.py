"""A request redirected to another server and timing out there names that server."""

from __future__ import annotations

import pytest
import trio

from ._raw_servers_kit import (
    Handler,
    adapter,
    call_charged,
    raw_server,
    read_request,
    read_then_hang,
)


def _redirecting_to(target: str) -> Handler:
    async def redirect(stream: trio.SocketStream, seen: list[bytes]) -> None:
        body = await read_request(stream)
        if body is not None:
            seen.append(body)
        head = f"HTTP/1.1 307 Temporary Redirect\r\nlocation: {target}\r\ncontent-length: 0\r\n\r\n"
        await stream.send_all(head.encode())
        await trio.sleep_forever()

    return redirect


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_a_timeout_after_a_redirect_names_the_server_redirected_to(api: str) -> None:
    """R10.3: a request its server redirects (307) to another that reads it and never
    answers times out naming the second server's host and port, where it named the
    first's."""
    with trio.fail_after(30):
        async with raw_server(read_then_hang) as (target_url, reached):
            target = f"{target_url}/v1/answer"
            async with (
                raw_server(_redirecting_to(target)) as (base_url, _),
                adapter(api, base_url, timeout=0.5) as model,
            ):
                charged = await call_charged(model)
    assert charged.error is not None
    assert charged.error.code == "TIMEOUT"
    port = target_url.rsplit(":", 1)[1]
    assert f"(127.0.0.1:{port}) sent no response headers" in charged.error.message
    assert len(reached) == 1
