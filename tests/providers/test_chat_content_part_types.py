"""Chat Completions content sent as a list of parts (Mistral's form) whose parts are
of the wrong JSON type: a part that is no object, a text part's ``text`` or a thinking
part's ``thinking`` (or a piece of it) of another type. Read as absent, the text they
carry would be lost with the answer ending as if whole: each fails the stream as
malformed, naming the part and the type, streamed or sent as a whole body.

Each body is served verbatim by the in-process mock server (a ``RawReply``),
so the adapter reads it through its real HTTP path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from retinue._content import Reasoning, Text
from retinue.providers import ProviderStreamError

from .support import JSON, SSE, serve_once, sse_body


def _streamed(parts: list[Any]) -> bytes:
    first = {"choices": [{"index": 0, "delta": {"content": "4200 + 42 ="}}]}
    listed = {"choices": [{"index": 0, "delta": {"content": parts}}]}
    last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return sse_body(*(json.dumps(chunk).encode() for chunk in (first, listed, last)), b"[DONE]")


def _whole(parts: list[Any]) -> bytes:
    message = {"role": "assistant", "content": parts}
    return json.dumps(
        {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    ).encode()


_CASES: dict[str, tuple[list[Any], str]] = {
    "part-a-number": ([1, {"type": "text", "text": "a"}], "content part 0 is of type int"),
    "part-a-string": ([{"type": "text", "text": "a"}, " 4242"], "content part 1 is of type str"),
    "text-a-number": ([{"type": "text", "text": 5}], "content part 0's text is of type int"),
    "text-a-list": ([{"type": "text", "text": [" 4242"]}], "content part 0's text is of type list"),
    "thinking-a-number": (
        [{"type": "thinking", "thinking": 7}],
        "content part 0's thinking is of type int",
    ),
    "thinking-piece-text-a-number": (
        [{"type": "thinking", "thinking": [{"type": "text", "text": 7}]}],
        "content part 0's thinking's piece is of type int",
    ),
    "thinking-piece-a-list": (
        [{"type": "thinking", "thinking": [["so"]]}],
        "content part 0's thinking's piece is of type list",
    ),
}


@pytest.mark.parametrize("shape", ["stream", "body"])
@pytest.mark.parametrize(("parts", "field"), list(_CASES.values()), ids=list(_CASES))
async def test_a_content_part_of_the_wrong_type_fails_the_stream(
    parts: list[Any], field: str, shape: str
) -> None:
    """R10.3: the stream fails as MALFORMED_RESPONSE naming the part and its type,
    where the part's text was dropped and the answer ended ``stop``."""
    body, headers = (_streamed(parts), SSE) if shape == "stream" else (_whole(parts), JSON)
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("chat", body, headers)
    assert caught.value.code == "MALFORMED_RESPONSE"
    assert field in str(caught.value)


async def test_null_texts_and_unknown_parts_carry_nothing() -> None:
    """R10.6: a ``null`` text or thinking is empty, and a part of a kind retinue does not
    model (a reference) or a piece without text carries nothing: none fails the stream."""
    parts = [
        {"type": "text", "text": None},
        {"type": "reference", "reference_ids": [1]},
        {"type": "thinking", "thinking": None},
        {"type": "thinking", "thinking": [{"type": "reference"}, "so", {"type": "text"}]},
        {"type": "text", "text": " 4242"},
    ]
    collected = await serve_once("chat", _streamed(parts))
    assert collected.message.content == (Text("4200 + 42 = 4242"), Reasoning("so"))
