"""Error events inside a 200 stream, before any content, are retried as their status is."""

from __future__ import annotations

import json

import pytest
import trio

from retinue.providers import ProviderStreamError, RetryNotice, RetryPolicy, manage
from retinue.providers.mock import MockReply, MockServer, RawReply, ScriptedPolicy

from .support import SSE, collect, make_request, mock_adapter

VIRTUAL_DEADLINE = 600.0


def _anthropic_error(kind: str, message: str) -> RawReply:
    """A 200 stream whose first event is Anthropic's ``error`` event, as its SDK types it."""
    error = {"type": "error", "error": {"details": None, "type": kind, "message": message}}
    return RawReply(200, SSE, b"event: error\ndata: %s\n\n" % json.dumps(error).encode())


async def test_an_anthropic_timeout_error_event_is_retried(autojump_clock: trio.abc.Clock) -> None:
    """R10.3: Anthropic's ``timeout_error`` (its 504), sent with no status as the stream's
    first event, is retried as a stream error code, and the retry's answer is the stream's."""
    server = MockServer(
        ScriptedPolicy([_anthropic_error("timeout_error", "Request timed out"), MockReply("ok")])
    )
    notices: list[RetryNotice] = []
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with mock_adapter("messages", server) as raw:
            model = manage(raw, retry=RetryPolicy(), on_retry=notices.append)
            collected = await collect(model, make_request("hi"))
    assert [notice.code for notice in notices] == ["timeout_error"]
    assert len(server.calls) == 2
    assert "".join(getattr(b, "text", "") for b in collected.message.content) == "ok"


@pytest.mark.parametrize("kind", ["invalid_request_error", "billing_error", "permission_error"])
async def test_an_anthropic_error_event_no_retry_mends_is_final(
    kind: str, autojump_clock: trio.abc.Clock
) -> None:
    """R10.3: an error event naming the request or the account at fault is not retried."""
    server = MockServer(ScriptedPolicy([_anthropic_error(kind, "no"), MockReply("never")]))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with mock_adapter("messages", server) as raw:
            model = manage(raw, retry=RetryPolicy())
            with pytest.raises(ProviderStreamError) as caught:
                await collect(model, make_request("hi"))
    assert (caught.value.code, caught.value.retryable) == (kind, False)
    assert len(server.calls) == 1
