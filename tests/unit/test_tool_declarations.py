"""What ``@tool`` accepts and how it classifies a body (R9.7)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TypedDict

import attrs
import pytest

from retinue._lossless import thaw_json
from retinue.tools import Tool, ToolContext, tool


def _logged(fn: Callable[..., object]) -> Callable[..., object]:
    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> object:
        return fn(*args, **kwargs)

    return wrapper


async def lookup(prefix: str, query: str) -> str:
    """Look up."""
    return prefix + query


class Service:
    """A service called as the tool."""

    async def __call__(self, query: str) -> str:
        return query


def sync_lookup(query: str) -> str:
    """Look up in a thread."""
    return query


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(_logged(lookup), id="sync functools.wraps wrapper"),
        pytest.param(functools.partial(Service()), id="partial of an async __call__"),
        pytest.param(functools.partial(_logged(lookup), "p:"), id="partial of a wrapper"),
    ],
)
def test_a_body_behind_partials_and_wrappers_is_async(body: Callable[..., object]) -> None:
    """R9.7: classification looks through partials and ``__wrapped__`` links: these return a
    coroutine, which a worker thread could never await.
    """
    assert tool(name="t")(body).is_async


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(sync_lookup, id="function"),
        pytest.param(_logged(sync_lookup), id="sync wrapper"),
        pytest.param(functools.partial(_logged(sync_lookup)), id="partial of a sync wrapper"),
    ],
)
def test_a_sync_body_behind_wrappers_stays_sync(body: Callable[..., object]) -> None:
    """R9.7: a sync function, wrapped or not, still runs in a worker thread."""
    assert not tool(name="t")(body).is_async


def numbers(count: int) -> Iterator[int]:
    """Count."""
    yield from range(count)


async def stream(count: int) -> AsyncIterator[int]:
    """Count slowly."""
    for index in range(count):
        yield index


class Streamer:
    """A callable object whose call is a generator."""

    def __call__(self, count: int) -> Iterator[int]:
        yield from range(count)


@pytest.mark.parametrize(
    ("body", "name"),
    [
        (numbers, "numbers"),
        (stream, "stream"),
        (functools.partial(numbers), "numbers"),
        (Streamer(), "Streamer"),
    ],
)
def test_a_generator_function_is_refused_at_decoration(
    body: Callable[..., object], name: str
) -> None:
    """R9.7: a (async) generator function gives an iterator, never a result: refused at
    decoration with a TypeError naming it, not failed on every call.
    """
    with pytest.raises(TypeError, match="is a generator function") as info:
        tool(name="t")(body)
    assert name in str(info.value)


def test_a_tool_built_directly_refuses_a_generator_function() -> None:
    """R9.7: a hand-written Tool refuses a generator body too."""
    with pytest.raises(TypeError, match="numbers is a generator function"):
        Tool("t", "Count.", {"type": "object"}, numbers)


class Contexts(TypedDict):
    ctx: ToolContext


@attrs.frozen
class Holder:
    ctx: ToolContext


def in_list(ctxs: list[ToolContext]) -> None:
    """List."""


def in_optional_list(ctxs: list[ToolContext] | None = None) -> None:
    """Optional list."""


def in_mapping(ctxs: dict[str, ToolContext]) -> None:
    """Mapping."""


def in_typed_dict(holder: Contexts) -> None:
    """Typed dict."""


def in_record(holder: Holder) -> None:
    """Record."""


@pytest.mark.parametrize("body", [in_list, in_optional_list, in_mapping, in_typed_dict, in_record])
def test_a_tool_context_inside_another_type_is_refused(body: Callable[..., object]) -> None:
    """R9.7: only a parameter of its own is an injected ToolContext; inside a container or a
    record it would be advertised to the model, which could forge one.
    """
    with pytest.raises(TypeError, match="ToolContext is injected only as a parameter of its own"):
        tool(body)


def test_a_keyword_bound_by_a_partial_is_left_out_of_the_schema() -> None:
    """R9.7: a partial's bound keyword is neither advertised (its value would leak) nor
    accepted from the model; positional and keyword binding both remove the parameter.
    """

    def search(index: str, query: str, api_key: str, limit: int = 5) -> str:
        """Search."""
        return query

    bound = tool(name="search")(functools.partial(search, "docs", api_key="sk-SECRET"))
    schema = thaw_json(bound.parameters)
    assert schema == {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}},
        "required": ["query"],
        "additionalProperties": False,
    }
    nested = tool(name="short")(functools.partial(bound.fn, limit=2))
    assert list(thaw_json(nested.parameters)["properties"]) == ["query"]  # type: ignore[call-overload,index]


def test_a_hand_written_context_parameter_the_schema_also_offers_is_refused() -> None:
    """R9.7: the model's value for a property named like the context parameter would be
    replaced by the ``ToolContext`` without a word: refused when the tool is built.
    """

    def whoami(ctx: ToolContext, name: str) -> str:
        return f"{name} in {ctx.call_id}"

    offered = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "ctx": {"type": "string"}},
    }
    with pytest.raises(ValueError, match=r"^context_parameter 'ctx' is also a property"):
        Tool("whoami", "Who am I.", offered, whoami, context_parameter="ctx")
    hidden = {"type": "object", "properties": {"name": {"type": "string"}}}
    assert Tool("whoami", "", hidden, whoami, context_parameter="ctx").context_parameter == "ctx"
