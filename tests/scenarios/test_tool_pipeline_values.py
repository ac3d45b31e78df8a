"""Dispatch's values: which tool a call resolves to, the arguments its body receives, and how
its return value becomes the result (R9.1-R9.3, R9.7).
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Literal, cast

import attrs
import pytest
import trio

from retinue._content import Text
from retinue._handle import AgentHandle
from retinue._lossless import JsonValue
from retinue.hooks import Ask
from retinue.session import ToolErrorInfo
from retinue.tools import Tool, ToolContext, ToolOutput, tool
from tests.scenarios._tool_pipeline_kit import Seams, call, failed, setup, shape, text_of

# Sync tool bodies run in worker threads, where the virtual clock would fire tool timeouts
# spuriously, so most tests here run on the real clock: bound each one in real time. The
# slowest takes about 0.2 s.
pytestmark = pytest.mark.timeout(30)


class Unit(enum.Enum):
    C = "c"
    F = "f"


class Tier(enum.Enum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Span:
    start: int
    end: int = 0


# -- stage 3: tools/execute and the body -----------------------------------------


async def test_dispatch_unknown_tool_is_a_coded_error() -> None:
    """R9.3: a name not in the caller's view gives ``UNKNOWN_TOOL``."""
    _, registry = setup()
    result = await registry.execute(call("nope", {}))
    assert shape(result) == failed('unknown tool "nope"', "UNKNOWN_TOOL")


LONG_NAME = "n" * 1_000_000


async def test_a_long_unknown_tool_name_is_named_by_its_start_and_length() -> None:
    """R9.3: a name longer than a provider lets a tool's be (64 characters) is not echoed to
    the model whole: its first 60 characters are, then its length."""
    _, registry = setup()
    result = await registry.execute(call(LONG_NAME, {}))
    named = f'unknown tool "{"n" * 60}..." (1000000 characters)'
    assert shape(result) == failed(named, "UNKNOWN_TOOL")
    longest = "n" * 64
    result = await registry.execute(call(longest, {}))
    assert shape(result) == failed(f'unknown tool "{longest}"', "UNKNOWN_TOOL")


async def test_a_long_unknown_tool_name_asked_for_approval_is_cut_short() -> None:
    """R6.8: the denial of an ``Ask`` without a reason names a long unknown tool by its
    start and length too."""
    hooks, registry = setup()
    hooks.on("tools/pre-execute", lambda *_: Ask())
    result = await registry.execute(call(LONG_NAME, {}))
    named = f'tool "{"n" * 60}..." (1000000 characters) requires approval (not yet supported)'
    assert shape(result) == failed(named)


async def test_dispatch_resolves_the_tool_in_the_callers_view() -> None:
    """R9.3: a scoped tool shadows the global one for its agent and is invisible to others."""

    @tool(name="echo")
    def loud(text: str) -> str:
        """Shout."""
        return text.upper()

    @tool
    def secret() -> str:
        """Private."""
        return "s3cret"

    _, registry = setup()
    registry.add(loud, agent="a")
    registry.add(secret, agent="a")
    assert text_of(await registry.execute(call(agent_id="a"))) == "HI"
    assert text_of(await registry.execute(call(agent_id="b"))) == "hi"
    assert text_of(await registry.execute(call("secret", {}, agent_id="a"))) == "s3cret"
    hidden = await registry.execute(call("secret", {}, agent_id="b"))
    assert hidden.error == ToolErrorInfo("ToolError", "UNKNOWN_TOOL")


async def test_dispatch_invalid_arguments_never_reach_the_body() -> None:
    """R9.3: arguments are validated against the schema before the body; failures are coded."""
    ran: list[int] = []

    @tool
    def count(n: int) -> int:
        """Count."""
        ran.append(n)
        return n

    hooks, registry = setup(count)
    seams = Seams().attach(hooks)
    result = await registry.execute(call("count", {"n": "three"}))
    assert shape(result) == failed(
        'invalid arguments for tool "count": n: expected integer, got string', "INVALID_ARGUMENTS"
    )
    assert ran == []
    assert len(seams.post) == 1


async def test_dispatch_raw_string_arguments_are_reported_as_invalid_json() -> None:
    """R9.6: invalid JSON arrives as the raw string; the model is told its JSON is invalid,
    with what it sent (of a long text, where it breaks), rather than that it sent a string.
    """
    _, registry = setup()
    truncated = await registry.execute(call(arguments='{"text": "hi'))
    assert shape(truncated) == failed(
        """invalid arguments for tool "echo": arguments: not valid JSON: '{"text": "hi'""",
        "INVALID_ARGUMENTS",
    )
    long = await registry.execute(call(arguments='{"text": "' + "x" * 200))
    assert text_of(long).endswith(
        f"""not valid JSON: broken at character 9 of 210 (Unterminated string starting at): \
'{{"text": "{"x" * 70}'..."""
    )
    # JSON text inside a JSON string (encoded twice) is valid JSON, but not an object.
    twice = await registry.execute(call(arguments='{"text": "hi"}'))
    assert text_of(twice).endswith("arguments: expected object, got string")


async def test_long_invalid_json_arguments_are_shown_where_they_break() -> None:
    """R9.6: of arguments too long to show whole, the model is shown where its JSON breaks
    (an unescaped quote deep in a long string, say) and why, with the text around that
    point, not their start alone, which may hold no mistake.
    """
    _, registry = setup()
    start = '{"text": "' + "a" * 150 + ' say "'
    rest = 'hi" to them"}'
    result = await registry.execute(call(arguments=start + rest))
    around = (start + rest)[-80:]  # the 80 characters up to the end, the point among them
    assert text_of(result) == (
        'Error: invalid arguments for tool "echo": arguments: not valid JSON: broken at '
        f"character {len(start)} of {len(start + rest)} (Expecting ',' delimiter): ...{around!r}"
    )


@pytest.mark.parametrize(
    ("value", "content", "meta"),
    [
        ("plain", (Text("plain"),), None),
        (Text("block"), (Text("block"),), None),
        ([Text("a"), Text("b")], (Text("a"), Text("b")), None),
        ({"k": [1, 2.5, None], "é": True}, (Text('{"k":[1,2.5,null],"é":true}'),), None),
        (42, (Text("42"),), None),
        (None, (Text("null"),), None),
        ([], (Text("[]"),), None),
        (ToolOutput("with meta", {"rows": 3}), (Text("with meta"),), {"rows": 3}),
    ],
)
async def test_dispatch_return_value_becomes_the_content(
    value: object, content: tuple[object, ...], meta: object
) -> None:
    """R9.3: a str or blocks are the content, JSON data is compact JSON text, ToolOutput adds meta."""
    fixed = Tool("fixed", "Returns a fixed value.", {"type": "object"}, lambda: value)
    _, registry = setup(fixed)
    result = await registry.execute(call("fixed", {}))
    assert (result.content, result.meta, result.is_error) == (content, meta, False)


@pytest.mark.parametrize("value", [object(), float("nan"), [Text("a"), 1], {1: "x"}])
async def test_dispatch_unconvertible_return_value_is_an_error_result(value: object) -> None:
    """R9.2: a return value that is neither content nor lossless JSON becomes an error result."""
    odd = Tool("odd", "Returns an odd value.", {"type": "object"}, lambda: value)
    _, registry = setup(odd)
    result = await registry.execute(call("odd", {}))
    assert result.is_error
    assert text_of(result).startswith("Error: ")


@pytest.mark.parametrize(
    ("meta", "problem"),
    [
        ({"rows": float("nan")}, "meta.rows is a non-finite number (nan)"),
        ({1: "row"}, "meta has a non-string key 1"),
    ],
)
async def test_a_returned_meta_that_is_not_json_is_named_in_the_error(
    meta: object, problem: str
) -> None:
    """R9.3: a ToolOutput whose meta is no lossless JSON fails the call naming meta, not a
    bare path (``rows is ...``) that could be any value of the return."""

    @tool
    def report() -> ToolOutput:
        """Report with meta."""
        return ToolOutput("report", meta)

    _, registry = setup(report)
    with trio.fail_after(5):
        result = await registry.execute(call("report", {}))
    assert shape(result) == failed(problem, "INVALID_JSON", "InvalidJsonError")


async def test_dispatch_coerces_arguments_to_the_annotated_types() -> None:
    """R9.7: enums, attrs records, tuples and integral floats arrive as the annotated types."""
    received: list[object] = []

    @tool
    async def measure(
        unit: Unit,
        span: Span,
        tags: tuple[str, ...],
        count: int,
        scale: Literal[Unit.C, Unit.F],
        flag: Literal[1, True, "f"],
    ) -> str:
        """Measure."""
        received.extend([unit, span, tags, count, scale, flag])
        return "ok"

    _, registry = setup(measure)
    arguments: JsonValue = {
        "unit": "f",
        "span": {"start": 1},
        "tags": ["x"],
        "count": 2.0,
        "scale": "c",
        "flag": "f",
    }
    result = await registry.execute(call("measure", arguments))
    assert text_of(result) == "ok"
    assert received == [Unit.F, Span(1), ("x",), 2, Unit.C, "f"]
    assert type(received[3]) is int


@dataclasses.dataclass
class Extent:
    start: int
    labels: list[str] = dataclasses.field(default_factory=list)


Celsius = typing.NewType("Celsius", float)


async def test_dispatch_builds_a_dataclass_and_a_newtype_from_the_arguments() -> None:
    """R9.7: a dataclass parameter arrives built from its JSON object (its factory filling
    what was left out), a ``NewType`` as its supertype's value; a field of the wrong type
    is refused naming its path."""
    received: list[object] = []

    @tool
    async def chart(extent: Extent, low: Celsius) -> str:
        """Chart."""
        received.extend([extent, low])
        return "ok"

    _, registry = setup(chart)
    result = await registry.execute(call("chart", {"extent": {"start": 2}, "low": -1.5}))
    assert text_of(result) == "ok"
    assert received == [Extent(2, []), -1.5]
    refused = await registry.execute(call("chart", {"extent": {"start": "x"}, "low": 0}))
    assert refused.is_error
    assert "extent.start" in text_of(refused)


async def test_dispatch_gives_an_int_literal_for_an_integral_float() -> None:
    """R9.7: ``Literal[1, 2]`` receives the int ``2`` for JSON's ``2.0``, as an int hint does."""
    received: list[object] = []

    @tool
    async def pick(level: Literal[1, 2]) -> str:
        """Pick a level."""
        received.append(level)
        return "ok"

    _, registry = setup(pick)
    assert text_of(await registry.execute(call("pick", {"level": 2.0}))) == "ok"
    assert received == [2]
    assert type(received[0]) is int


async def test_dispatch_gives_an_int_valued_member_for_an_integral_float() -> None:
    """R9.7: ``Literal[Level.LOW, Level.HIGH]`` receives ``Level.HIGH`` for JSON's ``2.0``, as a
    plain ``Level`` hint does; a boolean never stands for a member valued 1.
    """

    received: list[object] = []

    @tool
    async def pick(level: Literal[Tier.LOW, Tier.HIGH], plain: Tier = Tier.LOW) -> str:
        """Pick a level."""
        received.extend([level, plain])
        return "ok"

    _, registry = setup(pick)
    assert text_of(await registry.execute(call("pick", {"level": 2.0, "plain": 2.0}))) == "ok"
    assert received == [Tier.HIGH, Tier.HIGH]
    assert pick.bind is not None
    assert pick.bind({"level": True}) == {"level": True}


async def test_a_returned_str_or_int_subclass_is_stored_as_plain_json() -> None:
    """R9.2, R1.6: an enum member returned by a tool becomes the plain value it stands for."""

    class Mood(enum.StrEnum):
        GOOD = "good"

    class Level(enum.IntEnum):
        HIGH = 3

    @tool
    async def mood() -> str:
        """Report."""
        return Mood.GOOD

    @tool
    async def level() -> object:
        """Report."""
        return {"level": Level.HIGH, "mood": Mood.GOOD}

    _, registry = setup(mood, level)
    text = (await registry.execute(call("mood", {}))).content[0]
    assert isinstance(text, Text)
    assert type(text.text) is str
    assert text_of(await registry.execute(call("level", {}))) == '{"level":3,"mood":"good"}'


async def test_a_returned_block_subclass_is_an_error_result_naming_it() -> None:
    """R9.2, R1.6: block classes are final; a tool's instance of a runtime subclass is an
    error result that names it, never a result the log keeps and a later check refuses."""

    class Shouting(Text):  # type: ignore[misc]  # the runtime subclass under test
        pass

    @tool
    async def shout() -> list[Text]:
        """Shout."""
        return [Text("fine"), Shouting("LOUD")]

    _, registry = setup(shout)
    result = await registry.execute(call("shout", {}))
    assert result.is_error
    assert "content[1] is an instance of " in text_of(result)
    assert "Shouting, a subclass of Text: block classes are final" in text_of(result)
    assert [type(block) for block in result.content] == [Text]


async def test_dispatch_injects_the_tool_context() -> None:
    """R9.1: a tool declaring a ToolContext parameter receives the call id and the agent
    (an async body the handle itself; a sync body's stand-in is pinned in test_tool_threads).
    """
    contexts: list[ToolContext] = []
    handle = cast("AgentHandle", object())

    @tool
    async def whoami(ctx: ToolContext) -> str:
        """Who called."""
        contexts.append(ctx)
        await trio.lowlevel.checkpoint()
        return "me"

    _, registry = setup(whoami)
    await registry.execute(call("whoami", {}, call_id="c-7", agent=handle, agent_id="a"))
    assert contexts == [ToolContext("c-7", handle, "a")]
