"""Finish reasons: a provider's finish name maps to the reason it means, and every reason reloads."""

from __future__ import annotations

import pytest

from retinue._stream import (
    ABORTED,
    MAX_TOKENS,
    STOP,
    TOOL_CALLS,
    Errored,
    Finish,
    FinishReason,
    OtherFinish,
    finish_named,
)
from retinue.providers._anthropic_wire import anthropic_finish
from retinue.providers._openai_chat_stream import chat_finish
from retinue.session import AssistantChunk, Event
from retinue.session._codec import decode_event, encode_event


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("stop", STOP),
        ("tool-calls", TOOL_CALLS),
        ("max-tokens", MAX_TOKENS),
        ("aborted", ABORTED),
        ("paused", OtherFinish("paused")),
    ],
)
def test_finish_named_maps_retinue_kinds_to_their_reason(name: str, expected: FinishReason) -> None:
    """R10.4: a name that is one of retinue's kinds means that kind; any other stays open."""
    assert finish_named(name) == expected


def test_finish_named_error_is_an_errored_reason_saying_so() -> None:
    """R10.3, R10.4: a bare ``error`` finish is a failed stream, with a message naming it."""
    reason = finish_named("error")
    assert isinstance(reason, Errored)
    assert "'error'" in reason.message


@pytest.mark.parametrize("name", ["stop", "tool-calls", "max-tokens", "aborted", "error"])
def test_other_finish_refuses_a_name_of_retinue_kinds(name: str) -> None:
    """R10.4: an unknown finish never carries a known kind's name: it would reload as that kind."""
    with pytest.raises(ValueError, match="cannot name an unknown finish"):
        OtherFinish(name)


@pytest.mark.parametrize("adapter", [chat_finish, anthropic_finish])
@pytest.mark.parametrize("name", ["error", "stop", "tool-calls", "aborted", "something_new"])
def test_every_adapter_finish_reloads_as_logged(adapter: object, name: str) -> None:
    """R4.5, R10.4: whatever finish name a provider sends, the logged chunk reloads equal."""
    assert callable(adapter)
    reason = adapter(name)
    event = Event(7, 1_700_000_000_000, AssistantChunk(1, 1, Finish(reason)))
    assert decode_event(encode_event(event)) == event
