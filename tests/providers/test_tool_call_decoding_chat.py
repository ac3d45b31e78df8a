"""What the Chat Completions decoder takes for the client's tool calls, streamed and not.

A call of a kind retinue does not declare (a ``custom`` call) is left out: the
agent must not run it, and a later fragment's type does not leave a function
call out. A call in the deprecated ``function_call`` form is a tool call.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from retinue._content import ToolCall
from retinue._stream import TOOL_CALLS, Finish, ToolCallDelta
from retinue.providers import ProviderStreamError

from .support import JSON, SSE, serve_once, sse_body

# --- Chat Completions: calls of another type than function -------------------------------

_CUSTOM_OPEN = {
    "index": 0,
    "id": "call_custom",
    "type": "custom",
    "custom": {"name": "apply_patch", "input": "*** Begin"},
}
_FUNCTION_CALL = {
    "index": 1,
    "id": "call_f",
    "type": "function",
    "function": {"name": "lookup", "arguments": '{"city":"Paris"}'},
}


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).encode()


def _chat_stream() -> bytes:
    """A custom call, its later fragment without ``type`` (as every later fragment of a
    call comes), then a function call."""
    return sse_body(
        _chat_chunk({"role": "assistant", "content": None, "tool_calls": [_CUSTOM_OPEN]}),
        _chat_chunk({"tool_calls": [{"index": 0, "custom": {"input": " Patch"}}]}),
        _chat_chunk({"tool_calls": [_FUNCTION_CALL]}),
        _chat_chunk({}, "tool_calls"),
        b"[DONE]",
    )


def _chat_whole() -> bytes:
    calls = [
        {k: v for k, v in call.items() if k != "index"} for call in (_CUSTOM_OPEN, _FUNCTION_CALL)
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    return json.dumps(
        {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    ).encode()


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
async def test_chat_call_of_a_type_other_than_function_is_not_run(*, streamed: bool) -> None:
    """R10.2: a ``custom`` call (free-form input for a tool retinue never declares) is
    not a function call: it is left out, as the SDK's parser leaves it out, and the
    function call beside it is kept, no call named ``''`` left for the agent to run.
    """
    body, headers = (_chat_stream(), SSE) if streamed else (_chat_whole(), JSON)
    collected = await serve_once("chat", body, headers)
    assert collected.message.content == (ToolCall("call_f", "lookup", '{"city":"Paris"}'),)


@pytest.mark.parametrize("later_type", ["", "custom"], ids=["empty", "custom"])
async def test_chat_a_later_fragment_type_does_not_leave_a_function_call_out(
    later_type: str,
) -> None:
    """R10.2: only the fragment that opens a call tells its type: a later fragment of a
    function call carrying another ``type`` (some servers send ``""``) still brings its
    arguments, the call not run with ``{}``.
    """
    body = sse_body(
        _chat_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "f1",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": ""},
                    }
                ]
            }
        ),
        _chat_chunk(
            {"tool_calls": [{"index": 0, "type": later_type, "function": {"arguments": '{"a":1}'}}]}
        ),
        _chat_chunk({}, "tool_calls"),
        b"[DONE]",
    )
    collected = await serve_once("chat", body)
    assert collected.message.content == (ToolCall("f1", "lookup", '{"a":1}'),)


async def test_chat_function_call_after_a_custom_call_without_an_id_at_one_index_is_kept() -> None:
    """R10.2: a custom call without an id, then a function call with one at the same index
    (servers giving every call index 0): the function call is its own call and is kept.
    It is not taken for the custom call's continuation and left out.
    """
    custom = {k: v for k, v in _CUSTOM_OPEN.items() if k != "id"}
    function = {**_FUNCTION_CALL, "index": 0}
    body = sse_body(
        _chat_chunk({"tool_calls": [custom]}),
        _chat_chunk({"tool_calls": [function]}),
        _chat_chunk({}, "tool_calls"),
        b"[DONE]",
    )
    collected = await serve_once("chat", body)
    assert collected.message.content == (ToolCall("call_f", "lookup", '{"city":"Paris"}'),)


# --- Chat Completions: the deprecated ``function_call`` form ------------------------------

FRESH_ID = re.compile(r"call_[0-9a-f]{24}")


def _legacy_stream() -> bytes:
    """A call in the deprecated form some compatible servers still send: one
    ``function_call`` per message, without an id, its arguments in fragments."""
    opening = {"name": "lookup", "arguments": ""}
    return sse_body(
        _chat_chunk({"role": "assistant", "content": None, "function_call": opening}),
        _chat_chunk({"function_call": {"arguments": '{"ci'}}),
        _chat_chunk({"function_call": {"arguments": 'ty":"Paris"}'}}),
        _chat_chunk({}, "function_call"),
        b"[DONE]",
    )


def _legacy_whole() -> bytes:
    call = {"name": "lookup", "arguments": '{"city":"Paris"}'}
    message = {"role": "assistant", "content": None, "function_call": call}
    return json.dumps(
        {"choices": [{"index": 0, "message": message, "finish_reason": "function_call"}]}
    ).encode()


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
async def test_chat_call_in_the_deprecated_function_call_form_is_a_tool_call(
    *, streamed: bool
) -> None:
    """R10.2: a call sent as ``function_call`` (the deprecated form the SDK still parses)
    is the model's tool call, under a fresh id that the opening chunk and the message
    share, not dropped to end the step on ``tool-calls`` with no call to run.
    """
    body, headers = (_legacy_stream(), SSE) if streamed else (_legacy_whole(), JSON)
    collected = await serve_once("chat", body, headers)
    (call,) = collected.message.content
    assert isinstance(call, ToolCall)
    assert (call.name, call.arguments) == ("lookup", '{"city":"Paris"}')
    assert FRESH_ID.fullmatch(call.id)
    fragments = [c for c in collected.chunks if isinstance(c, ToolCallDelta)]
    assert [fragment.id for fragment in fragments[:1]] == ([call.id] if streamed else [])


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
async def test_chat_call_in_the_deprecated_function_call_form_finishes_on_tool_calls(
    *, streamed: bool
) -> None:
    """R10.4: the ``function_call`` finish of the deprecated form is a ``tool-calls`` finish,
    as ``tool_calls`` is, not an unknown kind named after it."""
    body, headers = (_legacy_stream(), SSE) if streamed else (_legacy_whole(), JSON)
    collected = await serve_once("chat", body, headers)
    assert collected.chunks[-1] == Finish(TOOL_CALLS)


async def test_chat_function_call_that_is_not_an_object_is_malformed() -> None:
    """R10.2: a ``function_call`` of another type than an object (or null) is a malformed
    response naming the field, not a call silently dropped."""
    body = sse_body(_chat_chunk({"function_call": "lookup"}, "function_call"), b"[DONE]")
    with pytest.raises(ProviderStreamError, match="function_call") as caught:
        await serve_once("chat", body)
    assert caught.value.code == "MALFORMED_RESPONSE"
