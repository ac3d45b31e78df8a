"""RawReply headers no HTTP response can carry: refused when built, as the other fields are."""

from __future__ import annotations

import httpx2
import pytest
import trio

from retinue.providers.mock import MockServer, RawReply, ReplayPolicy, ScriptedPolicy

_BODY = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("x-split", "a\r\nx-injected: b"),
        ("x-nul", "a\x00b"),
        ("x-padded", " a"),
        ("x-trailing", "a\t"),
        ("x-accent", "caf\u00e9"),
        ("bad name", "v"),
        ("x-colon:", "v"),
        ("", "v"),
    ],
)
def test_a_header_no_response_can_carry_is_refused_when_built(name: str, value: str) -> None:
    """Refused when built: served, it would be a 500 over TCP, passed on (or a bare
    UnicodeEncodeError) in-process."""
    with pytest.raises(ValueError, match=r"RawReply\.headers holds a header no HTTP response"):
        RawReply(200, [(name, value)], b"{}")


def test_a_recorded_exchange_with_such_a_header_is_refused_when_loaded() -> None:
    """A fixture edited by hand is refused by ReplayPolicy.of, as RawReply refuses it."""
    exchange = {"response": {"status": 200, "headers": {"x-note": "two\nlines"}, "body": "{}"}}
    with pytest.raises(ValueError, match="no HTTP response can carry"):
        ReplayPolicy.of(exchange)


async def test_a_header_with_inner_spaces_is_served_as_given() -> None:
    """Spaces and tabs between a value's characters are HTTP's own, and are sent."""
    reply = RawReply(200, [("content-type", "application/json"), ("x-note", "a \tb")], b"{}")
    server = MockServer(ScriptedPolicy([reply]))
    with trio.fail_after(10):
        async with httpx2.AsyncClient(transport=server.transport()) as client:
            response = await client.post("http://mock/v1/chat/completions", content=_BODY)
    assert response.headers["x-note"] == "a \tb"
