"""A str field holding a UTF-16 surrogate pair as two code points holds its character once
built: stored, the pair is two ``\\u`` escapes that read back as that character, so the
stored log would differ from the logged one (R1.6, R11.2)."""

from __future__ import annotations

import json
from pathlib import Path

from retinue import JSONLStore
from retinue._content import (
    OpaqueBlock,
    Reasoning,
    RedactedReasoning,
    Text,
    ToolCall,
    ToolResultBlock,
)
from retinue.session import (
    AssistantMessage,
    ContextMessage,
    Event,
    EventData,
    Session,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
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
    """R11.2: every block reloads equal to the one logged; before, each of these fields
    came back holding the character where the logged block held the pair."""
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
    log equals the live one and so does its history; before, the live id held the pair
    and the stored one its character."""
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
