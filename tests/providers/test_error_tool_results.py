"""Error tool results that hold no text a model can read, as the OpenAI APIs carry them.

Neither API has an error flag for a tool's output: what stands in for a
failure's missing text is all that tells the model the tool failed.
"""

from __future__ import annotations

from typing import Any

import pytest

from retinue._content import ContentBlock, Text, ToolResultBlock

from ._request_validity_kit import sent_body, tool_turn
from .support import CHAT_IMAGE, RESPONSES_IMAGE

FAILED = "(the tool failed without a message)"


async def _shown(api: str, result: ToolResultBlock) -> Any:
    """What the request's last item carries of *result*."""
    body = await sent_body(api, *tool_turn(result))
    return body["messages"][-1]["content"] if api == "chat" else body["input"][-1]["output"]


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    "content",
    [(Text("  \n"),), (Text(" "), Text("\t"))],
    ids=["whitespace", "whitespace-blocks"],
)
async def test_an_error_result_of_blank_text_says_the_tool_failed(
    api: str, content: tuple[ContentBlock, ...]
) -> None:
    """R5.2: an error result whose text is only whitespace goes out saying the tool failed,
    as an empty one does and as Anthropic gets it, not blank, as a tool that worked."""
    assert await _shown(api, ToolResultBlock("c1", content, is_error=True)) == FAILED


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_result_of_blank_text_that_is_no_error_goes_as_it_came(api: str) -> None:
    """A tool that worked and returned only whitespace goes out with it."""
    assert await _shown(api, ToolResultBlock("c1", (Text("  \n"),))) == "  \n"


@pytest.mark.parametrize(
    ("is_error", "expected"),
    [
        (True, "(the tool failed; its result is not text and cannot be shown here)"),
        (False, "(the tool's result is not text and cannot be shown here)"),
    ],
    ids=["error", "no-error"],
)
async def test_a_chat_result_of_an_image_alone_says_it_cannot_be_shown(
    *, is_error: bool, expected: str
) -> None:
    """R5.2: a Chat ``tool`` message carries text only; a result holding only an image says
    so, and a failed one says that it failed too, as the message has no error flag: the
    model would read a failed one as a tool that worked."""
    shown = await _shown("chat", ToolResultBlock("c1", (CHAT_IMAGE,), is_error=is_error))
    assert shown == expected


@pytest.mark.parametrize(
    "content",
    [(RESPONSES_IMAGE,), (Text(" "), RESPONSES_IMAGE)],
    ids=["image", "blank-and-image"],
)
async def test_a_responses_error_result_of_an_image_alone_says_the_tool_failed(
    content: tuple[ContentBlock, ...],
) -> None:
    """R5.2: a Responses error result holding an image and no text goes out in the list
    form with a first part saying the tool failed, not as the image alone, as a tool
    that worked."""
    shown = await _shown("responses", ToolResultBlock("c1", content, is_error=True))
    assert shown[0] == {"type": "input_text", "text": FAILED}
    assert shown[-1]["type"] == "input_image"


async def test_a_responses_result_of_an_image_alone_that_is_no_error_goes_as_it_came() -> None:
    """A tool that worked and returned only an image goes out as that image."""
    shown = await _shown("responses", ToolResultBlock("c1", (RESPONSES_IMAGE,)))
    assert [part["type"] for part in shown] == ["input_image"]
