"""A Timing function's draw too large for a float is a wait longer than any, never an error."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import httpx2
import pytest
import trio

from retinue.providers.mock import Delay, EchoPolicy, Endless, MockServer, Timing

_BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def _huge(_rng: object) -> int:
    return 10**400


def _huge_fraction(_rng: object) -> Fraction:
    return Fraction(10**400)


@pytest.mark.parametrize(
    "latency", [_huge, _huge_fraction, 10**400], ids=["int-drawn", "fraction-drawn", "fixed"]
)
async def test_a_latency_past_a_float_s_range_never_answers(
    latency: Delay, autojump_clock: trio.abc.Clock
) -> None:
    """A wait too large for a float, drawn (an int or a Fraction) or fixed, is
    ``math.inf``: never. The sleep raises no bare OverflowError out of the in-process
    transport (a 500 over TCP), and a fixed one is not refused as below 0."""
    server = MockServer(EchoPolicy(), timing=Timing(latency=latency))
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        with trio.move_on_after(3600) as waited:
            await client.post("http://mock/v1/chat/completions", json=_BODY)
    assert waited.cancelled_caught
    assert server.statistics().requests == 1


@pytest.mark.parametrize("field", ["first_token", "inter_chunk"])
async def test_a_pause_drawn_past_a_float_s_range_holds_the_stream(
    field: str, autojump_clock: trio.abc.Clock
) -> None:
    """The stream is held, as one paced by ``math.inf`` is, not cut as a failure."""
    server = MockServer(EchoPolicy(), timing=Timing(**{field: _huge}))
    parts: list[bytes] = []
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        with trio.move_on_after(3600) as waited:
            async with client.stream("POST", "http://mock/v1/chat/completions", json=_BODY) as r:
                async for part in r.aiter_raw():
                    parts.append(part)  # one by one: those before the deadline are kept
    assert waited.cancelled_caught
    assert len(parts) == (0 if field == "first_token" else 1)
    assert server.statistics().streams_truncated == 0


async def test_an_endless_interval_past_a_float_s_range_holds_the_stream(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Its events never come, as with an interval of ``math.inf``; it is not refused."""
    server = MockServer(lambda _call: Endless(10**400))
    parts: list[bytes] = []
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        with trio.move_on_after(3600) as waited:
            async with client.stream("POST", "http://mock/v1/chat/completions", json=_BODY) as r:
                async for part in r.aiter_raw():
                    parts.append(part)
    assert waited.cancelled_caught
    assert b"chat.completion.chunk" in b"".join(parts)
    assert server.statistics().streams_truncated == 0


def _text(_rng: object) -> str:
    return "5"


def _flag(_rng: object) -> bool:
    return True


@pytest.mark.parametrize("draw", [_text, _flag], ids=["text", "bool"])
async def test_a_draw_of_no_number_fails_its_request_as_no_number_of_seconds(
    draw: Callable[[object], object],
) -> None:
    """A drawn "5" or True is no number of seconds, as a fixed one is refused when built:
    the request fails (a 500), where float() read them as five seconds and one."""
    server = MockServer(EchoPolicy(), timing=Timing(latency=draw))  # type: ignore[arg-type]  # a draw of the wrong type, on purpose
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        with trio.fail_after(1):
            response = await client.post("http://mock/v1/chat/completions", json=_BODY)
    assert response.status_code == 500
