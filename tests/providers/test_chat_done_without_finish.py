"""A Chat Completions stream that reaches ``data: [DONE]`` without a finish reason is
malformed: read as a stop, an answer the token limit cut short, or a stream of
nothing at all, would pass for a whole answer."""

from __future__ import annotations

import pytest

from retinue.providers import ProviderStreamError

from .support import serve_once, sse_body

TEXT = b'{"choices":[{"index":0,"delta":{"role":"assistant","content":"partial"},"finish_reason":null}]}'
STOP = b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'


@pytest.mark.parametrize(
    "payloads",
    [(TEXT, b"[DONE]"), (b"[DONE]",)],
    ids=["text-then-done", "done-alone"],
)
async def test_a_stream_ended_at_done_without_a_finish_reason_fails_malformed(
    payloads: tuple[bytes, ...],
) -> None:
    """R10.2: the stream fails ``MALFORMED_RESPONSE`` naming the missing finish reason,
    where it was taken as a stop (a turn ``completed``, with no message for ``[DONE]``
    alone)."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("chat", sse_body(*payloads))
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert "[DONE] without a finish reason" in str(caught.value)


async def test_a_stream_with_its_finish_reason_then_done_is_whole() -> None:
    """R10.2: the usual ending still completes the answer."""
    collected = await serve_once("chat", sse_body(TEXT, STOP, b"[DONE]"))
    assert [getattr(block, "text", None) for block in collected.message.content] == ["partial"]
