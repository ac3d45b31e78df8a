"""Content blocks nest only as deeply as any JSON value may: refused when built and on load (R4.5, R1.6)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

import pytest
import trio

from retinue import Message, Text, ToolResultBlock
from retinue._content import ContentBlock, OpaqueBlock
from retinue._errors import CorruptSessionError, InvalidJsonError
from retinue._lossless import MAX_JSON_DEPTH
from retinue._request import LlmCallConfig, ModelRequest
from retinue._stream import STOP, BlockEnd, BlockStart, Finish, StreamChunk
from retinue.session import (
    AssistantMessage,
    ContextMessage,
    EpochHeader,
    PromptBlocked,
    RequestHeader,
    RequestHeaderDelta,
    Session,
    SteeringMessage,
    ToolResultEvent,
    TurnStart,
    TurnTrigger,
    UserMessage,
)
from retinue.session._chunkcheck import chunk_problem
from retinue.session._codec import decode_event, encode_event
from retinue.testing import check_session_invariants
from tests.helpers import OPTIONS, of_type, runtime

LIMIT = f"more than {MAX_JSON_DEPTH} levels"
CONFIG = LlmCallConfig("m")
TEXT = Text("x")


def _results(count: int, inner: ContentBlock | None = TEXT) -> ToolResultBlock:
    """*count* tool results, each holding the next; the last holds *inner* (or nothing).

    Stored, each tool result is two levels (its object and its content array).
    """
    block = ToolResultBlock("c", () if inner is None else (inner,))
    for _ in range(count - 1):
        block = ToolResultBlock("c", (block,))
    return block


# The deepest block that may be stored: 100 tool results, the last empty (200 levels).
DEEPEST = _results(MAX_JSON_DEPTH // 2, None)
# One level deeper: a text block inside the innermost one.
ONE_LEVEL_DEEPER = _results(MAX_JSON_DEPTH // 2, TEXT)
# As reported: several hundred tool results, built in a loop.
FAR_TOO_DEEP = _results(1000)


def _deeper(frames: int, call: Callable[[], Any]) -> Any:
    """*call* from *frames* Python frames further down the stack."""
    return call() if frames == 0 else _deeper(frames - 1, call)


def _open() -> Session:
    session = Session.create("s")
    session.append(TurnStart(1, TurnTrigger("message")))
    return session


def _prefix(block: ContentBlock) -> tuple[Message, ...]:
    return (Message("user", (Text("before"), block)),)


# Every event field that holds content blocks, and the name its refusal gives.
HOLDERS: dict[str, tuple[Callable[[ContentBlock], object], str]] = {
    "user message": (lambda block: UserMessage((Text("x"), block)), "user/message: content[1]"),
    "prompt blocked": (lambda block: PromptBlocked((block,)), "prompt/blocked: content[0]"),
    "context": (lambda block: ContextMessage((block,)), "context/message: content[0]"),
    "steering": (lambda block: SteeringMessage(1, (block,)), "steering/message: content[0]"),
    "assistant": (
        lambda block: AssistantMessage(1, 1, (block,)),
        "assistant/message: content[0]",
    ),
    "tool result": (
        lambda block: ToolResultEvent(1, 1, "c", (block,)),
        "tool/result: content[0]",
    ),
    "header prefix": (
        lambda block: EpochHeader(CONFIG, message_prefix=_prefix(block)),
        "EpochHeader.message_prefix[0].content[1]",
    ),
    "delta prefix": (
        lambda block: RequestHeaderDelta(message_prefix=_prefix(block)),
        "request/header-delta: message_prefix[0].content[1]",
    ),
}


@pytest.mark.parametrize("holder", list(HOLDERS.values()), ids=list(HOLDERS))
@pytest.mark.parametrize(
    "block", [ONE_LEVEL_DEEPER, FAR_TOO_DEEP], ids=["one-level-deeper", "far-too-deep"]
)
def test_a_block_nested_past_the_limit_is_refused_when_built_naming_the_field(
    holder: tuple[Callable[[ContentBlock], object], str], block: ContentBlock
) -> None:
    """R4.5, R1.6: an event that could not be encoded again is a typed error naming where."""
    build, where = holder
    with pytest.raises(InvalidJsonError) as caught:
        build(block)
    assert str(caught.value) == f"{where} is nested too deeply: {LIMIT}"


@pytest.mark.parametrize("holder", list(HOLDERS.values()), ids=list(HOLDERS))
def test_the_deepest_block_is_accepted_wherever_blocks_are_held(
    holder: tuple[Callable[[ContentBlock], object], str],
) -> None:
    """R4.5: the limit is exactly MAX_JSON_DEPTH levels of the stored block."""
    build, _ = holder
    build(DEEPEST)


def test_the_deepest_block_stores_and_loads_again_from_a_deep_stack() -> None:
    """R4.5, R11.2: what append accepts encodes, dumps and decodes, with frames to spare.

    cattrs takes about five frames per tool result each way, so a margin of 250
    frames on top of the test runner's own is what it is checked against.
    """
    session = _open()
    event = session.append(UserMessage(DEEPEST), surface="append")
    header = session.append(
        RequestHeader(EpochHeader(CONFIG, message_prefix=_prefix(DEEPEST)), "initial")
    )
    for logged in (event, header):
        line = _deeper(250, partial(encode_event, logged))
        assert _deeper(250, partial(decode_event, line)) == logged
    assert len(_deeper(250, session.dump)) == 3


def test_an_opaque_block_inside_a_tool_result_counts_its_data_levels() -> None:
    """R4.5, R1.6: opaque data is JSON too; inside tool results its levels add to theirs."""
    data: dict[str, Any] = {"leaf": 1}
    for _ in range(2):
        data = {"k": data}
    opaque = OpaqueBlock("vendor", data)  # three levels
    with pytest.raises(InvalidJsonError, match=LIMIT):
        UserMessage(_results(MAX_JSON_DEPTH // 2 - 1, opaque))  # 198 + 3 levels
    UserMessage(_results(MAX_JSON_DEPTH // 2 - 1, OpaqueBlock("vendor", {"k": {"leaf": 1}})))


def test_an_opaque_block_at_the_json_limit_stays_storable() -> None:
    """R1.6: an opaque block on its own is bounded by its data: MAX_JSON_DEPTH levels are kept."""
    data: dict[str, Any] = {"leaf": 1}
    for _ in range(MAX_JSON_DEPTH - 1):
        data = {"k": data}
    session = _open()
    event = session.append(UserMessage(OpaqueBlock("vendor", data)), surface="append")
    assert decode_event(encode_event(event)) == event


def test_a_deep_block_refused_at_append_leaves_the_log_untouched() -> None:
    """R4.5: refused before anything is logged, so the session still encodes."""
    session = _open()
    with pytest.raises(InvalidJsonError):
        session.append(UserMessage(FAR_TOO_DEEP), surface="append")
    assert len(session.events) == 1
    assert [decode_event(encode_event(event)) for event in session.events] == list(session.events)


def test_a_chunk_holding_a_deep_block_is_refused_typed_when_encoded_or_dumped() -> None:
    """R4.5: a chunk appended directly (the unchecked chunk path) fails typed, never overflowing."""
    assert chunk_problem(BlockEnd(0, FAR_TOO_DEEP)) == (
        f"block-end.block is nested too deeply: {LIMIT}"
    )
    assert chunk_problem(BlockEnd(0, DEEPEST)) is None
    session = _open()
    seq = session.append_chunk(1, 1, BlockEnd(0, FAR_TOO_DEEP))
    problem = f"assistant/chunk event seq {seq} is not storable: block-end.block"
    with pytest.raises(InvalidJsonError, match=problem):
        encode_event(session.events[seq])
    with pytest.raises(InvalidJsonError, match=problem):
        session.dump()


# -- R11.2: load refuses the same depth, naming where -----------------------------------------------


def _results_json(count: int) -> str:
    """The stored JSON of ``_results(count)``, built as text (json.dumps itself would overflow)."""
    text = '{"type":"text","text":"x"}'
    for _ in range(count):
        text = '{"type":"tool-result","tool_call_id":"c","content":[' + text + '],"is_error":false}'
    return text


def _user_line(block: str) -> str:
    return (
        '{"seq":1,"type":"user/message","time":1,"data":{"content":['
        + block
        + ']},"surface_op":"append"}'
    )


def _header_line(block: str) -> str:
    return (
        '{"seq":1,"type":"request/header","time":1,"data":{"reason":"initial","header":'
        '{"config":{"model":"m"},"message_prefix":[{"role":"user","content":[' + block + "]}]}}}"
    )


def _chunk_line(block: str) -> str:
    return (
        '{"seq":1,"type":"assistant/chunk","time":1,"data":{"turn":1,"step":1,'
        '"chunk":{"type":"block-end","index":0,"block":' + block + "}}}"
    )


@pytest.mark.parametrize(
    ("line", "where"),
    [
        (_user_line, r"\$\.data\.content\[0\]"),
        (_header_line, r"\$\.data\.header\.message_prefix\[0\]\.content\[0\]"),
        (_chunk_line, r"\$\.data\..*block"),
    ],
    ids=["user-message", "header-prefix", "chunk"],
)
@pytest.mark.parametrize("results", [MAX_JSON_DEPTH // 2, 300], ids=["201-levels", "601-levels"])
def test_load_refuses_a_block_past_the_limit_naming_the_field(
    line: Callable[[str], str], where: str, results: int
) -> None:
    """R11.2, R4.5: the depth append refuses is refused on load, named, before cattrs recurses."""
    text = line(_results_json(results))
    assert json.loads(text), "the stored line is JSON the stdlib parses"
    with pytest.raises(CorruptSessionError, match=f"nested too deeply: {LIMIT} @ {where}$"):
        decode_event(text)


def test_load_accepts_the_deepest_block_append_accepts() -> None:
    """R11.2: one level less than refused loads as the event append built."""
    event = _open().append(UserMessage(_results(MAX_JSON_DEPTH // 2 - 1)), surface="append")
    assert decode_event(_user_line(_results_json(MAX_JSON_DEPTH // 2 - 1))) == event._replace(
        time=1
    )


class DeepBlockModel:
    """Streams one block that closes as a tool result nested far past the limit."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        yield BlockStart(0, "tool-result")
        yield BlockEnd(0, FAR_TOO_DEEP)
        yield Finish(STOP)


async def test_a_model_streaming_a_deep_block_fails_its_step_and_the_log_stays_loadable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R4.5, R7.44: the chunk is refused before it is logged; every logged event reloads."""
    async with runtime(DeepBlockModel()) as rt:
        agent = await rt.create_agent("a", OPTIONS)
        result = await agent.ask("hello")
        events = agent.session.events
        assert (result.reason.kind, result.reason.code) == ("error", "MALFORMED_CHUNK")
        assert f"block-end.block is nested too deeply: {LIMIT}" in (result.reason.message or "")
        assert [event.data.chunk for event in of_type(events, "assistant/chunk")] == [
            BlockStart(0, "tool-result")
        ]
        for event in events:
            assert decode_event(encode_event(event)) == event
        check_session_invariants(events)
