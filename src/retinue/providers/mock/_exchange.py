"""Turn a policy's answer into an outgoing HTTP response: status, headers, timed body parts."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncGenerator, Mapping
from typing import Final, final

import attrs
import trio

from ._policy import Policy
from ._render import (
    endless_event,
    endless_prologue,
    error_body,
    render_json,
    render_stream,
    stream_error_event,
)
from ._values import Api, Endless, Fault, MockCall, MockReply, MockResponse, RawReply, Timing

__all__ = ["STALL", "Outgoing", "Truncated", "answer", "parse_call"]

STALL: Final = b""
"""A body part meaning: stop sending and hold the connection open."""

_SSE = (("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache"))
_JSON = (("content-type", "application/json"),)
_PATHS: dict[str, Api] = {
    "/v1/chat/completions": "chat",
    "/chat/completions": "chat",
    "/v1/responses": "responses",
    "/responses": "responses",
    "/v1/messages": "messages",
}


class Truncated(Exception):  # noqa: N818 - a control-flow signal, like trio.Cancelled
    """Raised by a body iterator to cut the connection before the message is complete."""


@final
@attrs.frozen
class Outgoing:
    """An HTTP response to send: the body is bytes, or timed parts (``STALL`` holds)."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes | AsyncGenerator[bytes, None]
    fault: str | None = None


def parse_call(
    path: str, headers: Mapping[str, str], body: bytes, number: int
) -> MockCall | Outgoing:
    """Parse a request into a call, or the error response it deserves."""
    api = _PATHS.get(path.split("?", 1)[0])
    if api is None:
        return Outgoing(404, _JSON, error_body("chat", 404).replace(b"server_error", b"not_found"))
    try:
        parsed = json.loads(body or b"{}")
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return Outgoing(400, _JSON, error_body(api, 400))
    return MockCall(api, parsed, headers, number)


async def _timed(
    events: list[bytes], timing: Timing, rng: random.Random
) -> AsyncGenerator[bytes, None]:
    for position, event in enumerate(events):
        delay = Timing.draw(timing.first_token if position == 0 else timing.inter_chunk, rng)
        await trio.sleep(delay)
        yield event
    await trio.lowlevel.checkpoint()


async def _faulted(
    events: list[bytes], tail: bytes | None, timing: Timing, rng: random.Random
) -> AsyncGenerator[bytes, None]:
    async for event in _timed(events, timing, rng):
        yield event
    await trio.lowlevel.checkpoint()
    if tail is None:
        raise Truncated
    yield tail
    await trio.lowlevel.checkpoint()


async def _endless(call: MockCall, interval: float) -> AsyncGenerator[bytes, None]:
    for event in endless_prologue(call):
        await trio.lowlevel.checkpoint()
        yield event
    number = 0
    while True:
        await trio.sleep(interval)
        yield endless_event(call, number)
        number += 1


def _sse_parts(body: bytes) -> list[bytes]:
    parts, start = [], 0
    while True:
        end = body.find(b"\n\n", start)
        if end < 0:
            break
        parts.append(body[start : end + 2])
        start = end + 2
    if start < len(body):
        parts.append(body[start:])
    return parts


def _fault(call: MockCall, fault: Fault, timing: Timing, rng: random.Random) -> Outgoing:
    kind = fault.kind
    statuses = {"rate_limit": 429, "server_error": 500, "overloaded": 529}
    if kind in statuses:
        status = statuses[kind]
        headers = list(_JSON)
        if fault.retry_after is not None and status in (429, 529):
            headers += [
                ("retry-after", str(max(0, round(fault.retry_after)))),
                ("retry-after-ms", str(int(fault.retry_after * 1000))),
            ]
        return Outgoing(status, tuple(headers), error_body(call.api, status), kind)
    events = render_stream(call, fault.reply)
    cut = events[: max(1, (len(events) - 1) // 2)]
    tails = {"stream_error": stream_error_event(call.api), "malformed": b"data: {not json\n\n"}
    if kind == "stall":
        tail: bytes | None = STALL
    else:
        tail = tails.get(kind)
    return Outgoing(200, _SSE, _faulted(cut, tail, timing, rng), kind)


def answer(call: MockCall, response: MockResponse, timing: Timing, rng: random.Random) -> Outgoing:
    """Build the outgoing response for *call* from the policy's *response*."""
    if isinstance(response, Fault):
        return _fault(call, response, timing, rng)
    if isinstance(response, Endless):
        return Outgoing(200, _SSE, _endless(call, response.interval))
    if isinstance(response, RawReply):
        content_type = dict(response.headers).get("content-type", "")
        if response.status == 200 and content_type.startswith("text/event-stream"):
            return Outgoing(200, response.headers, _timed(_sse_parts(response.body), timing, rng))
        return Outgoing(response.status, response.headers, response.body)
    assert isinstance(response, MockReply)
    if call.stream:
        return Outgoing(200, _SSE, _timed(render_stream(call, response), timing, rng))
    return Outgoing(200, _JSON, render_json(call, response))


async def respond(policy: Policy, call: MockCall, timing: Timing, rng: random.Random) -> Outgoing:
    """Ask *policy* about *call*, wait the latency, and build the response."""
    response = policy(call)
    latency = Timing.draw(timing.latency, rng)
    if latency:
        await trio.sleep(latency)
    else:
        await trio.lowlevel.checkpoint()
    try:
        return answer(call, response, timing, rng)
    except Exception as exc:  # a bad script fails its own request, not the whole server
        message = f"the mock server could not render the reply: {exc!r}"
        return Outgoing(500, _JSON, error_body(call.api, 500, message))
