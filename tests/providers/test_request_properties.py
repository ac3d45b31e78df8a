"""Request bodies obey each API's structural rules for any history a session can log.

The strategy below builds histories the way the loop logs them (R5.2, R9.17,
R9.18): a prompt per turn, an assistant message per step (left out when it
has no blocks), one tool result per call in model order, each in its own user
message, and context or steering envelopes injected during the turn, between
a call and its result too. Each adapter's body is then checked against the
rules its API enforces with a 400.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from itertools import pairwise
from typing import Any

from hypothesis import given, strategies as st

from retinue._content import (
    ContentBlock,
    Message,
    OpaqueBlock,
    Reasoning,
    RedactedReasoning,
    Text,
    ToolCall,
    ToolResultBlock,
    content_text,
)
from retinue._request import ModelRequest
from retinue.providers._anthropic_wire import anthropic_request_body
from retinue.providers._openai_chat import chat_request_body
from retinue.providers._openai_responses import responses_request_body

from .support import ANTHROPIC_IMAGE, CHAT_IMAGE, RESPONSES_IMAGE, make_request

BLANKS = ("", " ", "\n\n", " \t\n")
"""Texts with nothing visible: a blank prompt, a model's blank answer, a silent tool."""

words = st.text(st.characters(categories=["L", "N", "P"]), max_size=8)
padding = st.sampled_from(("", " ", "\n"))


class _Draws:
    """Draws the parts of one history; every visible text carries a unique ``<n>`` tag.

    The tag makes "this text reached the body" a substring test that a
    placeholder or a neighbouring text cannot pass by accident.
    """

    def __init__(self, draw: st.DrawFn, image: OpaqueBlock) -> None:
        self.draw = draw
        self.image = image
        self._tags: Iterator[int] = itertools.count()
        self._ids: Iterator[int] = itertools.count()

    def text(self) -> str:
        draw = self.draw
        if draw(st.integers(0, 3)) == 0:
            return draw(st.sampled_from(BLANKS))
        return f"{draw(padding)}{draw(words)}<{next(self._tags)}>{draw(padding)}"

    def prompt(self) -> Message:
        """A user prompt: text (possibly blank), an image, both, or no block (``ask([])``)."""
        shape = self.draw(st.sampled_from(("text", "text+image", "image+text", "image", "")))
        blocks: dict[str, ContentBlock] = {"text": Text(self.text()), "image": self.image}
        return Message("user", tuple(blocks[part] for part in shape.split("+") if part))

    def envelope(self) -> Message:
        """A context or steering message, projected as the session projects it (R5.2)."""
        tag = self.draw(st.sampled_from(("context", "steering")))
        kind = self.draw(st.sampled_from(("user", "plugin")))
        return Message(
            "user", (Text(f'<{tag} source="{kind}">'), Text(self.text()), Text(f"</{tag}>"))
        )

    def reasoning(self) -> ContentBlock:
        kind = self.draw(st.sampled_from(("signed", "unsigned", "redacted")))
        if kind == "redacted":
            return RedactedReasoning(f"EqQB{next(self._tags)}")
        signature = f"sig{next(self._tags)}" if kind == "signed" else None
        return Reasoning(self.text(), signature)

    def assistant(self) -> Message:
        """An assistant message: reasoning first, then text and 0..3 tool calls in any order.

        Ids are unique across the history, as provider-minted ids are, and as
        the decoders mint them for a server that sends none.
        """
        draw = self.draw
        thinking = [self.reasoning() for _ in range(draw(st.integers(0, 2)))]
        rest: list[ContentBlock] = [Text(self.text()) for _ in range(draw(st.integers(0, 1)))]
        rest += [
            ToolCall(f"call_{next(self._ids)}", draw(st.sampled_from(("lookup", "search"))), "{}")
            for _ in range(draw(st.integers(0, 3)))
        ]
        return Message("assistant", (*thinking, *draw(st.permutations(rest))))

    def result(self, call: ToolCall) -> Message:
        """The call's result in its own user message (R5.2): text, empty, image-only, error."""
        shape = self.draw(st.sampled_from(("text", "", "image", "text+image", "text+text")))
        parts = [part for part in shape.split("+") if part]
        content = tuple(self.image if part == "image" else Text(self.text()) for part in parts)
        return Message("user", (ToolResultBlock(call.id, content, self.draw(st.booleans())),))

    def tool_round(self, calls: Sequence[ToolCall]) -> list[Message]:
        """The results in model order (R9.17), with messages injected while the tools ran.

        A message injected while a tool ran is logged before that tool's
        result; contexts collected from the results follow them all (R9.18).
        """
        draw = self.draw
        messages: list[Message] = []
        for call in calls:
            messages += [self.envelope() for _ in range(draw(st.integers(0, 1)))]
            messages.append(self.result(call))
        messages += [self.envelope() for _ in range(draw(st.integers(0, 2)))]
        return messages


@st.composite
def histories(draw: st.DrawFn, image: OpaqueBlock) -> list[Message]:
    """A history as a session logs it, behind a session prefix of system messages (R8.6).

    A turn has 0..3 steps: none when the model failed before it answered (so
    two prompts meet), and a turn may stop after its tool results (a step
    limit, an abort), so that results are followed by the next prompt. The
    history ends wherever a request can be built: on a prompt, on tool results,
    or on the model's last answer.
    """
    draws = _Draws(draw, image)
    messages = [Message("system", (Text(draws.text()),)) for _ in range(draw(st.integers(0, 2)))]
    for _ in range(draw(st.integers(1, 3))):
        messages.append(draws.prompt())
        # ``inject`` during a turn logs a context message wherever the turn is.
        messages += [draws.envelope() for _ in range(draw(st.integers(0, 1)))]
        for _ in range(draw(st.integers(0, 3))):
            assistant = draws.assistant()
            if assistant.content:  # the session logs no message for an empty answer
                messages.append(assistant)
            calls = [block for block in assistant.content if isinstance(block, ToolCall)]
            if not calls:
                break
            messages += draws.tool_round(calls)
    if draw(st.booleans()):
        messages.append(draws.prompt())
    return messages


def requests(image: OpaqueBlock) -> st.SearchStrategy[ModelRequest]:
    """A model request over a generated history, with or without a system prompt."""
    system = st.none() | st.sampled_from(("", "Be brief.", " "))
    return st.builds(lambda history, s: make_request(*history, system=s), histories(image), system)


# What the history holds


def _blocks(request: ModelRequest, kind: type[Any]) -> list[Any]:
    """Every block of *kind* in the request's messages, tool results' content included."""
    found: list[Any] = []
    for message in request.messages:
        for block in message.content:
            if isinstance(block, kind):
                found.append(block)
            if isinstance(block, ToolResultBlock):
                found += [part for part in block.content if isinstance(part, kind)]
    return found


def _call_ids(request: ModelRequest) -> list[str]:
    return [block.id for block in _blocks(request, ToolCall)]


def _result_ids(request: ModelRequest) -> list[str]:
    return [block.tool_call_id for block in _blocks(request, ToolResultBlock)]


def _visible_texts(request: ModelRequest) -> list[str]:
    """Every text with something visible, system prompt included."""
    texts = [block.text for block in _blocks(request, Text)]
    if request.system:
        texts.append(request.system)
    return [text for text in texts if text.strip()]


def _anthropic_sends(block: ContentBlock) -> bool:
    """Whether Anthropic's body carries *block* wherever it stands (docs/providers.md)."""
    if isinstance(block, Text):
        return bool(block.text.strip())
    if isinstance(block, Reasoning):
        return bool(block.signature)
    return True


def _thinking_before_the_end(run: list[ContentBlock]) -> list[ContentBlock]:
    """The thinking of one assistant turn, less what would end it (the API refuses that)."""
    while run and isinstance(run[-1], Reasoning | RedactedReasoning):
        run = run[:-1]
    return [block for block in run if isinstance(block, Reasoning | RedactedReasoning)]


def _anthropic_thinking(request: ModelRequest) -> list[ContentBlock]:
    """The signed and redacted thinking Anthropic's body carries, in order.

    Consecutive assistant messages form one turn, and so do those only
    unsendable blocks (blank text, unsigned reasoning) keep apart.
    """
    kept: list[ContentBlock] = []
    run: list[ContentBlock] = []
    for message in request.messages:
        if message.role == "user":
            kept += _thinking_before_the_end(run)
            run = []
        elif message.role == "assistant":
            run += [block for block in message.content if _anthropic_sends(block)]
    return kept + _thinking_before_the_end(run)


def _strings(value: object) -> Iterator[str]:
    """Every string value in a JSON body."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _objects(value: object, predicate: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """Every JSON object in a body that satisfies *predicate*, in document order."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        if predicate(value):
            found.append(value)
        for item in value.values():
            found += _objects(item, predicate)
    elif isinstance(value, list):
        for item in value:
            found += _objects(item, predicate)
    return found


def _assert_carried(body: object, texts: Sequence[str]) -> None:
    strings = list(_strings(body))
    for text in texts:
        assert any(text in string for string in strings), f"{text!r} is missing from the body"


def _typed(kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda item: item.get("type") == kind


# Anthropic Messages


def _anthropic_text_is_visible(block: dict[str, Any]) -> None:
    if block["type"] == "text":
        assert block["text"].strip(), f"a blank text block: {block!r}"


@given(requests(ANTHROPIC_IMAGE), st.sampled_from((None, 2048)))
def test_anthropic_turns_alternate_and_hold_visible_content(
    request: ModelRequest, thinking_budget: int | None
) -> None:
    """Anthropic: roles alternate starting with user; no turn has an empty content list; no
    text block is empty or whitespace-only, at the top level or inside a ``tool_result``;
    an ``is_error`` result has content; thinking carries its signature; a history that ends
    the transcript ends on a user turn (else it would be a prefill), and no assistant turn
    ends with thinking.
    """
    body: Any = anthropic_request_body(request, thinking_budget=thinking_budget)
    turns = body["messages"]
    assert turns[0]["role"] == "user"
    assert all(a["role"] != b["role"] for a, b in pairwise(turns))
    for turn in turns:
        assert turn["content"], f"an empty {turn['role']} turn"
        for block in turn["content"]:
            _anthropic_text_is_visible(block)
            if block["type"] == "tool_result":
                for part in block["content"]:
                    _anthropic_text_is_visible(part)
                assert block["content"] or not block.get("is_error")
            if block["type"] == "thinking":
                assert block["signature"]
        if turn["role"] == "assistant":
            assert turn["content"][-1]["type"] not in ("thinking", "redacted_thinking")
    assert turns[-1]["role"] == "user"


@given(requests(ANTHROPIC_IMAGE))
def test_anthropic_every_tool_use_is_answered_in_the_next_turn(request: ModelRequest) -> None:
    """Anthropic: each ``tool_use`` id has exactly one ``tool_result`` in the immediately
    following user turn, where the results come before any other block; no ``tool_result``
    answers anything but the preceding turn's ``tool_use``; ``tool_use`` ids are unique.
    """
    body: Any = anthropic_request_body(request)
    pending: list[str] = []
    for turn in body["messages"]:
        content = turn["content"]
        if turn["role"] == "assistant":
            assert not pending
            pending = [block["id"] for block in content if block["type"] == "tool_use"]
            continue
        is_result = [block["type"] == "tool_result" for block in content]
        assert is_result == sorted(is_result, reverse=True), "a tool_result after other content"
        answered = [block["tool_use_id"] for block in content if block["type"] == "tool_result"]
        assert sorted(answered) == sorted(pending)
        pending = []
    uses = [block["id"] for block in _objects(body, _typed("tool_use"))]
    assert len(uses) == len(set(uses))


@given(requests(ANTHROPIC_IMAGE))
def test_anthropic_body_keeps_everything_the_api_can_carry(request: ModelRequest) -> None:
    """Anthropic: no tool call or result is lost or duplicated, and every visible text,
    signed thinking, redacted thinking and image reaches the body. Whitespace-only text is
    left out (docs/providers.md), and so is thinking that would end an assistant turn;
    unsigned reasoning has no form the API accepts.
    """
    body: Any = anthropic_request_body(request)
    uses = _objects(body, _typed("tool_use"))
    results = _objects(body, _typed("tool_result"))
    assert Counter(block["id"] for block in uses) == Counter(_call_ids(request))
    assert Counter(block["tool_use_id"] for block in results) == Counter(_result_ids(request))
    thinking = _objects(body, lambda item: item.get("type") in ("thinking", "redacted_thinking"))
    expected = _anthropic_thinking(request)
    assert [b.get("signature", b.get("data")) for b in thinking] == [
        block.signature if isinstance(block, Reasoning) else block.data for block in expected
    ]
    assert [b.get("thinking") for b in thinking] == [
        block.text if isinstance(block, Reasoning) else None for block in expected
    ]
    assert len(_objects(body, _typed("image"))) == len(_blocks(request, OpaqueBlock))
    _assert_carried(body, _visible_texts(request))


# OpenAI Chat Completions


@given(requests(CHAT_IMAGE), st.booleans())
def test_chat_tool_calls_are_answered_before_anything_else(
    request: ModelRequest, replay_reasoning: bool
) -> None:
    """Chat Completions: an assistant message with ``tool_calls`` is followed immediately by
    exactly one ``tool`` message per call id (in any order) before any other message; no
    ``tool`` message lacks a preceding call; an assistant message has content or tool calls.
    """
    body: Any = chat_request_body(request, replay_reasoning=replay_reasoning)
    messages = body["messages"]
    index = 0
    while index < len(messages):
        message = messages[index]
        assert message["role"] != "tool", f"message {index} answers no call"
        index += 1
        if message["role"] != "assistant":
            continue
        calls = [call["id"] for call in message.get("tool_calls", [])]
        assert message["content"] is not None or calls
        replies = messages[index : index + len(calls)]
        assert [reply["role"] for reply in replies] == ["tool"] * len(calls)
        assert sorted(reply["tool_call_id"] for reply in replies) == sorted(calls)
        assert all(isinstance(reply["content"], str) for reply in replies)
        index += len(calls)


@given(requests(CHAT_IMAGE), st.booleans())
def test_chat_body_keeps_everything_the_api_can_carry(
    request: ModelRequest, replay_reasoning: bool
) -> None:
    """Chat Completions: no tool call or result is lost or duplicated; every text reaches the
    body, and so does every image outside a tool result (a ``tool`` message carries text
    only, docs/providers.md). Unsigned reasoning goes back as ``reasoning_content`` only when
    replayed, and only on a message the API accepts (one with content or tool calls).
    """
    body: Any = chat_request_body(request, replay_reasoning=replay_reasoning)
    messages = body["messages"]
    calls = [call["id"] for m in messages for call in m.get("tool_calls", [])]
    assert Counter(calls) == Counter(_call_ids(request))
    replies = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert Counter(replies) == Counter(_result_ids(request))
    outside_results = [b for m in request.messages for b in m.content if isinstance(b, OpaqueBlock)]
    assert len(_objects(body, _typed("image_url"))) == len(outside_results)
    _assert_carried(body, _visible_texts(request))
    replayed = [m["reasoning_content"] for m in messages if "reasoning_content" in m]
    unsigned = [
        [b.text for b in m.content if isinstance(b, Reasoning) and b.signature is None]
        for m in request.messages
        if m.role == "assistant"
        and (content_text(m.content) or any(isinstance(b, ToolCall) for b in m.content))
    ]
    expected = ["".join(texts) for texts in unsigned if texts]
    assert replayed == (expected if replay_reasoning else [])


# OpenAI Responses


@given(requests(RESPONSES_IMAGE))
def test_responses_every_function_call_has_one_output_after_it(request: ModelRequest) -> None:
    """Responses: each ``function_call`` has exactly one ``function_call_output`` with its
    ``call_id``, placed after it with only function calls and outputs in between; no output
    lacks its call; call ids are unique.
    """
    items: Any = responses_request_body(request)["input"]
    kinds = [item.get("type", "message") for item in items]
    calls = {item["call_id"]: i for i, item in enumerate(items) if kinds[i] == "function_call"}
    assert len(calls) == kinds.count("function_call")
    outputs: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        if kinds[i] == "function_call_output":
            outputs.setdefault(item["call_id"], []).append(i)
    assert outputs.keys() <= calls.keys(), "an output without its call"
    for call_id, call_index in calls.items():
        (output_index,) = outputs[call_id]
        assert call_index < output_index
        between = set(kinds[call_index + 1 : output_index])
        assert between <= {"function_call", "function_call_output"}


@given(requests(RESPONSES_IMAGE))
def test_responses_body_keeps_everything_the_api_can_carry(request: ModelRequest) -> None:
    """Responses: no tool call or result is lost or duplicated; every text and image reaches
    the body (reasoning is not replayed, docs/providers.md).
    """
    body: Any = responses_request_body(request)
    items = body["input"]
    calls = [item["call_id"] for item in items if item.get("type") == "function_call"]
    outputs = [item["call_id"] for item in items if item.get("type") == "function_call_output"]
    assert Counter(calls) == Counter(_call_ids(request))
    assert Counter(outputs) == Counter(_result_ids(request))
    assert len(_objects(body, _typed("input_image"))) == len(_blocks(request, OpaqueBlock))
    _assert_carried(body, _visible_texts(request))
