"""A str field holding a UTF-16 surrogate pair as two code points holds its character once
built: stored, the pair is two ``\\u`` escapes that read back as that character, so the
stored log would differ from the logged one (R1.6, R11.2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retinue import JSONLStore
from retinue._content import (
    OpaqueBlock,
    Reasoning,
    RedactedReasoning,
    Text,
    ToolCall,
    ToolResultBlock,
)
from retinue._request import LlmCallConfig, ToolSchema
from retinue._sources import MessageSource
from retinue.session import (
    AssistantMessage,
    ContextMessage,
    CustomEvent,
    EpochHeader,
    Event,
    EventData,
    PromptBlocked,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    StepEnd,
    StepStart,
    SystemEdit,
    ToolCallEvent,
    ToolErrorInfo,
    ToolResultEvent,
    ToolsDelta,
    TurnEnd,
    TurnEndReason,
    TurnStart,
    TurnTrigger,
    UserMessage,
)
from retinue.session._codec import decode_event, encode_event
from retinue.testing import check_session_invariants

# What a JSON decoder gives for each of two escapes of one emoji, read apart.
HIGH, LOW = json.loads('"\\ud83d"'), json.loads('"\\ude00"')
PAIR = HIGH + LOW
EMOJI = "\U0001f600"


def _reloaded(data: EventData) -> EventData:
    """*data* logged as an event, written as its stored line and read back."""
    return decode_event(encode_event(Event(0, 1, data))).data


async def _stored(session: Session, root: Path) -> Session:
    """*session* written to a JSONL store under *root* and loaded back."""
    async with JSONLStore(root) as store:
        store.attach_new(session)
        await store.detach(session)
    async with JSONLStore(root) as store:
        return await store.load(session.id)


def test_each_block_field_holding_a_pair_holds_its_character() -> None:
    """R1.6: a call's id and name, a result's call id, a signature, redacted data and an
    opaque block's kind join the pair, as a Text's text does; a lone half is kept."""
    call = ToolCall("call-" + PAIR, "look" + PAIR, "{}")
    blocks = (
        Reasoning("think", signature="sig" + PAIR),
        RedactedReasoning("data" + PAIR),
        OpaqueBlock("vendor" + PAIR, {}),
        ToolResultBlock("call-" + PAIR, (Text("ok"),)),
    )
    assert (call.id, call.name) == ("call-" + EMOJI, "look" + EMOJI)
    assert blocks == (
        Reasoning("think", signature="sig" + EMOJI),
        RedactedReasoning("data" + EMOJI),
        OpaqueBlock("vendor" + EMOJI, {}),
        ToolResultBlock("call-" + EMOJI, (Text("ok"),)),
    )
    assert ToolCall("half-" + HIGH, "n", "{}").id == "half-" + HIGH
    assert RedactedReasoning(LOW + "x").data == LOW + "x"


def test_a_message_of_blocks_holding_pairs_reads_back_from_its_line_as_it_was_logged() -> None:
    """R11.2: every block reloads equal to the one logged: each of these fields comes back
    holding the pair the logged block held, not the character it encodes."""
    message = ContextMessage(
        (
            Reasoning("think", signature="sig" + PAIR),
            RedactedReasoning("data" + PAIR),
            OpaqueBlock("vendor" + PAIR, {"x": 1}),
            ToolResultBlock("call-" + PAIR, (Text("ok"),)),
        )
    )
    assert _reloaded(message) == message


async def test_a_tool_step_whose_call_id_holds_a_pair_reloads_from_the_store_as_logged(
    tmp_path: Path,
) -> None:
    """R11.2, R4.15: the call, its audit record and its result keep one id, the stored
    log equals the live one and so does its history: the stored id holds the pair the live
    one holds, not the character it encodes."""
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    session.append(UserMessage("go"), surface="append")
    session.append(StepStart(1, 1))
    call = ToolCall("call-" + PAIR, "look" + PAIR, '{"q": "' + PAIR + '"}')
    session.append(AssistantMessage(1, 1, (call,)), surface="append")
    call_seq = session.append(ToolCallEvent(1, 1, call.id, call.name, call.arguments)).seq
    session.append(
        ToolResultEvent(1, 1, call.id, (Text("found"),)),
        surface="append",
        source_event_seqs=[call_seq],
    )
    session.append(StepEnd(1, 1))
    session.append(TurnEnd(1, TurnEndReason.completed()))
    stored = await _stored(session, tmp_path)
    assert list(stored.events) == list(session.events)
    assert list(stored.derive_messages()) == list(session.derive_messages())
    check_session_invariants(stored.events)


EVENTS_HOLDING_PAIRS: dict[str, EventData] = {
    "turn-end-error": TurnEnd(1, TurnEndReason.error(1, "failed " + PAIR, code="C" + PAIR)),
    "turn-end-aborted": TurnEnd(1, TurnEndReason.aborted("stop " + PAIR)),
    "turn-end-kind": TurnEnd(1, TurnEndReason("vendor" + PAIR)),
    "prompt-blocked": PromptBlocked((Text("x"),), reason="no " + PAIR),
    "tool-call": ToolCallEvent(1, 1, "call-" + PAIR, "look" + PAIR, '"' + PAIR + '"'),
    "tool-result": ToolResultEvent(
        1, 1, "call-" + PAIR, (Text("x"),), True, ToolErrorInfo("look" + PAIR, "C" + PAIR)
    ),
    "custom": CustomEvent("plugin/" + PAIR, {"x": 1}),
}


@pytest.mark.parametrize("data", EVENTS_HOLDING_PAIRS.values(), ids=EVENTS_HOLDING_PAIRS.keys())
def test_an_event_whose_strings_hold_pairs_reads_back_from_its_line_as_it_was_logged(
    data: EventData,
) -> None:
    """R11.2: a turn's end reason, a blocked prompt's reason, a call's audit record, a
    result's call id and error, and a custom event's type reload equal to the logged
    event: each comes back holding the pair the event held, not the character it encodes."""
    assert _reloaded(data) == data
    assert EMOJI in repr(data)  # a pair's repr shows its two escapes


def test_an_event_field_holding_a_lone_half_keeps_it() -> None:
    """R1.6: a lone surrogate is no pair; its escape reads back as itself."""
    reason = TurnEndReason.aborted("half " + HIGH)
    assert reason.reason == "half " + HIGH
    assert _reloaded(TurnEnd(1, reason)) == TurnEnd(1, reason)


async def test_a_cancelled_turn_and_a_custom_event_holding_pairs_reload_from_the_store(
    tmp_path: Path,
) -> None:
    """R11.2: the stored log equals the live one: the cancel's reason and the custom event's
    type come back from the store holding the pair, not the character it encodes."""
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    session.append_custom("plugin/" + PAIR, {"note": PAIR})
    session.append(TurnEnd(1, TurnEndReason.aborted("stop " + PAIR)))
    stored = await _stored(session, tmp_path)
    assert list(stored.events) == list(session.events)
    assert stored.events[1].type == "plugin/" + EMOJI


SOURCE = MessageSource("plugin", "plug" + PAIR)
HEADER = EpochHeader(
    LlmCallConfig("model" + PAIR, provider="vendor" + PAIR, stop=["end" + PAIR]),
    system="be brief " + PAIR,
    tools=(ToolSchema("look" + PAIR, "Look it up " + PAIR, {"type": "object"}),),
)
HEADERS_AND_SOURCES_HOLDING_PAIRS: dict[str, EventData] = {
    "header": RequestHeader(HEADER, "initial"),
    "header-delta": RequestHeaderDelta(
        system=SystemEdit(0, 0, ("line " + PAIR,)),
        tools=ToolsDelta(removed=("look" + PAIR,)),
        config=LlmCallConfig("model" + PAIR),
    ),
    "turn-start": TurnStart(1, TurnTrigger("message", SOURCE)),
    "user-message": UserMessage("hi", SOURCE),
}


@pytest.mark.parametrize(
    "data",
    HEADERS_AND_SOURCES_HOLDING_PAIRS.values(),
    ids=HEADERS_AND_SOURCES_HOLDING_PAIRS.keys(),
)
def test_a_header_or_a_source_holding_pairs_reads_back_from_its_line_as_it_was_logged(
    data: EventData,
) -> None:
    """R11.2: a request header's model, provider, stop sequences, system prompt and tool
    schemas, a delta's lines and tool names, and a message's source reload equal to the
    logged event, holding the pair, not the character it encodes."""
    assert _reloaded(data) == data
    assert EMOJI in repr(data)


def test_a_system_prompt_holding_a_lone_half_keeps_it_and_an_empty_one_is_absent() -> None:
    """R1.6, R8.2: joining composes with the canonical header's empty system, stored absent."""
    config = LlmCallConfig("m")
    assert EpochHeader(config, system="half " + HIGH).system == "half " + HIGH
    assert EpochHeader(config, system="").system is None


async def test_a_session_header_whose_cwd_holds_a_pair_reloads_from_the_store_as_created(
    tmp_path: Path,
) -> None:
    """R4.1, R11.13: the stored header and the one listed equal the live one, holding the
    pair the live header holds, not the character it encodes."""
    session = Session.create("s", cwd="/work/" + PAIR)
    session.append(TurnStart(1, TurnTrigger("message")))
    session.append(RequestHeader(HEADER, "initial"))
    stored = await _stored(session, tmp_path)
    async with JSONLStore(tmp_path) as store:
        listed = await store.list()
    assert session.header.cwd == "/work/" + EMOJI
    assert listed == [stored.header]
    assert stored.header == session.header
    assert stored.current_header == session.current_header
