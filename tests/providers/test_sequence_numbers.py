"""Responses events' ``sequence_number``: a stream numbered 0, 1, 2, ... on every event
that skips, repeats or reorders a number is refused, where the text it assembled
came doubled, short or out of order; streams numbered otherwise, or not at all,
read as before.

Each body is served verbatim by the in-process mock server, so the adapter reads it
through its real HTTP path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import trio

import retinue
from retinue import AgentOptions
from retinue._content import Reasoning, Text
from retinue.providers import ProviderError, ProviderStreamError
from retinue.providers.mock import (
    EchoPolicy,
    FaultKind,
    FaultPolicy,
    MockServer,
    RawReply,
    ScriptedPolicy,
)
from retinue.providers.openai import OpenAIModel

from ._wire_edge_kit import typed_event
from .support import (
    ALL_FIXTURES,
    SSE,
    collect,
    make_request,
    mock_adapter,
    recorded_events,
    serve_once,
)

_TEXT = "responses_stream_text_after_function_outputs.json"
_CALLS = "responses_stream_parallel_function_calls.json"
_TEXT_DELTA = "response.output_text.delta"
_ARGUMENTS_DELTA = "response.function_call_arguments.delta"
_RECORDED = sorted(p.name for p in ALL_FIXTURES if p.name.startswith("responses_stream_"))
_STREAMED = [name for name in _RECORDED if recorded_events(name)]  # not the refused request

_FAULT_CODES = {
    "stream_error": "server_error",
    "malformed": "MALFORMED_RESPONSE",
    "truncated": "STREAM_TRUNCATED",
}
"""What each mock stream fault fails with: the malformed one with JSON that does not parse."""

Events = list[dict[str, Any]]


def _body(events: Events) -> bytes:
    return b"".join(map(typed_event, events))


def _numbered(events: Events) -> Events:
    """*events* numbered 0, 1, 2, ... as the API numbers them."""
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def _unnumbered(events: Events) -> Events:
    return [{k: v for k, v in event.items() if k != "sequence_number"} for event in events]


def _at(events: Events, kind: str, nth: int = 1) -> int:
    """The position of the *nth* event (from 0) of *kind*."""
    return [i for i, event in enumerate(events) if event["type"] == kind][nth]


def _doubled(events: Events, kind: str) -> Events:
    """A delta of *kind* sent twice, as a proxy replaying a chunk would."""
    at = _at(events, kind)
    return [*events[: at + 1], events[at], *events[at + 1 :]]


def _dropped(events: Events, kind: str) -> Events:
    at = _at(events, kind)
    return events[:at] + events[at + 1 :]


def _swapped(events: Events, kind: str) -> Events:
    at = _at(events, kind)
    return [*events[:at], events[at + 1], events[at], *events[at + 2 :]]


def _reasoning_stream() -> Events:
    """A reasoning item streamed in three summary deltas, then a message: numbered."""
    item = {"id": "rs_1", "type": "reasoning", "summary": []}
    deltas = [
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_1",
            "output_index": 0,
            "summary_index": 0,
            "delta": part,
        }
        for part in ("Weigh ", "the ", "options.")
    ]
    summary = [{"type": "summary_text", "text": "Weigh the options."}]
    return _numbered(
        [
            {"type": "response.created", "response": {"status": "in_progress"}},
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            *deltas,
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {**item, "summary": summary},
            },
            {"type": "response.completed", "response": {"status": "completed"}},
        ]
    )


async def _refusal(events: Events) -> str:
    """The message of the ``MALFORMED_RESPONSE`` the stream of *events* fails with."""
    with pytest.raises(ProviderStreamError) as caught:
        await serve_once("responses", _body(events))
    assert caught.value.code == "MALFORMED_RESPONSE"
    return str(caught.value)


_BROKEN = {"doubled": _doubled, "dropped": _dropped, "swapped": _swapped}


@pytest.mark.parametrize("fault", sorted(_BROKEN))
@pytest.mark.parametrize(
    ("name", "kind"), [(_TEXT, _TEXT_DELTA), (_CALLS, _ARGUMENTS_DELTA)], ids=["text", "arguments"]
)
async def test_a_recorded_stream_with_a_delta_doubled_dropped_or_swapped_is_refused(
    autojump_clock: trio.abc.Clock, name: str, kind: str, fault: str
) -> None:
    """R10.3: a delta the stream sent twice, lost, or sent after the next fails
    ``MALFORMED_RESPONSE`` naming ``sequence_number``, the number expected and the one
    got, where the text or arguments came doubled, short or reordered."""
    events = recorded_events(name)
    broken = _BROKEN[fault](events, kind)
    at = _at(events, kind)
    # A doubled delta repeats its own number; after a dropped or swapped one comes the next's.
    expected, got = (at + 1, at) if fault == "doubled" else (at, at + 1)
    with trio.fail_after(60):
        message = await _refusal(broken)
    assert "sequence_number" in message
    assert f"is {got}, not {expected}" in message


@pytest.mark.parametrize("fault", sorted(_BROKEN))
async def test_a_reasoning_delta_doubled_dropped_or_swapped_is_refused(
    autojump_clock: trio.abc.Clock, fault: str
) -> None:
    """R10.3: reasoning deltas are counted as text is: one sent twice, lost or reordered
    fails ``MALFORMED_RESPONSE`` naming ``sequence_number``, not reasoning that reads
    otherwise than the model's."""
    broken = _BROKEN[fault](_reasoning_stream(), "response.reasoning_summary_text.delta")
    with trio.fail_after(60):
        assert "sequence_number" in await _refusal(broken)


@pytest.mark.parametrize("step", [0, -1, -3], ids=["repeated", "back-by-one", "back-by-three"])
async def test_a_number_repeated_or_gone_back_is_refused(
    autojump_clock: trio.abc.Clock, step: int
) -> None:
    """R10.3: after events numbered one by one, an event numbered as one already read (or
    lower) fails ``MALFORMED_RESPONSE`` naming the number expected and the one got."""
    events = recorded_events(_TEXT)
    at = _at(events, _TEXT_DELTA, 3)
    events[at] = {**events[at], "sequence_number": at - 1 + step}
    with trio.fail_after(60):
        message = await _refusal(events)
    assert f"sequence_number is {at - 1 + step}, not {at}" in message


@pytest.mark.parametrize("name", _STREAMED)
async def test_every_recorded_stream_reads_as_its_completed_response(
    autojump_clock: trio.abc.Clock, name: str
) -> None:
    """R10.2: the real API's streams, numbered 0, 1, 2, ... on every event, pass the count
    and give their text and calls as they were recorded, each once."""
    events = recorded_events(name)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    with trio.fail_after(60):
        numbered = await serve_once("responses", _body(events))
        plain = await serve_once("responses", _body(_unnumbered(events)))
    assert numbered.message.content == plain.message.content
    assert numbered.message.content


async def test_a_stream_without_numbers_is_read_as_sent(autojump_clock: trio.abc.Clock) -> None:
    """R10.2: a compatible server that numbers no event gets no count: its deltas, a
    repeated one too, are read as they come, as before numbers were counted."""
    events = _unnumbered(_doubled(recorded_events(_TEXT), _TEXT_DELTA))
    with trio.fail_after(60):
        collected = await serve_once("responses", _body(events))
    texts = [e["delta"] for e in events if e["type"] == _TEXT_DELTA]
    assert collected.message.content == (Text("".join(texts)),)


def _partly_numbered(events: Events) -> Events:
    """Numbers on some events only, from 1, the message's end numbered 1 again: as a
    gateway translating Chat Completions streams numbers them."""
    out = _unnumbered(events)
    for n, at in enumerate(i for i, e in enumerate(out) if e["type"] == _TEXT_DELTA):
        out[at]["sequence_number"] = n + 1
    out[_at(out, "response.output_item.done", 0)]["sequence_number"] = 1
    return out


def _from_one(events: Events) -> Events:
    """Every event numbered, from 1, with a delta lost: a count the API never starts."""
    return [{**e, "sequence_number": n + 1} for n, e in enumerate(_dropped(events, _TEXT_DELTA))]


def _ends_from_zero(events: Events) -> Events:
    """The events after the last delta numbered from 0 again: as a server numbering the
    events that end the response apart from those it streamed."""
    last = max(i for i, e in enumerate(events) if e["type"] == _TEXT_DELTA)
    return events[: last + 1] + [
        {**e, "sequence_number": n} for n, e in enumerate(events[last + 1 :])
    ]


def _as_strings(events: Events) -> Events:
    return [{**e, "sequence_number": str(e["sequence_number"])} for e in events]


def _as_bools(events: Events) -> Events:
    """``false`` then ``true`` on every later event: equal to 0 and 1, then out of step."""
    return [{**e, "sequence_number": e["sequence_number"] > 0} for e in events]


@pytest.mark.parametrize(
    "renumber",
    [_partly_numbered, _from_one, _ends_from_zero, _as_strings, _as_bools],
    ids=[
        "some-events-numbered",
        "counted-from-one",
        "ends-counted-from-zero",
        "numbers-as-strings",
        "numbers-as-bools",
    ],
)
async def test_a_stream_numbered_otherwise_than_the_api_is_not_counted(
    autojump_clock: trio.abc.Clock, renumber: Callable[[Events], Events]
) -> None:
    """R10.2: numbers on only some events, a first number other than 0, a count started
    again from 0, or numbers that are no integers are no count the stream keeps: it is
    read as sent, not refused, as a compatible server's stream so numbered is whole."""
    events = renumber(recorded_events(_TEXT))
    with trio.fail_after(60):
        collected = await serve_once("responses", _body(events))
    texts = [e["delta"] for e in events if e["type"] == _TEXT_DELTA]
    assert collected.message.content == (Text("".join(texts)),)


async def test_an_error_event_out_of_step_fails_with_the_servers_error(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.3: an ``error`` event whose number is out of step still fails with the error
    the server names, not as a broken count: its code says what went wrong."""
    events = recorded_events(_TEXT)[:6]
    events.append(
        {"type": "error", "code": "server_error", "message": "boom", "sequence_number": 0}
    )
    with pytest.raises(ProviderStreamError) as caught, trio.fail_after(60):
        await serve_once("responses", _body(events))
    assert caught.value.code == "server_error"


async def test_a_typeless_failed_event_out_of_step_fails_with_the_servers_error(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.3: a ``response.failed`` event whose data leaves its type out (a proxy's), named
    only by its SSE event, fails with the error it names when its number is out of step,
    as a typed one does, not as a broken count."""
    failed = {
        "sequence_number": 9,
        "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}},
    }
    body = _body(recorded_events(_TEXT)[:6])
    body += b"event: response.failed\ndata: " + json.dumps(failed).encode() + b"\n\n"
    with pytest.raises(ProviderStreamError) as caught, trio.fail_after(60):
        await serve_once("responses", body)
    assert caught.value.code == "server_error"


async def test_a_stream_sent_again_from_its_start_is_refused(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.3: events numbered from 0 again from a second ``response.created`` on (a proxy
    relaying a reconnected stream after the first) fail ``MALFORMED_RESPONSE``, where
    its text came twice."""
    events = recorded_events(_TEXT)
    again = _at(events, _TEXT_DELTA, 2)
    with trio.fail_after(60):
        message = await _refusal(events[:again] + events)
    assert f"sequence_number is 0, not {again}: the stream started again" in message


async def test_a_reasoning_stream_numbered_one_by_one_reads_whole(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R10.2: a reasoning item and its deltas, numbered 0, 1, 2, ..., read as one block."""
    with trio.fail_after(60):
        collected = await serve_once("responses", _body(_reasoning_stream()))
    assert [b.text for b in collected.message.content if isinstance(b, Reasoning)] == [
        "Weigh the options."
    ]


async def test_a_doubled_delta_ends_the_turn_as_error_with_no_doubled_text(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R7.36: the agent's turn over a stream that sent a delta twice ends ``error`` coded
    ``MALFORMED_RESPONSE``; the session records no answer holding the text twice."""
    events = _doubled(recorded_events(_TEXT), _TEXT_DELTA)
    server = MockServer(ScriptedPolicy([RawReply(200, SSE, _body(events))]))
    with trio.fail_after(120):
        async with (
            OpenAIModel(
                transport=server.transport(), base_url="http://mock/v1", api="responses"
            ) as model,
            retinue.open_runtime(models=model) as rt,
        ):
            agent = await rt.create_agent("a", AgentOptions(model="m"))
            result = await agent.ask("the secrets?")
    assert result.reason.kind == "error"
    assert result.reason.code == "MALFORMED_RESPONSE"  # type: ignore[union-attr]
    ends = [e for e in agent.session.events if e.type == "turn/end"]
    assert ends[-1].data.reason.code == "MALFORMED_RESPONSE"  # type: ignore[union-attr]
    answers = [e for e in agent.session.events if e.type == "assistant/message"]
    doubled = "".join(e["delta"] for e in events if e["type"] == _TEXT_DELTA)
    assert all(doubled not in repr(e.data) for e in answers)


@pytest.mark.parametrize("kind", ["stream_error", "malformed", "truncated"])
async def test_the_mock_servers_stream_faults_read_as_their_own_failure(
    autojump_clock: trio.abc.Clock, kind: FaultKind
) -> None:
    """The mock server numbers its Responses streams 0, 1, 2, ..., its error event the next
    number: each stream fault it injects fails as that fault, not as a broken count."""
    server = MockServer(FaultPolicy(EchoPolicy(chunks=8), rate=1.0, kinds=[kind]))
    with pytest.raises(ProviderError) as caught, trio.fail_after(60):
        async with mock_adapter("responses", server) as model:
            await collect(model, make_request("hi"))
    assert caught.value.code == _FAULT_CODES[kind]
    assert "sequence_number" not in str(caught.value)
