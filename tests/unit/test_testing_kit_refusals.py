"""The test kit refuses mistaken scripts, steps and wrappers at once, with errors that say why."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import pytest
import trio

import retinue
from retinue import AgentOptions
from retinue.providers import Finish, ModelRequest, Stop, TextDelta
from retinue.stores import MemoryStore
from retinue.testing import (
    CallTools,
    CutAtMaxTokens,
    DelegatingStore,
    FinishAborted,
    FinishWithError,
    Hang,
    RaiseMidStream,
    RawChunks,
    RebuildCheckedModel,
    Reply,
    ScriptedModel,
    Step,
    ToolCallSpec,
)
from tests.helpers import city_lookup


def test_raise_mid_stream_refuses_an_exception_class() -> None:
    """R10.3: a class is not an error a stream can raise: it is refused when the step is built,
    naming the fix, not left to fail with an unrelated error when played."""
    with pytest.raises(
        TypeError, match=r"error must be an exception instance.*ValueError\(\.\.\.\)"
    ):
        RaiseMidStream(ValueError)  # type: ignore[arg-type]


def test_raise_mid_stream_refuses_a_value_that_is_not_an_exception() -> None:
    """R10.3: only an exception can be raised from the stream."""
    with pytest.raises(TypeError, match=r"error must be an exception instance, got 'oops'"):
        RaiseMidStream("oops")  # type: ignore[arg-type]


@pytest.mark.parametrize("error", [StopAsyncIteration("end"), StopIteration("end")])
def test_raise_mid_stream_refuses_an_error_a_stream_cannot_raise(error: BaseException) -> None:
    """R10.3: raised in a stream, these reach the loop as RuntimeError (PEP 479, PEP 525), so the
    step is refused when built rather than raising "async generator raised ..." at each play.
    """
    with pytest.raises(TypeError, match=r"cannot be a Stop(Async)?Iteration.*RawChunks"):
        RaiseMidStream(error)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"name": "lookup", "arguments": {"city": "Oslo"}}, r"arguments must be .*JSON text.*dict"),
        ({"name": "lookup", "arguments": None}, r"arguments must be .*JSON text.*NoneType"),
        ({"name": None}, r"name must be a str, got None"),
        ({"name": "lookup", "id": 7}, r"id must be a str or None, got 7"),
    ],
)
def test_tool_call_spec_refuses_fields_of_the_wrong_type_naming_them(
    fields: dict[str, Any], match: str
) -> None:
    """R10.2: tool arguments are raw JSON text; a dict, like any field of the wrong type, is a
    TypeError naming the field, not "unhashable type: 'slice'"."""
    with pytest.raises(TypeError, match=match):
        ToolCallSpec(**fields)


def test_call_tools_refuses_a_single_spec_not_in_a_list() -> None:
    """A lone spec is refused saying to put it in a list, not as "'ToolCallSpec' object is not
    iterable"."""
    with pytest.raises(TypeError, match=r"a list of ToolCallSpec.*got a single ToolCallSpec"):
        CallTools(ToolCallSpec("lookup"))  # type: ignore[arg-type]


@pytest.mark.parametrize("call", [("lookup", "{}"), "lookup"])
def test_call_tools_refuses_calls_that_are_not_specs(call: object) -> None:
    """A tuple or a bare name is refused naming the call's position, not with an AttributeError on
    ``arguments``."""
    with pytest.raises(TypeError, match=r"call 0 must be a ToolCallSpec, got a (tuple|str)"):
        CallTools([call])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"call 0 must be a ToolCallSpec"):
        CutAtMaxTokens("cut", tool_calls=[call])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("chunks", "match"),
    [
        (Finish(Stop()), r"got a single Finish: wrap it, \[Finish\("),
        ("finish", r"chunks are a list of stream chunks, got 'finish'"),
    ],
)
def test_raw_chunks_refuses_a_lone_chunk_or_a_str(chunks: object, match: str) -> None:
    """R10.2: a lone chunk is refused naming the fix, not as "'Finish' object is not iterable"; a
    str is not a list of chunks, and is not taken as its characters, each a chunk the loop would
    refuse mid-turn.
    """
    with pytest.raises(TypeError, match=match):
        RawChunks(chunks)  # type: ignore[arg-type]


def test_raw_chunks_still_streams_items_that_are_not_chunks() -> None:
    """Protocol edge cases: the items themselves are taken as given."""
    items: list[object] = [TextDelta(0, "x"), "not a chunk"]
    assert list(RawChunks(items).chunks) == items  # type: ignore[arg-type]


def test_scripted_model_refuses_a_single_step_as_its_script() -> None:
    """A lone step is refused saying to put it in a list, not as "'Reply' object is not
    iterable"."""
    with pytest.raises(TypeError, match=r"the script is a single step.*\[Reply\(\.\.\.\)\]"):
        ScriptedModel(Reply("hi"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"the script for model 'a' is a single step"):
        ScriptedModel({"a": Reply("hi")})  # type: ignore[dict-item]


def test_scripted_model_refuses_a_script_that_is_neither_steps_nor_a_function() -> None:
    """``None`` is refused naming what a script is, not as "'NoneType' object is not iterable"."""
    with pytest.raises(TypeError, match=r"the script must be a sequence of steps.*got None"):
        ScriptedModel(None)  # type: ignore[arg-type]


async def _async_step(request: ModelRequest) -> Step:
    await trio.lowlevel.checkpoint()
    return Reply("never played")


class _AsyncCall:
    async def __call__(self, request: ModelRequest) -> Step:
        return await _async_step(request)


@pytest.mark.parametrize("script", [_async_step, functools.partial(_async_step), _AsyncCall()])
def test_scripted_model_refuses_an_async_step_function(script: object) -> None:
    """A step function is called per stream, synchronously: an async one is refused when built,
    rather than failing every stream with "got a coroutine" and a "coroutine was never awaited"
    warning.
    """
    with pytest.raises(TypeError, match=r"the script is an async function"):
        ScriptedModel(script)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"the script for model 'm' is an async function"):
        ScriptedModel({"m": script})  # type: ignore[dict-item]


async def _async_sessions(session_id: str) -> None:
    await trio.lowlevel.checkpoint()


@pytest.mark.parametrize(
    ("model", "sessions", "match"),
    [
        (ScriptedModel, None, r"needs a model adapter \(with stream\(\)\), got <class"),
        (ScriptedModel([Reply("x")]), _async_sessions, r"sessions are called synchronously"),
        (ScriptedModel([Reply("x")]), {"a": None}, r"sessions must be callable"),
    ],
)
def test_rebuild_checked_model_refuses_what_would_fail_every_request(
    model: object, sessions: object, match: str
) -> None:
    """R8.9: a class for the model, or an async or uncallable session lookup, is refused when built,
    rather than ending every request's turn with an error naming neither ("missing 1 required
    positional argument", "'coroutine' object has no attribute 'events'").
    """
    with pytest.raises(TypeError, match=match):
        RebuildCheckedModel(model, sessions)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "runtime", [None, "rt", ScriptedModel([Reply("x")])], ids=["none", "str", "a-model"]
)
def test_rebuild_checked_model_follows_only_a_runtime(runtime: object) -> None:
    """R8.9: ``follow`` takes the runtime whose agents' requests it checks; anything else is refused
    when given, rather than ending every later request's turn with "'NoneType' object has no
    attribute 'agents'" while ``failures`` stays empty and nothing is checked."""
    model = RebuildCheckedModel(ScriptedModel([Reply("x")]))
    with pytest.raises(TypeError, match=r"^follow needs a Runtime \(from open_runtime\), got "):
        model.follow(runtime)  # type: ignore[arg-type]


def _no_session(_session_id: str) -> Any:
    """A session lookup breaking its contract: what it returns is no session."""
    return "not a session"


async def test_rebuild_checked_model_names_a_session_lookup_returning_no_session(
    autojump_clock: trio.abc.Clock,
) -> None:
    """R8.9: a ``sessions`` lookup that returns something other than a Session or None fails
    the request naming the lookup and what it returned, not with "'str' object has no
    attribute 'events'" from the check it was handed to."""
    model = RebuildCheckedModel(ScriptedModel([Reply("x")]), _no_session)
    with trio.fail_after(10):
        async with retinue.open_runtime(models=model) as rt:
            agent = await rt.create_agent("writer", AgentOptions(model="scripted"))
            result = await agent.ask("hello")
    assert result.reason.kind == "error"
    assert result.reason.message == (
        f"sessions({agent.id!r}) must return a Session or None, got 'not a session'"
    )


def test_tool_loop_refuses_a_bare_string_of_tool_names() -> None:
    """A str is a sequence of names, so it is refused: "lookup" would call tools "l" and "o", and
    the turn still complete."""
    with pytest.raises(TypeError, match=r"tool_names must be a list of names.*\['lookup'\]"):
        ScriptedModel.tool_loop("lookup")


def test_tool_loop_refuses_arguments_for_tools_it_never_calls() -> None:
    """Arguments for a tool the loop never calls (a misspelt key) are refused, not ignored while the
    tool gets ``{}`` and the turn still completes."""
    with pytest.raises(ValueError, match=r"arguments names tools not in tool_names: \['lokup'\]"):
        ScriptedModel.tool_loop(["lookup"], arguments={"lokup": '{"city": "Oslo"}'})


async def test_tool_loop_with_arguments_for_its_tools_runs_them() -> None:
    """R9.18: the loop still calls each named tool with its arguments, then answers."""
    ran: list[str] = []
    lookup = city_lookup(ran)
    model = ScriptedModel.tool_loop(
        ["lookup"], calls_per_step=1, arguments={"lookup": '{"city": "Oslo"}'}
    )
    with trio.fail_after(10):
        async with retinue.open_runtime(models=model, tools=[lookup]) as rt:
            agent = await rt.create_agent("writer", AgentOptions(model="scripted"))
            result = await agent.ask("weather?")
    assert result.reason.kind == "completed"
    assert ran == ["Oslo"]


class _OwnInit(DelegatingStore):
    """A subclass whose ``__init__`` does not call DelegatingStore's."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner


def test_delegating_store_without_its_store_raises_attribute_error() -> None:
    """A missing ``store`` is an AttributeError naming the wrapper, even under ``hasattr``, not a
    recursion until RecursionError."""
    wrapper = _OwnInit(object())
    assert not hasattr(wrapper, "durable")
    with pytest.raises(AttributeError, match=r"_OwnInit has no wrapped store"):
        _ = wrapper.path


def test_delegating_store_refuses_a_store_class() -> None:
    """A class where its instance was meant is refused when wrapped, as open_runtime refuses one,
    not left for the runtime to fail on entering it with "__aenter__() missing 1 required positional
    argument: 'self'".
    """
    with pytest.raises(
        TypeError, match=r"not a store class: DelegatingStore\(MemoryStore\(\.\.\.\)\)"
    ):
        DelegatingStore(MemoryStore)  # type: ignore[arg-type]


def test_delegating_store_can_be_copied() -> None:
    """``copy.copy`` builds the copy before its ``store`` is set; copying does not recurse, and the
    copy wraps the same store."""
    inner = object()
    copied = copy.copy(DelegatingStore(inner))  # type: ignore[arg-type]
    assert copied.store is inner


CALL = [ToolCallSpec("lookup")]


@pytest.mark.parametrize(
    ("kind", "fields", "match"),
    [
        (Reply, {"text": None}, r"Reply\.text must be a str, got None"),
        (Reply, {"text": 42}, r"Reply\.text must be a str, got 42"),
        (Reply, {"text": "hi", "usage": {"input_tokens": 3}}, r"Reply\.usage must be a .*Usage"),
        (CallTools, {"calls": CALL, "text": 5}, r"CallTools\.text must be a str or None"),
        (CallTools, {"calls": CALL, "usage": 3}, r"CallTools\.usage must be a .*Usage"),
        (CutAtMaxTokens, {"text": 7}, r"CutAtMaxTokens\.text must be a str"),
        (FinishWithError, {"message": 500}, r"FinishWithError\.message must be a str, got 500"),
        (FinishWithError, {"message": "down", "code": 503}, r"FinishWithError\.code must be a str"),
        (FinishAborted, {"text": 1}, r"FinishAborted\.text must be a str"),
        (RaiseMidStream, {"error": ValueError(), "text": 1}, r"RaiseMidStream\.text must be a str"),
        (Hang, {"text": ["par", "tial"]}, r"Hang\.text must be a str"),
    ],
)
def test_steps_refuse_texts_and_usage_of_the_wrong_type_when_built(
    kind: Callable[..., object], fields: dict[str, Any], match: str
) -> None:
    """R10.2: a step's text, error message and usage are refused where the script is written, not
    with "object of type 'int' has no len()", nor accepted to end the turn blaming the model for a
    malformed chunk.
    """
    with pytest.raises(TypeError, match=match):
        kind(**fields)
