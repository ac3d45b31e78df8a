"""Render neutral mock replies in the three wire formats (pure; bytes out)."""

from __future__ import annotations

from collections.abc import Callable

from ._render_chat import chat_json, chat_stream, chat_text_delta
from ._render_messages import anthropic_message, anthropic_stream, anthropic_text_delta
from ._render_responses import (
    message_item_id,
    numbered,
    responses_object,
    responses_stream,
    text_delta_payload,
)
from ._render_shared import JsonObject, dumps, sse_event
from ._values import Api, MockCall, MockReply

__all__ = [
    "JSON_HEADERS",
    "endless_event",
    "endless_prologue",
    "error_body",
    "render_json",
    "render_stream",
    "stream_error_event",
]

JSON_HEADERS = (("content-type", "application/json"),)
"""The headers of a JSON body: every reply that is not a stream, errors included."""

# -- dispatch --------------------------------------------------------------------

_STREAMS: dict[Api, Callable[[MockCall, MockReply], list[bytes]]] = {
    "chat": chat_stream,
    "responses": responses_stream,
    "messages": anthropic_stream,
}
_OBJECTS: dict[Api, Callable[[MockCall, MockReply], JsonObject]] = {
    "chat": chat_json,
    "responses": responses_object,
    "messages": anthropic_message,
}


def render_stream(call: MockCall, reply: MockReply) -> list[bytes]:
    """The SSE events (each a complete ``...\\n\\n`` block) of *reply* for *call*'s API."""
    return _STREAMS[call.api](call, reply)


def render_json(call: MockCall, reply: MockReply) -> bytes:
    """The non-streaming JSON body of *reply* for *call*'s API."""
    return dumps(_OBJECTS[call.api](call, reply)).encode()


_ERRORS: dict[int, tuple[str, str, str]] = {
    400: ("invalid_request_error", "invalid_request_error", "The request body is not valid JSON."),
    404: ("not_found_error", "not_found", "Not found."),
    405: ("invalid_request_error", "invalid_request_error", "Method not allowed; use POST."),
    413: ("request_too_large", "invalid_request_error", "The request is too large."),
    429: ("rate_limit_error", "rate_limit_exceeded", "Rate limit reached; try again later."),
    500: ("api_error", "server_error", "The server had an error processing the request."),
    529: ("overloaded_error", "overloaded", "Overloaded"),
}


def error_body(
    api: Api,
    status: int,
    message: str | None = None,
    *,
    param: str | None = None,
    code: str | None = None,
) -> bytes:
    """A provider-shaped JSON error body for *status* (with *message*, if given).

    An OpenAI body names the request field at fault as its *param*, and its *code*
    is *code* if given; Anthropic's has neither.
    """
    anthropic_type, openai_code, default = _ERRORS.get(
        status, ("api_error", "server_error", "error")
    )
    message = message or default
    if api == "messages":
        payload: JsonObject = {
            "type": "error",
            "error": {"type": anthropic_type, "message": message},
            "request_id": "req_mock",
        }
    else:
        payload = {
            "error": {
                "message": message,
                "type": openai_code,
                "param": param,
                "code": code or openai_code,
            }
        }
    return dumps(payload).encode()


def stream_error_event(api: Api, sent: int) -> bytes:
    """An in-stream error event (the provider failed after sending 200).

    *sent* is how many events of the stream went out before it: a Responses
    error event carries the next sequence number, as every event there does.
    """
    if api == "messages":
        error = {"type": "overloaded_error", "message": "Overloaded", "details": None}
        return sse_event({"type": "error", "error": error}, "error")
    if api == "responses":
        payload: JsonObject = {
            "type": "error",
            "code": "server_error",
            "message": "The server had an error",
            "param": None,
        }
        return numbered([payload], sent)[0]
    return sse_event(
        {
            "error": {
                "message": "The server had an error",
                "type": "server_error",
                "code": "server_error",
            }
        }
    )


def _first_text_delta(call: MockCall) -> int:
    """Where the first text delta sits in a one-chunk text stream of *call*'s API."""
    return {"chat": 1, "responses": 4, "messages": 3}[call.api]


def endless_prologue(call: MockCall) -> list[bytes]:
    """The events that open a stream that never ends (message and block starts).

    Rendered once per stream: they carry what depends on the whole request,
    such as its usage estimate.
    """
    events = render_stream(call, MockReply(text="tick", chunks=1))
    return events[: _first_text_delta(call)]


def endless_event(call: MockCall, number: int) -> bytes:
    """One text delta of a stream that never ends, after :func:`endless_prologue`.

    Only the text (and a Responses sequence number) changes from tick to tick,
    so a tick costs the same whatever the size of the request.
    """
    text = f"tick {number} "
    if call.api == "chat":
        return chat_text_delta(call, text)
    if call.api == "messages":
        return anthropic_text_delta(0, text)
    payload = text_delta_payload(message_item_id(call), 0, text)
    return numbered([payload], _first_text_delta(call) + number)[0]
