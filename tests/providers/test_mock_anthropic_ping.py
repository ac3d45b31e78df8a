"""An Anthropic Messages stream from the mock pings once its first block has started, as the API does.

Every recorded stream holds a ``ping`` after a content block starts and
before the message ends; without one, a client that fails on it would pass
against the mock and break against the API.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import trio

from retinue.providers.mock import Endless, MockReply, MockServer, ScriptedPolicy

VIRTUAL_DEADLINE = 60.0
RECORDED = sorted((Path(__file__).parent / "fixtures" / "anthropic").glob("messages_stream_*.json"))
REQUEST = {
    "model": "claude-sonnet-4-0",
    "max_tokens": 100,
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
}


def _event_names(body: str) -> list[str]:
    return [line[len("event: ") :] for line in body.splitlines() if line.startswith("event: ")]


def _pings_inside_the_message(names: list[str]) -> bool:
    """Whether the stream pings, after its first block starts and before the message ends."""
    return "ping" in names[names.index("content_block_start") : names.index("message_delta")]


async def _stream_event_names(server: MockServer, *, for_seconds: float) -> list[str]:
    """The names of the events the stream sends in *for_seconds* (virtual)."""
    body = ""
    async with httpx2.AsyncClient(transport=server.transport()) as client:
        with trio.move_on_after(for_seconds):
            async with client.stream("POST", "http://mock/v1/messages", json=REQUEST) as response:
                async for line in response.aiter_lines():
                    body += line + "\n"
    return _event_names(body)


async def test_mock_messages_stream_pings_as_recorded_streams_do(
    autojump_clock: trio.abc.Clock,
) -> None:
    """One ping follows the first content_block_start, inside the message, as recorded."""
    recorded = [json.loads(path.read_text(encoding="utf-8")) for path in RECORDED]
    streams = [r["response"]["body"] for r in recorded if r["response"]["status"] == 200]
    assert streams
    assert all(_pings_inside_the_message(_event_names(body)) for body in streams)
    server = MockServer(ScriptedPolicy([MockReply("hello there", chunks=3)]))
    with trio.fail_after(VIRTUAL_DEADLINE):
        names = await _stream_event_names(server, for_seconds=VIRTUAL_DEADLINE / 2)
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names.count("ping") == 1
    assert _pings_inside_the_message(names)


async def test_mock_messages_endless_stream_pings_before_its_ticks(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A stream that never ends pings after its block starts, then ticks."""
    server = MockServer(ScriptedPolicy([Endless(interval=1.0)]))
    with trio.fail_after(VIRTUAL_DEADLINE):
        names = await _stream_event_names(server, for_seconds=2.5)
    assert names == ["message_start", "content_block_start", "ping", *["content_block_delta"] * 2]
