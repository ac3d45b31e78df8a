"""The mock's replies and policies refuse a bad value when built, naming the field.

Served, such a value would fail only its request, with a 500 a test takes for the
server's own, or go out as something else (a call named ``5`` as unnamed).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from retinue.providers.mock import (
    EchoPolicy,
    Fault,
    FaultPolicy,
    MockReply,
    MockServer,
    MockToolCall,
    RawReply,
    ScriptedPolicy,
    open_mock_server,
)

JSON = (("content-type", "application/json"),)

BAD: dict[str, tuple[Callable[[], object], type[Exception], str]] = {
    "reply-text": (lambda: MockReply(5), TypeError, "MockReply.text"),  # type: ignore[arg-type]
    "reply-reasoning": (
        lambda: MockReply(reasoning=None),  # type: ignore[arg-type]
        TypeError,
        "MockReply.reasoning",
    ),
    "reply-finish": (lambda: MockReply(finish=5), TypeError, "MockReply.finish"),  # type: ignore[arg-type]
    "reply-chunks-zero": (lambda: MockReply("hi", chunks=0), ValueError, "MockReply.chunks"),
    "reply-chunks-text": (lambda: MockReply("hi", chunks="3"), TypeError, "MockReply.chunks"),  # type: ignore[arg-type]
    "reply-tokens": (
        lambda: MockReply("hi", input_tokens=-5),
        ValueError,
        "MockReply.input_tokens",
    ),
    "reply-calls": (
        lambda: MockReply(tool_calls=[("lookup", "{}")]),  # type: ignore[list-item]
        TypeError,
        "MockReply.tool_calls",
    ),
    "call-name": (lambda: MockToolCall(5, "{}"), TypeError, "MockToolCall.name"),  # type: ignore[arg-type]
    "call-arguments": (
        lambda: MockToolCall("lookup", {"city": "Oslo"}),  # type: ignore[arg-type]
        TypeError,
        "MockToolCall.arguments",
    ),
    "fault-nan": (lambda: Fault("rate_limit", math.nan), ValueError, "Fault.retry_after"),
    "fault-negative": (lambda: Fault("rate_limit", -1), ValueError, "Fault.retry_after"),
    "raw-status": (lambda: RawReply(99, JSON, b"{}"), ValueError, "RawReply.status"),
    "raw-body-text": (lambda: RawReply(200, JSON, "{}"), TypeError, "RawReply.body"),  # type: ignore[arg-type]
    "raw-headers-mapping": (
        lambda: RawReply(200, {"content-type": "text/plain"}, b""),  # type: ignore[dict-item]
        TypeError,
        "RawReply.headers",
    ),
    "fault-policy-nan": (
        lambda: FaultPolicy(retry_after=math.nan),
        ValueError,
        "FaultPolicy.retry_after",
    ),
    "fault-policy-inner": (lambda: FaultPolicy(EchoPolicy), TypeError, "FaultPolicy.inner"),  # type: ignore[arg-type]
    "echo-chunks": (lambda: EchoPolicy(chunks=0), ValueError, "EchoPolicy.chunks"),
    "echo-calls": (lambda: EchoPolicy(max_tool_calls=-1), ValueError, "EchoPolicy.max_tool_calls"),
    "scripted-item": (
        lambda: ScriptedPolicy(["hello"]),  # type: ignore[list-item]
        TypeError,
        "ScriptedPolicy.responses",
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_mock_values_refuse_a_bad_field_when_built(case: str) -> None:
    """Each bad field is a ``TypeError`` or ``ValueError`` that names its class and field."""
    build, error, named = BAD[case]
    with pytest.raises(error, match=named.replace(".", r"\.")):
        build()


def test_mock_values_take_what_they_took_before() -> None:
    """Good values are kept as given: lists become tuples, framing headers are dropped."""
    reply = MockReply("hi", [MockToolCall("lookup", "{}", id="c1")], "why", "stop", 3, 4, 1)
    assert reply.tool_calls == (MockToolCall("lookup", "{}", id="c1"),)
    raw = RawReply(429, [["retry-after", "2"], ("content-length", "2")], b"{}")  # type: ignore[list-item]
    assert raw.headers == (("retry-after", "2"),)
    assert Fault("overloaded", None).retry_after is None
    assert ScriptedPolicy([reply, raw, Fault("stall")]).responses[1] is raw
    assert EchoPolicy(chunks=1, max_tool_calls=0).max_tool_calls == 0


SERVER_OPTIONS = pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"policy": "echo"}, TypeError, "policy"),
        ({"policy": EchoPolicy}, TypeError, "policy"),
        ({"timing": 0.5}, TypeError, "timing"),
        ({"max_calls": -1}, ValueError, "max_calls"),
        ({"max_calls": 10.0}, TypeError, "max_calls"),
    ],
    ids=["policy-text", "policy-class", "timing-number", "max-calls-negative", "max-calls-float"],
)


@SERVER_OPTIONS
def test_mock_server_refuses_bad_options_when_built(
    options: dict[str, Any], error: type[Exception], named: str
) -> None:
    """A policy that cannot answer a call (a policy class itself), a timing that is no
    ``Timing`` or a negative ``max_calls`` is refused naming the option, not a policy
    failing every request with a 500, nor ``max_calls`` refused in deque's own words."""
    with pytest.raises(error, match=f"MockServer {named}"):
        MockServer(**options)


@SERVER_OPTIONS
async def test_open_mock_server_refuses_bad_options_before_it_listens(
    options: dict[str, Any], error: type[Exception], named: str
) -> None:
    """``open_mock_server`` refuses the same options, as itself, not in an exception group."""
    with pytest.raises(error, match=f"MockServer {named}"):
        async with open_mock_server(**options):
            pass
