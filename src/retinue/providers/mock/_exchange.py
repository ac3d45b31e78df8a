"""Turn a policy's answer into an outgoing HTTP response: status, headers, timed body parts."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
from collections.abc import AsyncGenerator, Mapping
from http import HTTPStatus
from typing import Final, final

import attrs
import trio

from retinue._jsonschema import decimal

from ._policy import Policy
from ._render import (
    JSON_HEADERS,
    endless_event,
    endless_prologue,
    error_body,
    render_json,
    render_stream,
    stream_error_event,
)
from ._request_pairing import pairing_refusal
from ._request_thinking import thinking_refusal
from ._request_types import type_refusal
from ._timing import Endless, Timing
from ._values import Api, Fault, MockCall, MockReply, MockResponse, RawReply

__all__ = [
    "MAX_NESTING",
    "STALL",
    "Outgoing",
    "Truncated",
    "answer",
    "api_for",
    "bare_error",
    "failure",
    "not_allowed",
    "parse_call",
    "respond",
]

logger = logging.getLogger("retinue.providers.mock")

STALL: Final = b""
"""A body part meaning: stop sending and hold the connection open."""

_SSE = (("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache"))
MAX_NESTING: Final = 128
"""The deepest a request body may nest arrays and objects.

Policies and renderers walk a body recursively (a message's text, a tool's
schema), a few frames per level; with bodies this far below the interpreter's
recursion limit, no walk of an accepted one runs out of stack.
"""
_TOO_DEEP = "The request body is nested too deeply."

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


def api_for(path: str) -> Api | None:
    """The wire format served at *path* (query ignored), or ``None`` if none is."""
    return _PATHS.get(path.split("?", 1)[0])


def parse_call(
    path: str, headers: Mapping[str, str], body: bytes, number: int
) -> MockCall | Outgoing:
    """Parse a request into a call, or the error response it deserves."""
    api = api_for(path)
    if api is None:
        return Outgoing(404, JSON_HEADERS, error_body("chat", 404))
    try:
        parsed = json.loads(body)  # an empty body is no JSON either
    except ValueError:
        parsed = None
    except RecursionError:
        return Outgoing(400, JSON_HEADERS, error_body(api, 400, _TOO_DEEP))
    if not isinstance(parsed, dict):
        return Outgoing(400, JSON_HEADERS, error_body(api, 400))
    if not _nests_within(parsed, MAX_NESTING):
        return Outgoing(400, JSON_HEADERS, error_body(api, 400, _TOO_DEEP))
    missing = next((name for name in _REQUIRED[api] if parsed.get(name) is None), None)
    if missing is not None:
        return Outgoing(400, JSON_HEADERS, error_body(api, 400, _missing(api, missing)))
    refused = (
        type_refusal(api, parsed) or pairing_refusal(api, parsed) or thinking_refusal(api, parsed)
    )
    if refused is not None:
        return Outgoing(400, JSON_HEADERS, refused)
    # The bytes as sent key the call: a client sends equal requests as equal bytes,
    # and hashing them costs less than re-encoding a long history canonically.
    key = hashlib.sha256(api.encode() + b"\n" + body).hexdigest()
    return MockCall(api, parsed, headers, number, key=key)


# The fields each API answers 400 without, as the real ones do.
_REQUIRED: dict[Api, tuple[str, ...]] = {
    "chat": ("model", "messages"),
    "responses": ("model",),
    "messages": ("model", "messages", "max_tokens"),
}


def _missing(api: Api, name: str) -> str:
    """The message a provider's 400 gives for a request without the field *name*."""
    if api == "messages":
        return f"{name}: Field required"
    return f"Missing required parameter: '{name}'."


_CONTAINERS = (dict, list)


def _nests_within(value: object, depth: int) -> bool:
    """Whether *value* holds no more than *depth* levels of arrays and objects.

    Level by level, not recursively: the point is to measure a body too deep to recurse into.
    """
    # A tuple and an exact type test: a union in isinstance costs twice as much per node,
    # and every node of a parsed body is exactly a dict or a list.
    level = [value] if isinstance(value, _CONTAINERS) else []
    for _ in range(depth):
        if not level:
            break
        level = [
            child
            for node in level
            for child in (node.values() if type(node) is dict else node)
            if isinstance(child, _CONTAINERS)
        ]
    return not level


def failure(api: Api, message: str, status: int = 500) -> Outgoing:
    """A provider-shaped JSON error response."""
    return Outgoing(status, JSON_HEADERS, error_body(api, status, message))


def not_allowed(api: Api, method: str) -> Outgoing:
    """The 405 answer to a request by any method but POST."""
    headers = (*JSON_HEADERS, ("allow", "POST"))
    # a HEAD response has no body, though it may say how long the body would be
    return Outgoing(405, headers, b"" if method == "HEAD" else error_body(api, 405))


def bare_error(status: int, api: Api, message: str) -> bytes:
    """A whole error response written without h11, whose state a failure may have broken."""
    body = error_body(api, status, message)
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


async def _timed(
    events: list[bytes], timing: Timing, rng: random.Random, *, lingers: bool = False
) -> AsyncGenerator[bytes, None]:
    """*events* at the timing's delays; with *lingers*, the body then held its ``linger``."""
    for position, event in enumerate(events):
        delay = Timing.draw(timing.first_token if position == 0 else timing.inter_chunk, rng)
        await trio.sleep(delay)
        yield event
    # Drawn after the events' delays: a request's draws of them stay as they were.
    linger = Timing.draw(timing.linger, rng) if lingers else 0.0
    if linger == math.inf:
        await trio.lowlevel.checkpoint()
        yield STALL  # held open until the client closes it
    await trio.sleep(linger)


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


def _status_fault(call: MockCall, fault: Fault, status: int) -> Outgoing:
    headers = list(JSON_HEADERS)
    if fault.retry_after is not None and status in (429, 529):
        # Both round up: rounding down would invite a retry that is too early. The
        # milliseconds are of the number as written: 2.007 * 1000 is 2007.0000000000002.
        headers += [
            ("retry-after", str(max(0, math.ceil(fault.retry_after)))),
            ("retry-after-ms", str(max(0, math.ceil(decimal(fault.retry_after) * 1000)))),
        ]
    return Outgoing(status, tuple(headers), error_body(call.api, status), fault.kind)


def _body_fault(call: MockCall, fault: Fault, timing: Timing, rng: random.Random) -> Outgoing:
    """A stream fault on a call that did not ask for a stream: its JSON-body equivalent."""
    kind = fault.kind
    if kind == "stream_error":
        return Outgoing(500, JSON_HEADERS, error_body(call.api, 500), kind)
    body = render_json(call, fault.reply)
    if kind == "malformed":
        return Outgoing(200, JSON_HEADERS, body[: len(body) // 2], kind)
    tail = STALL if kind == "stall" else None
    return Outgoing(200, JSON_HEADERS, _faulted([body[: len(body) // 2]], tail, timing, rng), kind)


def _fault(call: MockCall, fault: Fault, timing: Timing, rng: random.Random) -> Outgoing:
    kind = fault.kind
    statuses = {"rate_limit": 429, "server_error": 500, "overloaded": 529}
    if kind in statuses:
        return _status_fault(call, fault, statuses[kind])
    if not call.stream:
        return _body_fault(call, fault, timing, rng)
    events = render_stream(call, fault.reply)
    cut = events[: max(1, (len(events) - 1) // 2)]
    tails = {
        "stream_error": stream_error_event(call.api, len(cut)),
        "malformed": b"data: {not json\n\n",
    }
    if kind == "stall":
        tail: bytes | None = STALL
    else:
        tail = tails.get(kind)
    return Outgoing(200, _SSE, _faulted(cut, tail, timing, rng), kind)


async def _stalled() -> AsyncGenerator[bytes, None]:
    await trio.lowlevel.checkpoint()
    yield STALL
    await trio.lowlevel.checkpoint()


def answer(call: MockCall, response: MockResponse, timing: Timing, rng: random.Random) -> Outgoing:
    """Build the outgoing response for *call* from the policy's *response*."""
    if isinstance(response, Fault):
        return _fault(call, response, timing, rng)
    if isinstance(response, Endless):
        # a JSON body cannot trickle forever; the nearest thing is one that never comes
        if not call.stream:
            return Outgoing(200, JSON_HEADERS, _stalled())
        # Drawn as a Timing's fixed delay is: one past a float's range is never.
        return Outgoing(200, _SSE, _endless(call, Timing.draw(response.interval, rng)))
    if isinstance(response, RawReply):
        # Header names are case-insensitive: ``Content-Type`` is the same header.
        content_type = next(
            (value for name, value in response.headers if name.lower() == "content-type"), ""
        )
        if response.status == 200 and content_type.lower().startswith("text/event-stream"):
            parts = _sse_parts(response.body)
            return Outgoing(200, response.headers, _timed(parts, timing, rng, lingers=True))
        return Outgoing(response.status, response.headers, response.body)
    assert isinstance(response, MockReply)
    if call.stream:
        return Outgoing(200, _SSE, _timed(render_stream(call, response), timing, rng, lingers=True))
    return Outgoing(200, JSON_HEADERS, render_json(call, response))


async def respond(policy: Policy, call: MockCall, timing: Timing, rng: random.Random) -> Outgoing:
    """Ask *policy* about *call*, wait the latency, and build the response.

    A policy, script or timing function that raises fails its own request
    with a 500, logged, and the server serves on.
    """
    try:
        response = policy(call)
        latency = Timing.draw(timing.latency, rng)
    except Exception as exc:
        logger.exception("mock server: the policy failed on call %d", call.number)
        await trio.lowlevel.checkpoint()
        return failure(call.api, f"the mock server's policy failed: {exc!r}")
    if latency:
        await trio.sleep(latency)
    else:
        await trio.lowlevel.checkpoint()
    try:
        return answer(call, response, timing, rng)
    except Exception as exc:
        logger.exception("mock server: could not render the reply to call %d", call.number)
        return failure(call.api, f"the mock server could not render the reply: {exc!r}")
