"""The tool execution pipeline end to end: every stage and failure path of R9.1-R9.4 and R6.8."""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
import typing
from collections.abc import Callable
from typing import Literal, cast

import attrs
import pytest
import trio
import trio.testing

from retinue._content import HookContext, Text, content_text
from retinue._errors import HookError, ToolError
from retinue._handle import AgentHandle
from retinue._lossless import FrozenDict, JsonValue
from retinue.hooks import Accept, Allow, Ask, Block, Deny, HookBus
from retinue.session import ToolErrorInfo
from retinue.tools import (
    PreparedCall,
    Tool,
    ToolContext,
    ToolExecution,
    ToolExecutionResult,
    ToolOutput,
    ToolRegistry,
    tool,
)
from retinue.tools._body import TOOL_THREADS
from tests.helpers import Next, unchecked

# Sync tool bodies run in worker threads, where the virtual clock would fire tool timeouts
# spuriously, so most tests here run on the real clock: bound each one in real time. The
# slowest takes about 0.2 s; the two with their own 10 s deadlines stay inside this bound.
pytestmark = pytest.mark.timeout(30)


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


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


def setup(*tools: Tool) -> tuple[HookBus, ToolRegistry]:
    hooks = HookBus()
    return hooks, ToolRegistry(hooks, [echo, *tools])


def call(
    name: str = "echo",
    arguments: JsonValue = None,
    *,
    call_id: str = "call-1",
    agent_id: str | None = None,
    agent: object = None,
) -> ToolExecution:
    args: JsonValue = {"text": "hi"} if arguments is None else arguments
    handle = cast("AgentHandle | None", agent)  # an opaque stand-in: the registry only passes it on
    return ToolExecution(call_id, name, args, agent=handle, agent_id=agent_id)


def text_of(result: ToolExecutionResult) -> str:
    return content_text(result.content)


def failed(message: str, code: str | None = None, name: str = "ToolError") -> dict[str, object]:
    """The observable shape of an error result."""
    return {
        "text": f"Error: {message}",
        "is_error": True,
        "error": None if code is None else ToolErrorInfo(name, code),
    }


def shape(result: ToolExecutionResult) -> dict[str, object]:
    return {"text": text_of(result), "is_error": result.is_error, "error": result.error}


@attrs.define
class Seams:
    """Records which seams saw a call."""

    pre: list[ToolExecution] = attrs.Factory(list)
    post: list[ToolExecutionResult] = attrs.Factory(list)
    results: list[tuple[ToolExecution, ToolExecutionResult]] = attrs.Factory(list)

    def attach(self, hooks: HookBus) -> Seams:
        async def pre(execution: ToolExecution, call_next: Next) -> object:
            self.pre.append(execution)
            return await call_next()

        async def post(
            execution: ToolExecution, result: ToolExecutionResult, call_next: Next
        ) -> object:
            self.post.append(result)
            return await call_next()

        hooks.on("tools/pre-execute", pre)
        hooks.on("tools/post-execute", post)
        hooks.on("tools/result", lambda e, r: self.results.append((e, r)))
        return self


# -- stage 1: lossless arguments -------------------------------------------------


async def test_prepare_refuses_arguments_that_are_not_lossless_json() -> None:
    """R9.3: non-JSON arguments give a final error result; pre- and post-execute are skipped."""
    hooks, registry = setup()
    seams = Seams().attach(hooks)
    prepared = await registry.prepare(call(arguments={"text": {1, 2}}))  # type: ignore[dict-item]
    assert not prepared.needs_dispatch
    assert not prepared.needs_post_execute
    result = await registry.execute(call(arguments={"text": {1, 2}}))  # type: ignore[dict-item]
    assert shape(result) == failed(
        'invalid arguments for tool "echo": text is not JSON: set', "INVALID_ARGUMENTS"
    )
    assert seams.pre == []
    assert seams.post == []
    assert len(seams.results) == 1


async def test_prepare_freezes_arguments_before_any_seam_sees_them() -> None:
    """R9.1: listeners get one immutable execution with frozen arguments and a fresh token."""
    hooks, registry = setup()
    seen: list[ToolExecution] = []

    async def wrap(execution: ToolExecution, call_next: Next) -> object:
        seen.append(execution)
        return await call_next()

    seams = Seams().attach(hooks)
    hooks.on("tools/execute", wrap)
    raw: dict[str, object] = {"text": "hi"}
    first = await registry.execute(ToolExecution("call-1", "echo", raw))  # type: ignore[arg-type]
    raw["text"] = "mutated later"
    assert text_of(first) == "hi"
    (execution,) = seams.pre
    assert isinstance(execution.arguments, FrozenDict)
    with pytest.raises(TypeError):
        execution.arguments["text"] = "changed"
    assert seen == [execution]
    assert seams.results[0][0] == execution
    assert execution.token
    assert execution.token != call().token


# -- stage 2: tools/pre-execute ---------------------------------------------------


async def test_pre_execute_deny_skips_the_body_but_not_post_execute() -> None:
    """R9.3: a denial is an ``Error: <reason>`` result that still goes through post-execute."""
    ran: list[str] = []

    @tool
    def write(path: str) -> str:
        """Write."""
        ran.append(path)
        return "written"

    hooks, registry = setup(write)
    hooks.on("tools/pre-execute", lambda *_: Deny("read-only session"))
    seams = Seams().attach(hooks)
    prepared = await registry.prepare(call("write", {"path": "/x"}))
    assert not prepared.needs_dispatch
    assert prepared.needs_post_execute
    result = await registry.execute(call("write", {"path": "/x"}))
    assert shape(result) == failed("read-only session")
    assert ran == []
    assert [text_of(r) for r in seams.post] == ["Error: read-only session"]


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        (Ask(), 'tool "echo" requires approval (not yet supported)'),
        (Ask("a human must approve echo"), "a human must approve echo"),
    ],
)
async def test_pre_execute_ask_degrades_to_deny_without_an_approval_service(
    decision: Ask, message: str
) -> None:
    """R6.8: ``ask`` without an approval service is a denial with its reason or the default."""
    hooks, registry = setup()
    hooks.on("tools/pre-execute", lambda *_: decision)
    seams = Seams().attach(hooks)
    result = await registry.execute(call())
    assert shape(result) == failed(message)
    assert len(seams.post) == 1


async def test_pre_execute_raising_listener_gives_a_final_error_result() -> None:
    """R9.3: a raising pre-execute listener gives a final error result; post-execute is skipped."""
    hooks, registry = setup()

    def explode(execution: ToolExecution, call_next: Next) -> object:
        raise RuntimeError("policy store offline")

    hooks.on("tools/pre-execute", explode)
    seams = Seams().attach(hooks)
    prepared = await registry.prepare(call())
    assert not prepared.needs_dispatch
    assert not prepared.needs_post_execute
    result = await registry.execute(call())
    assert shape(result) == failed("policy store offline")
    assert seams.post == []
    assert [r for _, r in seams.results] == [result]


async def test_pre_execute_non_decision_gives_a_final_error_result() -> None:
    """R9.3: a pre-execute listener returning something other than a decision fails the call."""
    hooks, registry = setup()
    hooks.on("tools/pre-execute", lambda *_: "yes")
    seams = Seams().attach(hooks)
    result = await registry.execute(call())
    assert shape(result) == failed(
        "tools/pre-execute returned an invalid decision: str", "INVALID_HOOK_RESULT", "HookError"
    )
    assert seams.post == []


async def test_pre_execute_listeners_chain_outermost_first() -> None:
    """R6.3: the first listener is outermost and sees the inner listener's decision via next()."""
    hooks, registry = setup()
    outer_saw: list[object] = []

    async def outer(execution: ToolExecution, call_next: Next) -> object:
        decision = await call_next()
        outer_saw.append(decision)
        return decision

    hooks.on("tools/pre-execute", outer)
    hooks.on("tools/pre-execute", lambda *_: Deny("inner says no"))
    result = await registry.execute(call())
    assert outer_saw == [Deny("inner says no")]
    assert text_of(result) == "Error: inner says no"


async def test_pre_execute_short_circuit_allow_runs_the_body() -> None:
    """R6.3: a listener may allow without calling next; later listeners are then not reached."""
    hooks, registry = setup()
    hooks.on("tools/pre-execute", lambda *_: Allow())
    hooks.on("tools/pre-execute", lambda *_: Deny("unreachable"))
    result = await registry.execute(call())
    assert shape(result) == {"text": "hi", "is_error": False, "error": None}


async def test_seams_dispatch_with_the_calling_agents_scope() -> None:
    """R6.5: a listener scoped to an agent hears only that agent's calls, on every tool seam."""
    hooks, registry = setup()
    heard: list[tuple[str, str | None]] = []

    async def pre(execution: ToolExecution, call_next: Next) -> object:
        heard.append(("pre", execution.agent_id))
        return await call_next()

    async def wrap(execution: ToolExecution, call_next: Next) -> object:
        heard.append(("execute", execution.agent_id))
        return await call_next()

    async def post(execution: ToolExecution, result: object, call_next: Next) -> object:
        heard.append(("post", execution.agent_id))
        return await call_next()

    hooks.on("tools/pre-execute", pre, agent="a")
    hooks.on("tools/execute", wrap, agent="a")
    hooks.on("tools/post-execute", post, agent="a")
    hooks.on("tools/result", lambda e, _r: heard.append(("result", e.agent_id)), agent="a")
    await registry.execute(call(agent_id="b"))
    await registry.execute(call())
    assert heard == []
    await registry.execute(call(agent_id="a"))
    assert heard == [("pre", "a"), ("execute", "a"), ("post", "a"), ("result", "a")]


# -- stage 3: tools/execute and the body -----------------------------------------


async def test_dispatch_unknown_tool_is_a_coded_error() -> None:
    """R9.3: a name not in the caller's view gives ``UNKNOWN_TOOL``."""
    _, registry = setup()
    result = await registry.execute(call("nope", {}))
    assert shape(result) == failed('unknown tool "nope"', "UNKNOWN_TOOL")


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
    with the start of what it sent, rather than that it sent a string.
    """
    _, registry = setup()
    truncated = await registry.execute(call(arguments='{"text": "hi'))
    assert shape(truncated) == failed(
        """invalid arguments for tool "echo": arguments: not valid JSON: '{"text": "hi'""",
        "INVALID_ARGUMENTS",
    )
    long = await registry.execute(call(arguments='{"text": "' + "x" * 200))
    assert text_of(long).endswith(f"""not valid JSON: '{{"text": "{"x" * 70}'...""")
    # JSON text inside a JSON string (encoded twice) is valid JSON, but not an object.
    twice = await registry.execute(call(arguments='{"text": "hi"}'))
    assert text_of(twice).endswith("arguments: expected object, got string")


async def test_dispatch_tool_exception_becomes_an_error_result() -> None:
    """R9.2: a raising tool gives ``Error: <message>`` without a code."""

    @tool
    async def fragile() -> str:
        """Fail."""
        raise ValueError("disk is full")

    _, registry = setup(fragile)
    assert shape(await registry.execute(call("fragile", {}))) == failed("disk is full")


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (KeyError("Paris"), "KeyError: 'Paris'"),
        (IndexError("list index out of range"), "IndexError: list index out of range"),
        (RuntimeError(42), "RuntimeError: 42"),
        (ValueError("disk is full"), "disk is full"),
        (ValueError(), "ValueError"),
    ],
)
async def test_dispatch_error_message_names_the_type_when_the_message_is_a_bare_value(
    error: Exception, message: str
) -> None:
    """R9.2: a message that is only a key or a value (``KeyError('Paris')``) is led by the
    exception's type name; a message that stands alone is kept as it is.
    """

    @tool
    async def lookup() -> str:
        """Fail."""
        raise error

    _, registry = setup(lookup)
    assert shape(await registry.execute(call("lookup", {}))) == failed(message)


async def test_dispatch_sync_tool_exiting_becomes_an_error_result() -> None:
    """R9.2: a SystemExit from a tool body (argparse in a sync tool, say) is the call's error
    result; it used to escape ``execute`` and take the runtime down.
    """

    @tool
    def strict(count: int) -> str:
        """Refuse every count."""
        raise SystemExit(f"bad count {count}")

    _, registry = setup(strict)
    assert shape(await registry.execute(call("strict", {"count": 3}))) == failed("bad count 3")


class _Abandoned(BaseException):
    """A user's own BaseException subclass, raised by a body to give up."""


async def _abandon_in_a_nursery() -> str:
    async def give_up() -> None:
        await trio.lowlevel.checkpoint()
        raise _Abandoned("given up in a child")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(give_up)
    return "never"


@pytest.mark.parametrize("kind", ["async", "sync", "nursery"])
async def test_dispatch_tool_raising_its_own_base_exception_becomes_an_error_result(
    kind: str,
) -> None:
    """R9.2, R7.45: a BaseException subclass of the tool's own (not Ctrl-C, not a cancel),
    bare or from the body's nursery, is the call's error result; it escaped ``execute``
    and ended the runtime with every agent in it."""

    async def async_body() -> str:
        await trio.lowlevel.checkpoint()
        raise _Abandoned("given up")

    def sync_body() -> str:
        raise _Abandoned("given up")

    bodies: dict[str, Callable[[], object]] = {
        "async": async_body,
        "sync": sync_body,
        "nursery": _abandon_in_a_nursery,
    }
    quitter = Tool("quitter", "Give up.", {"type": "object"}, bodies[kind])
    _, registry = setup(quitter)
    result = await registry.execute(call("quitter", {}))
    message = "given up in a child" if kind == "nursery" else "given up"
    assert shape(result) == failed(message)


@pytest.mark.parametrize("nested", [False, True], ids=["bare", "in-a-group"])
async def test_dispatch_lets_ctrl_c_from_a_tool_body_through(*, nested: bool) -> None:
    """Ctrl-C landing in a body, bare or in its nursery's group, is no failure of the
    call: it goes on out of ``execute``, as trio has it."""

    async def interrupted() -> str:
        await trio.lowlevel.checkpoint()
        raise KeyboardInterrupt

    async def body() -> str:
        if not nested:
            return await interrupted()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(interrupted)
        return "never"

    _, registry = setup(Tool("stopped", "Be stopped.", {"type": "object"}, body))
    with pytest.RaisesGroup(KeyboardInterrupt, flatten_subgroups=True, allow_unwrapped=True):
        await registry.execute(call("stopped", {}))


async def test_dispatch_tool_error_keeps_its_code() -> None:
    """R9.2: a ToolError with a code becomes a coded error named after the exception type."""

    class QuotaError(ToolError):
        code: str | None = "QUOTA"

    @tool
    def limited(which: str) -> str:
        """Fail with a code."""
        if which == "plain":
            raise ToolError("no code here")
        if which == "sub":
            raise QuotaError("quota exhausted")
        raise ToolError("rate limited", code="RATE_LIMITED")

    _, registry = setup(limited)
    coded = await registry.execute(call("limited", {"which": "coded"}))
    assert shape(coded) == failed("rate limited", "RATE_LIMITED")
    sub = await registry.execute(call("limited", {"which": "sub"}))
    assert shape(sub) == failed("quota exhausted", "QUOTA", "QuotaError")
    plain = await registry.execute(call("limited", {"which": "plain"}))
    assert shape(plain) == failed("no code here")


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


async def test_dispatch_sync_tool_runs_in_a_worker_thread() -> None:
    """R9.7: a sync body runs in a worker thread so it never blocks the trio loop."""
    threads: list[int] = []

    @tool
    def blocking() -> str:
        """Block."""
        threads.append(threading.get_ident())
        return "done"

    _, registry = setup(blocking)
    result = await registry.execute(call("blocking", {}))
    assert text_of(result) == "done"
    assert len(threads) == 1
    assert threads[0] != threading.get_ident()


async def test_dispatch_async_tool_runs_in_the_calling_task() -> None:
    """R9.7: an async body is awaited in the trio task that dispatches it."""
    tasks: list[object] = []

    @tool
    async def inline() -> str:
        """Inline."""
        tasks.append(trio.lowlevel.current_task())
        return "done"

    _, registry = setup(inline)
    await registry.execute(call("inline", {}))
    assert tasks == [trio.lowlevel.current_task()]


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


async def test_dispatch_timeout_is_a_coded_error_on_the_virtual_clock(
    autojump_clock: object,
) -> None:
    """R9.7: a body running past its timeout is cancelled and the call fails with TOOL_TIMEOUT."""

    @tool(timeout=5)
    async def slow(seconds: float) -> str:
        """Sleep."""
        await trio.sleep(seconds)
        return "woke"

    _, registry = setup(slow)
    with trio.fail_after(60):
        start = trio.current_time()
        late = await registry.execute(call("slow", {"seconds": 100}))
        assert trio.current_time() - start == pytest.approx(5)
        in_time = await registry.execute(call("slow", {"seconds": 4}))
    assert shape(late) == failed('tool "slow" timed out after 5s', "TOOL_TIMEOUT")
    assert shape(in_time) == {"text": "woke", "is_error": False, "error": None}


async def test_dispatch_timeout_abandons_a_blocked_sync_tool(autojump_clock: object) -> None:
    """R9.7: a sync body past its timeout is abandoned in its thread; the call fails at once,
    and the abandoned thread holds no slot of trio's default thread pool.
    """
    release = threading.Event()

    @tool(timeout=2)
    def stuck() -> str:
        """Block on a thread event."""
        release.wait(10)
        return "late"

    _, registry = setup(stuck)
    try:
        with trio.fail_after(60):
            result = await registry.execute(call("stuck", {}))
        # Its thread runs on apart from trio's default pool, which the stores' threads use.
        assert trio.to_thread.current_default_thread_limiter().borrowed_tokens == 0
    finally:
        release.set()
    assert result.error == ToolErrorInfo("ToolError", "TOOL_TIMEOUT")


# The two tests below wait on real threads, so they run on the real clock: a virtual one
# would jump past every deadline while the threads work.


async def test_dispatch_timed_out_sync_bodies_give_back_their_thread_slots() -> None:
    """R9.7: a sync body abandoned at its timeout gives its worker-thread slot back though its
    thread runs on; as many hung bodies as there are slots starve no later sync tool.
    """
    release = threading.Event()

    @tool(timeout=0.05)
    def fetch() -> str:
        """Block like a request without a timeout."""
        release.wait(30)
        return "late"

    @tool(timeout=5)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    _, registry = setup(fetch, add)
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for index in range(TOOL_THREADS):
                    nursery.start_soon(registry.execute, call("fetch", {}, call_id=f"f{index}"))
            timed = await registry.execute(call("add", {"a": 1, "b": 2}))
            untimed = await registry.execute(call("echo", {"text": "hi"}))
    finally:
        release.set()
    assert shape(timed) == {"text": "3", "is_error": False, "error": None}
    assert text_of(untimed) == "hi"


async def test_dispatch_waiting_past_the_timeout_for_a_thread_slot_says_so() -> None:
    """R9.7: when every worker-thread slot is held by a running body, a call whose timeout
    passes before it gets one fails saying no thread was free: its body never ran.
    """
    release = threading.Event()

    @tool
    def busy() -> str:
        """Block until released."""
        release.wait(30)
        return "done"

    @tool(timeout=0.2)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    _, registry = setup(busy, add)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for index in range(TOOL_THREADS):
                nursery.start_soon(registry.execute, call("busy", {}, call_id=f"b{index}"))
            await trio.testing.wait_all_tasks_blocked()
            try:
                starved = await registry.execute(call("add", {"a": 1, "b": 2}))
            finally:
                release.set()
    assert shape(starved) == failed(
        'tool "add" did not run: no worker thread free within 0.2s', "TOOL_TIMEOUT"
    )


async def test_dispatch_outer_cancellation_propagates(autojump_clock: object) -> None:
    """R9.2: only cancellation escapes; it is never turned into a result or swallowed."""

    @tool
    async def forever() -> str:
        """Never return."""
        await trio.sleep_forever()

    hooks, registry = setup(forever)
    seams = Seams().attach(hooks)
    with trio.move_on_after(3) as scope:
        await registry.execute(call("forever", {}))
    assert scope.cancelled_caught
    assert seams.results == []
    assert seams.post == []


async def test_execute_wrapper_wraps_the_body() -> None:
    """R9.3: a ``tools/execute`` wrapper sees the body's result and may replace it."""
    hooks, registry = setup()
    seams = Seams().attach(hooks)

    async def annotate(execution: ToolExecution, call_next: Next) -> object:
        result = await call_next()
        assert isinstance(result, ToolExecutionResult)
        return attrs.evolve(result, content=(*result.content, Text(" (checked)")))

    hooks.on("tools/execute", annotate)
    result = await registry.execute(call())
    assert text_of(result) == "hi (checked)"
    assert [text_of(r) for r in seams.post] == ["hi (checked)"]


@pytest.mark.parametrize(
    ("wrapper", "expected"),
    [
        (
            lambda *_: (_ for _ in ()).throw(RuntimeError("sandbox crashed")),
            failed("sandbox crashed"),
        ),
        (
            lambda *_: ToolExecutionResult("other-call", "forged"),
            failed(
                'tools/execute returned a result for call "other-call", expected "call-1"',
                "INVALID_HOOK_RESULT",
                "HookError",
            ),
        ),
        (
            lambda *_: "not a result",
            failed(
                "tools/execute returned an invalid decision: str",
                "INVALID_HOOK_RESULT",
                "HookError",
            ),
        ),
    ],
    ids=["raises", "other-call-id", "non-result"],
)
async def test_execute_wrapper_failure_gives_a_final_error_result(
    wrapper: Callable[[ToolExecution, Next], object], expected: dict[str, object]
) -> None:
    """R9.3: a raising wrapper or one returning another call's result fails finally (no post)."""
    hooks, registry = setup()
    hooks.on("tools/execute", wrapper)
    seams = Seams().attach(hooks)
    result = await registry.execute(call())
    assert shape(result) == expected
    assert result.call_id == "call-1"
    assert seams.post == []
    assert [r for _, r in seams.results] == [result]


async def test_dispatch_bodies_overlap_while_stages_stay_separate(autojump_clock: object) -> None:
    """R9.16: prepare and finish are separate stages; only dispatch runs concurrently."""
    started = {"a": trio.Event(), "b": trio.Event()}

    @tool(parallel_safe=True)
    async def meet(me: str, other: str) -> str:
        """Wait for the other call to start too."""
        started[me].set()
        await started[other].wait()
        return me

    _, registry = setup(meet)
    prepared = [
        await registry.prepare(call("meet", {"me": "a", "other": "b"}, call_id="1")),
        await registry.prepare(call("meet", {"me": "b", "other": "a"}, call_id="2")),
    ]
    results: dict[str, ToolExecutionResult] = {}

    async def run(item: PreparedCall) -> None:
        results[item.execution.call_id] = await registry.dispatch(item)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for item in prepared:
                nursery.start_soon(run, item)
    finals = [await registry.finish(item, results[item.execution.call_id]) for item in prepared]
    assert [text_of(r) for r in finals] == ["a", "b"]


# -- stage 4: tools/post-execute ---------------------------------------------------


async def test_post_execute_accept_replaces_content_keeping_error_flags() -> None:
    """R9.3: ``Accept(content)`` replaces the content but keeps ``is_error`` and ``error``."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Accept("tool is not available here"))
    result = await registry.execute(call("missing", {}))
    assert shape(result) == {
        "text": "tool is not available here",
        "is_error": True,
        "error": ToolErrorInfo("ToolError", "UNKNOWN_TOOL"),
    }


async def test_post_execute_accept_without_content_keeps_the_result() -> None:
    """R9.3: the default ``Accept()`` leaves the dispatched result unchanged."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Accept())
    assert shape(await registry.execute(call())) == {"text": "hi", "is_error": False, "error": None}


async def test_post_execute_block_turns_the_result_into_an_error() -> None:
    """R6.9: ``Block(feedback)`` makes the result an error whose content is the feedback."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Block(feedback="output redacted"))
    result = await registry.execute(call())
    assert (text_of(result), result.is_error, result.call_id) == ("output redacted", True, "call-1")


async def test_post_execute_block_without_feedback_reports_its_reason() -> None:
    """R6.9: a Block carrying only a reason shows ``Error: <reason>``."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Block("contains secrets"))
    assert shape(await registry.execute(call())) == failed("contains secrets")


async def test_post_execute_block_with_nothing_to_show_is_refused() -> None:
    """R6.9: a Block needs feedback (or a reason): an empty one is a listener's mistake,
    reported as such rather than shown to the model as a bare ``Error:``."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Block())
    result = await registry.execute(call())
    assert result.is_error
    assert "Block with neither feedback nor a reason" in text_of(result)


@pytest.mark.parametrize("empty", [[], ()], ids=["list", "tuple"])
async def test_post_execute_block_with_empty_feedback_and_no_reason_is_refused(
    autojump_clock: trio.testing.MockClock, empty: list[object] | tuple[object, ...]
) -> None:
    """R6.9: empty feedback counts as none: with no reason either, the Block is refused
    rather than shown to the model as an empty error."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Block(feedback=empty))  # type: ignore[arg-type]
    result = await registry.execute(call())
    assert result.is_error
    assert "Block with neither feedback nor a reason" in text_of(result)


@pytest.mark.parametrize("empty", [[], ()], ids=["list", "tuple"])
async def test_post_execute_block_with_empty_feedback_shows_its_reason(
    autojump_clock: trio.testing.MockClock, empty: list[object] | tuple[object, ...]
) -> None:
    """R6.9: empty feedback does not win over a reason: the model sees ``Error: <reason>``."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Block("contains secrets", feedback=empty))  # type: ignore[arg-type]
    assert shape(await registry.execute(call())) == failed("contains secrets")


def _marking_tool() -> tuple[Tool, list[str]]:
    """A ``mark(text)`` tool and the list of texts its body ran with."""
    ran: list[str] = []

    @tool
    def mark(text: str) -> str:
        """Mark."""
        ran.append(text)
        return text

    return mark, ran


@pytest.mark.parametrize(
    "decision",
    [Allow(content="rewritten"), Allow(additional_context=HookContext("note"))],
    ids=["content", "context"],
)
async def test_pre_execute_allow_carrying_what_it_cannot_apply_is_refused(
    decision: Allow,
) -> None:
    """R6.8: pre-execute offers a bare allow; content or context on it would be dropped
    silently, so the call fails with an error that says so and the body never runs."""
    mark, ran = _marking_tool()
    hooks, registry = setup(mark)
    hooks.on("tools/pre-execute", lambda *_: decision)
    result = await registry.execute(call("mark"))
    assert result.is_error
    assert "cannot be rewritten before it runs" in text_of(result)
    assert ran == []


async def test_a_wrapper_calling_next_twice_does_not_run_the_body_twice() -> None:
    """R6.3: ``next`` runs the rest of the chain once; a second call is an error."""
    mark, ran = _marking_tool()

    async def twice(_execution: ToolExecution, call_next: Next) -> object:
        await call_next()
        return await call_next()

    hooks, registry = setup(mark)
    hooks.on("tools/execute", twice)
    result = await registry.execute(call("mark"))
    assert ran == ["hi"]
    assert result.is_error
    assert "called next() more than once" in text_of(result)


async def test_a_wrapper_keeping_next_cannot_run_the_body_after_its_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R6.3: ``next`` runs the rest of the chain only while the listener's call lasts;
    a kept ``next`` is refused, a ``next()`` made in time but left unawaited fails the
    call and is closed, and the tool body never runs outside its call."""
    mark, ran = _marking_tool()
    kept: list[Next] = []
    made: list[typing.Any] = []

    def short_circuit(execution: ToolExecution, call_next: Next) -> ToolExecutionResult:
        kept.append(call_next)
        return ToolExecutionResult(execution.call_id, "skipped")

    hooks, registry = setup(mark)
    hooks.on("tools/execute", short_circuit)
    result = await registry.execute(call("mark"))
    assert (text_of(result), result.is_error) == ("skipped", False)
    with pytest.raises(
        HookError, match=r"tools/execute listener called next\(\) after the listener returned"
    ):
        await kept[0]()
    assert ran == []

    def make_then_return(execution: ToolExecution, call_next: Next) -> ToolExecutionResult:
        made.append(call_next())
        return ToolExecutionResult(execution.call_id, "skipped")

    hooks, registry = setup(mark)
    hooks.on("tools/execute", make_then_return)
    result = await registry.execute(call("mark"))
    assert result.is_error
    assert "called next() but never awaited what it returned" in text_of(result)
    with pytest.raises(RuntimeError, match="cannot reuse already awaited coroutine"):
        await made[0]
    assert ran == []


@pytest.mark.parametrize(
    "decision",
    [
        Accept(additional_context=HookContext("remember: cached")),
        Block("no", additional_context=HookContext("remember: cached")),
    ],
    ids=["accept", "block"],
)
async def test_post_execute_additional_context_rides_on_the_result(decision: object) -> None:
    """R9.4: additional context reaches the loop on the result, never in its content."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: decision)
    result = await registry.execute(call())
    assert result.additional_context == HookContext("remember: cached")
    assert "remember" not in text_of(result)


async def test_post_execute_sees_the_dispatched_result() -> None:
    """R9.3: post-execute listeners get the execution and the dispatched result."""
    hooks, registry = setup()
    seams = Seams().attach(hooks)
    await registry.execute(call())
    assert [(r.call_id, text_of(r)) for r in seams.post] == [("call-1", "hi")]


@pytest.mark.parametrize(
    ("listener", "expected"),
    [
        (
            lambda *_: (_ for _ in ()).throw(KeyError("audit")),
            failed("KeyError: 'audit'"),
        ),
        (
            lambda *_: Deny("wrong seam"),
            failed(
                "tools/post-execute returned an invalid decision: Deny",
                "INVALID_HOOK_RESULT",
                "HookError",
            ),
        ),
    ],
    ids=["raises", "invalid-decision"],
)
async def test_post_execute_failure_becomes_an_error_result(
    listener: Callable[..., object], expected: dict[str, object]
) -> None:
    """R9.3: a raising post-execute listener (or a non-decision) turns the call into an error."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", listener)
    seams = Seams().attach(hooks)
    result = await registry.execute(call())
    assert shape(result) == expected
    assert [r for _, r in seams.results] == [result]


# -- stage 5: validation and tools/result ------------------------------------------


async def test_finish_refuses_a_result_that_is_not_lossless_json() -> None:
    """R9.3: the final result is validated as lossless JSON; a bad one becomes an error."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda *_: Accept(unchecked(Text, float("nan"))))  # type: ignore[arg-type]
    result = await registry.execute(call())
    assert shape(result) == failed(
        "content[0].text is a non-finite number (nan)", "INVALID_JSON", "InvalidJsonError"
    )


async def test_result_observers_get_every_final_result() -> None:
    """R9.3: ``tools/result`` observers see the execution and the final result of each call."""
    hooks, registry = setup()
    seams = Seams().attach(hooks)
    hooks.on("tools/post-execute", lambda *_: Accept("replaced"))
    ok = await registry.execute(call(call_id="1"))
    unknown = await registry.execute(call("nope", {}, call_id="2"))
    assert [(e.call_id, r) for e, r in seams.results] == [("1", ok), ("2", unknown)]
    assert text_of(ok) == "replaced"


async def test_result_observer_failures_are_contained(caplog: pytest.LogCaptureFixture) -> None:
    """R9.3: a raising ``tools/result`` observer is logged and ignored."""
    hooks, registry = setup()
    calls: list[str] = []

    def broken(execution: ToolExecution, result: ToolExecutionResult) -> None:
        calls.append("broken")
        raise RuntimeError("observer bug")

    hooks.on("tools/result", broken)
    hooks.on("tools/result", lambda *_: calls.append("after"))
    with caplog.at_level(logging.ERROR, logger="retinue.hooks"):
        result = await registry.execute(call())
    assert text_of(result) == "hi"
    assert calls == ["broken", "after"]
    logged = [r for r in caplog.records if r.name == "retinue.hooks" and r.exc_info]
    assert [(r.levelno, r.getMessage()) for r in logged] == [
        (logging.ERROR, "listener failed in tools/result (contained)")
    ]
    error = logged[0].exc_info[1]  # type: ignore[index]
    assert isinstance(error, RuntimeError)
    assert str(error) == "observer bug"


# -- the whole contract --------------------------------------------------------------


def raising(where: str) -> Callable[..., object]:
    def listener(*_args: object) -> object:
        raise RuntimeError(f"{where} failed")

    return listener


@pytest.mark.parametrize(
    ("seam", "message"),
    [
        ("tools/pre-execute", "tools/pre-execute failed"),
        ("tools/execute", "tools/execute failed"),
        ("tools/post-execute", "tools/post-execute failed"),
        ("tools/result", None),
    ],
)
async def test_execute_never_raises_for_seam_failures(seam: str, message: str | None) -> None:
    """R9.2: whichever seam fails, execute returns a result instead of raising."""
    hooks, registry = setup()
    hooks.on(seam, raising(seam))
    result = await registry.execute(call())
    if message is None:
        assert shape(result) == {"text": "hi", "is_error": False, "error": None}
    else:
        assert shape(result) == failed(message)


async def test_staged_pipeline_equals_execute() -> None:
    """R9.15: prepare, dispatch and finish run the same pipeline as execute."""
    hooks, registry = setup()
    hooks.on("tools/post-execute", lambda _e, r, _next: Accept(f"[{text_of(r)}]"))
    prepared = await registry.prepare(call())
    assert prepared.needs_dispatch
    assert prepared.needs_post_execute
    dispatched = await registry.dispatch(prepared)
    assert text_of(dispatched) == "hi"
    staged = await registry.finish(prepared, dispatched)
    assert staged == await registry.execute(call())
    assert text_of(staged) == "[hi]"


async def test_dispatch_of_a_prepared_result_returns_it_unchanged() -> None:
    """R9.15: a call with a pre-produced result is not dispatched again."""
    hooks, registry = setup()
    hooks.on("tools/pre-execute", lambda *_: Deny("no"))
    prepared = await registry.prepare(call())
    assert prepared.result is not None
    assert await registry.dispatch(prepared) is prepared.result


async def test_pipeline_prepare_and_dispatch_are_checkpoints() -> None:
    """R9.1: prepare and dispatch always checkpoint; finish yields only for post-execute listeners.

    Committing results in model order adds no scheduling point when no policy
    listens, which keeps the scheduler's commit cursor cheap.
    """
    hooks, registry = setup()
    with trio.testing.assert_checkpoints():
        prepared = await registry.prepare(call("nope", {}))
    with trio.testing.assert_checkpoints():
        result = await registry.dispatch(prepared)
    with trio.testing.assert_no_checkpoints():
        await registry.finish(prepared, result)
    hooks.on("tools/post-execute", lambda _execution, _result, proceed: proceed())
    with trio.testing.assert_checkpoints():
        await registry.finish(prepared, result)
