"""A request redirected to another server and timing out there names that server."""

from __future__ import annotations

import pytest
import trio

from ._raw_servers_kit import (
    Charged,
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


async def _redirect_once_then_hang(stream: trio.SocketStream, seen: list[bytes]) -> None:
    """Redirects a first request to ``/hang`` after a moment; hangs on any other."""
    while (body := await read_request(stream)) is not None:
        seen.append(body)
        if b"hang" in body:
            await trio.sleep_forever()
        await trio.sleep(0.05)
        head = "HTTP/1.1 307 Temporary Redirect\r\nlocation: /hang\r\ncontent-length: 0\r\n\r\n"
        await stream.send_all(head.encode())


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_a_redirected_request_left_without_a_connection_says_its_first_was_sent(
    api: str,
) -> None:
    """R10.3: with one connection, a request redirected while another waits for that
    connection loses it to the other and times out waiting to send its sequel: it fails
    ``POOL_TIMEOUT`` saying the request it was redirected to was not sent, its charge kept
    (the server read the first), where it said nothing was sent."""
    results: dict[str, Charged] = {}

    async def call(name: str, text: str, delay: float) -> None:
        await trio.sleep(delay)
        results[name] = await call_charged(model, text=text, session_id=name)

    with trio.fail_after(30):
        async with (
            raw_server(_redirect_once_then_hang) as (base_url, _),
            adapter(api, base_url, timeout=0.6, max_connections=1) as model,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(call, "redirected", "redirect me", 0.0)
            nursery.start_soon(call, "other", "hang here", 0.01)
    error = results["redirected"].error
    assert error is not None
    assert error.code == "POOL_TIMEOUT"
    assert error.message.endswith("the request it was redirected to was not sent")
    assert results["redirected"].requests == 1
