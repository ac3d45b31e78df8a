"""The up-front token estimate of a session's request counts only what is new: its
history's earlier messages were counted for an earlier request, so admission's work
per request does not grow with the session (it walked the whole history on every
attempt, making a long session's requests cost quadratically in all)."""

from __future__ import annotations

import pytest

from retinue._content import Message, OpaqueBlock, Text, ToolCall, ToolResultBlock
from retinue._request import LlmCallConfig, MessageHistory, ModelRequest
from retinue.providers import _estimate, estimate_tokens

_CONFIG = LlmCallConfig("test-model", None, None, None, None)


def _message(number: int) -> Message:
    kind = number % 4
    if kind == 0:
        return Message("user", (Text(f"question {number} " * (number % 7 + 1)),))
    if kind == 1:
        return Message("assistant", (Text("calling"), ToolCall(f"c{number}", "look", '{"q": 1}')))
    if kind == 2:
        image = OpaqueBlock("image", {"data": "x" * 50})
        return Message("user", (ToolResultBlock(f"c{number - 1}", (Text("found"), image)),))
    return Message("assistant", (Text(f"answer {number}"),))


def _request(
    items: list[Message], length: int, derived: dict[object, object] | None
) -> ModelRequest:
    history = MessageHistory(items, length, derived=derived)
    return ModelRequest(_CONFIG, history, "be brief", (), "s")


def _whole(items: list[Message], length: int, prefix: tuple[Message, ...] = ()) -> int:
    """The estimate of a plain copy of the history: no store to build on."""
    history = MessageHistory(list(items[:length]), length).with_prefix(prefix)
    return estimate_tokens(ModelRequest(_CONFIG, history, "be brief", (), "s"))


def test_each_snapshot_of_a_session_is_estimated_as_its_whole_history() -> None:
    """R10.6: counted a request at a time, with a session prefix or without, and an older
    snapshot estimated after a newer one, every estimate equals that of the whole history."""
    items: list[Message] = []
    derived: dict[object, object] = {}
    prefix = (Message("user", (Text("imported " * 30),)),)
    for number in range(60):
        items.append(_message(number))
        request = _request(items, len(items), derived)
        if number % 3 == 0:
            with_prefix = MessageHistory(items, len(items), derived=derived).with_prefix(prefix)
            request = ModelRequest(_CONFIG, with_prefix, "be brief", (), "s")
            assert estimate_tokens(request) == _whole(items, len(items), prefix)
        else:
            assert estimate_tokens(request) == _whole(items, len(items))
        older = max(0, len(items) - 5)
        assert estimate_tokens(_request(items, older, derived)) == _whole(items, older)


def test_the_next_request_of_a_long_session_counts_only_its_new_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R10.6: after a 2,000-message history was estimated, the next snapshot's estimate
    reads the blocks of its one new message, not the 2,001 messages again."""
    items = [_message(number) for number in range(2_000)]
    derived: dict[object, object] = {}
    estimate_tokens(_request(items, len(items), derived))
    read: list[object] = []
    count = _estimate._block_chars

    def counting(block: object) -> int:
        read.append(block)
        return count(block)

    monkeypatch.setattr(_estimate, "_block_chars", counting)
    items.append(Message("user", (Text("one more"),)))
    estimate = estimate_tokens(_request(items, len(items), derived))
    assert read == [Text("one more")]
    monkeypatch.undo()
    assert estimate == _whole(items, len(items))
