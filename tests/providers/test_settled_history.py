"""A request body built on the session's previous request is the body built from scratch.

The adapters map only the messages of a session's history that the previous
request's mapping could not settle (``providers/_settled.py``). Whatever the
history and wherever requests are cut from it (growing, an older snapshot
again, a session prefix that changes), each body must equal the body mapped
from a plain copy of the same messages, which keeps nothing between requests.
That copy is mapped by the same code, so these tests find what keeping
breaks; what the mapping itself must give is checked against each API's
rules in ``test_request_properties.py`` and ``test_request_mapping.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from hypothesis import given, settings, strategies as st

from retinue._content import Message, Reasoning, Text, ToolCall, ToolResultBlock
from retinue._request import LlmCallConfig, MessageHistory, ModelRequest, derived_of
from retinue.providers._anthropic_wire import anthropic_request_body
from retinue.providers._openai_chat import chat_request_body
from retinue.providers._openai_responses import responses_request_body
from retinue.providers._settled import Settled
from retinue.session import (
    AssistantMessage,
    Replace,
    Session,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from tests.unit.test_checks import DONE, TRIGGER, text

from .support import ANTHROPIC_IMAGE
from .test_request_properties import histories

Body = dict[str, object]
BUILDERS: dict[str, Callable[[ModelRequest], Body]] = {
    "chat": chat_request_body,
    "chat-reasoning": lambda request: chat_request_body(request, replay_reasoning=True),
    "responses": responses_request_body,
    "anthropic": anthropic_request_body,
    # Whether the loop a history ends in began with thinking is kept from request to request.
    "anthropic-thinking": lambda request: anthropic_request_body(request, thinking_budget=2048),
}
CONFIG = LlmCallConfig("test-model")
_NUMBER = re.compile(r"\d+")


def _renumbered(message: Message, ids: Callable[[str], str]) -> Message:
    """*message* with each call id, and each result's, written by *ids*."""
    content = tuple(
        ToolCall(ids(b.id), b.name, b.arguments)
        if isinstance(b, ToolCall)
        else ToolResultBlock(ids(b.tool_call_id), b.content, b.is_error)
        if isinstance(b, ToolResultBlock)
        else b
        for b in message.content
    )
    return Message(message.role, content)


def _signed_as_responses(message: Message) -> Message:
    """*message* with its signed reasoning signed as the Responses adapter signs it: the
    API's reasoning item, linked to the message's calls."""
    calls = [b.id for b in message.content if isinstance(b, ToolCall)]

    def signed(block: Reasoning) -> Reasoning:
        if not block.signature:
            return block
        item = {"type": "reasoning", "id": f"rs_{block.signature}", "summary": []}
        links = [{"call_id": call, "id": f"fc_{n}"} for n, call in enumerate(calls)]
        return Reasoning(block.text, "\n".join(json.dumps(line) for line in [item, *links]))

    content = tuple(signed(b) if isinstance(b, Reasoning) else b for b in message.content)
    return Message(message.role, content)


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[Message], list[tuple[int, int]]]:
    """A history whose call ids may repeat or run long, and the requests cut from it.

    Each request is ``(length, prefix)``: the first *length* messages behind
    the session prefix numbered *prefix* (0: none).
    """
    history = draw(histories(ANTHROPIC_IMAGE))
    spread = draw(st.integers(1, 4))
    pad = draw(st.sampled_from(("", "x" * 70)))

    def ids(call_id: str) -> str:
        # Servers that number each answer's calls from 0 repeat ids across turns.
        number = int(_NUMBER.findall(call_id)[-1])
        return f"{pad}call_{number % spread}"

    history = [_renumbered(m, ids) for m in history]
    if draw(st.booleans()):
        history = [_signed_as_responses(m) for m in history]
    # A system message mid-history (a plugin's surface event may project one).
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(history)))
        history.insert(at, Message("system", (Text(f"system at {at}"),)))
    lengths = draw(st.lists(st.integers(0, len(history)), min_size=1, max_size=8))
    prefixes = draw(st.lists(st.integers(0, 2), min_size=len(lengths), max_size=len(lengths)))
    return history, list(zip(lengths, prefixes, strict=True))


_PREFIX = (
    Message("user", (Text("Earlier, you said:"),)),
    Message("assistant", (Text("an answer kept in the prefix"),)),
    Message("system", (Text("prefix system text"),)),
)


def _prefix(number: int) -> tuple[Message, ...]:
    """Session prefix number *number* (R8.6): none, system text, or a whole exchange."""
    return ((), _PREFIX[2:], _PREFIX)[number]


@settings(max_examples=150)
@given(sessions(), st.sampled_from((None, "Be brief.")))
def test_a_body_built_on_earlier_requests_is_the_body_built_from_scratch(
    session: tuple[list[Message], list[tuple[int, int]]], system: str | None
) -> None:
    """Requests of one session's history, cut at any lengths in any order (an older one
    again, a retry), map as a copy of the same messages maps (R7.35); and a body built
    is not changed by the requests built after it."""
    history, cuts = session
    for api, build in BUILDERS.items():
        derived: dict[object, object] = {}
        bodies = []
        for length, prefix in cuts:
            shared = MessageHistory(history, length, derived=derived).with_prefix(_prefix(prefix))
            alone = MessageHistory(history[:length], prefix=_prefix(prefix))
            body = build(ModelRequest(CONFIG, shared, system))
            assert body == build(ModelRequest(CONFIG, alone, system)), (api, length, prefix)
            bodies.append((body, repr(body)))
        assert [repr(body) for body, _ in bodies] == [shown for _, shown in bodies], api


def test_reasoning_sent_in_its_turn_is_not_sent_once_a_prompt_ends_the_turn() -> None:
    """The Responses API gets back the reasoning of the current turn only: a later prompt
    drops it from the next request, though the request before sent it with its call."""
    item = {"type": "reasoning", "id": "rs_1", "summary": []}
    signature = "\n".join(json.dumps(line) for line in [item, {"call_id": "c1", "id": "fc_1"}])
    history = [
        Message("user", (Text("hi"),)),
        Message("assistant", (Reasoning("thinking", signature), ToolCall("c1", "t", "{}"))),
        Message("user", (ToolResultBlock("c1", (Text("result"),), is_error=False),)),
        Message("assistant", (Text("done"),)),
        Message("user", (Text("next"),)),
    ]
    derived: dict[object, object] = {}
    kinds = []
    for length in (3, 5):
        request = ModelRequest(CONFIG, MessageHistory(history, length, derived=derived))
        items = responses_request_body(request)["input"]
        assert isinstance(items, list)
        kinds.append([item.get("type") for item in items])
    assert kinds == [
        [None, "reasoning", "function_call", "function_call_output"],
        [None, "function_call", "function_call_output", None, None],
    ]


def _tool_step(step: int) -> list[Message]:
    """A step of a reasoning model's tool loop, its reasoning signed as the Responses adapter signs it."""
    call = ToolCall(f"call_{step % 3}", "lookup", "{}")  # ids repeat, as some servers send them
    asking = _signed_as_responses(Message("assistant", (Reasoning("hm", f"sig{step}"), call)))
    return [asking, Message("user", (ToolResultBlock(call.id, (Text(f"r{step}"),), False),))]


def test_each_step_of_a_long_turn_and_the_prompt_after_it_map_as_from_scratch() -> None:
    """Requests at every step of a 30-step turn, then of the next turn, whose prompt stops
    the reasoning of the turn before from being sent (R7.35)."""
    history = [Message("user", (Text("go"),))]
    for step in range(30):
        history += _tool_step(step)
    history += [Message("assistant", (Text("done"),)), Message("user", (Text("again"),))]
    history += _tool_step(30)
    derived: dict[object, object] = {}
    for length in range(1, len(history) + 1):
        for build in BUILDERS.values():
            kept = build(ModelRequest(CONFIG, MessageHistory(history, length, derived=derived)))
            assert kept == build(ModelRequest(CONFIG, MessageHistory(history[:length])))
    # Each adapter kept the mapping of all but the last message, for the next request
    # to map only what is new.
    counts = [settled.count for settled in derived.values() if isinstance(settled, Settled)]
    assert counts == [len(history) - 1] * 4  # a thinking budget does not change the mapping


def _pruned_session() -> Session:
    """A tool step in turn 1 whose result turn 2 replaces on the surface (R4.21)."""
    session = Session.create("pruned")
    session.append(TurnStart(1, TRIGGER))
    session.append(UserMessage(text("hello")), surface="append")
    session.append(StepStart(1, 1))
    session.append(AssistantMessage(1, 1, (ToolCall("c1", "t", "{}"),)), surface="append")
    session.append(ToolCallEvent(1, 1, "c1", "t", "{}"))
    session.append(ToolResultEvent(1, 1, "c1", text("a long output")), surface="append")
    session.append(StepEnd(1, 1))
    session.append(TurnEnd(1, DONE))
    session.append(TurnStart(2, TRIGGER))
    session.append(UserMessage(text("again")), surface="append")
    return session


def test_a_surface_replace_maps_the_history_anew() -> None:
    """After a replace the body holds the replacing result, not the mapping of the one
    it replaced kept from the request before (R4.21)."""
    session = _pruned_session()
    for build in BUILDERS.values():
        build(ModelRequest(CONFIG, session.derive_messages()))
    session.append(
        ToolResultEvent(1, 1, "c1", text("[pruned]")), surface=Replace(5, 5), source_event_seqs=(5,)
    )
    history = session.derive_messages()
    for api, build in BUILDERS.items():
        body = build(ModelRequest(CONFIG, history))
        assert "[pruned]" in repr(body), api
        assert "a long output" not in repr(body), api
        assert body == build(ModelRequest(CONFIG, MessageHistory(list(history))))


def test_a_session_s_snapshots_share_what_adapters_derive_until_a_replace() -> None:
    """Every snapshot of a session's history carries one store; a replace, which changes
    messages already sent, starts another."""
    session = _pruned_session()
    first, second = session.derive_messages(), session.derive_messages()
    found, again = derived_of(first), derived_of(second.with_prefix(_prefix(1)))
    assert found is not None
    assert again is not None
    assert found[1] is again[1]
    session.append(
        ToolResultEvent(1, 1, "c1", text("[pruned]")), surface=Replace(5, 5), source_event_seqs=(5,)
    )
    replaced = derived_of(session.derive_messages())
    assert replaced is not None
    assert replaced[1] is not found[1]
    assert derived_of(MessageHistory(list(first))) is None
