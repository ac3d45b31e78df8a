"""A hand-written tool's context parameter must be one its body takes (R9.7)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest

from retinue.tools import Tool, ToolContext

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


async def greet(name: str) -> str:
    return f"hello {name}"


def _passes_on(fn: Callable[..., object]) -> Callable[..., object]:
    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> object:
        return fn(*args, **kwargs)

    return wrapper


def test_a_context_parameter_the_body_does_not_take_is_refused_when_built() -> None:
    """R9.7: each call passes the ToolContext under ``context_parameter``: naming no
    parameter of the body, every call would fail with an unexpected keyword, so the tool
    is refused when built, naming the parameter and the body.
    """
    with pytest.raises(ValueError, match=r"^context_parameter 'ctx' names no parameter of greet"):
        Tool("greet", "Greet someone.", SCHEMA, greet, context_parameter="ctx")


def _whoami(name: str, ctx: ToolContext) -> str:
    return f"{name} in {ctx.call_id}"


def _by_position(ctx: ToolContext, /, name: str) -> str:
    return f"{name} in {ctx.call_id}"


def _open(name: str, **extra: object) -> str:
    return f"{name} with {sorted(extra)}"


def _named(name: str) -> str:
    return name


@functools.wraps(_named)
def _wrapped(name: str, *, ctx: ToolContext) -> str:
    # A decorator's wrapper takes the context itself: its own signature is the body's,
    # not that of the function it wraps (which inspect.signature follows by default).
    return f"{_named(name)} in {ctx.call_id}"


@pytest.mark.parametrize(
    "body",
    [_whoami, _by_position, _open, functools.partial(_whoami), _wrapped, _passes_on(_named), min],
    ids=[
        "keyword",
        "positional-only",
        "kwargs",
        "partial",
        "wrapper",
        "wrapper-passing-kwargs",
        "no-signature-to-read",
    ],
)
def test_a_context_parameter_the_body_may_take_is_built(body: object) -> None:
    """R9.7: a parameter of that name, positional-only too, or ``**kwargs`` takes the
    ToolContext, a decorator's wrapper judged by its own signature (one passing ``**kwargs``
    on may take the context out of them); a body whose signature cannot be read is given
    the benefit of the doubt.
    """
    built = Tool("whoami", "Who am I.", SCHEMA, body, context_parameter="ctx")  # type: ignore[arg-type]
    assert built.context_parameter == "ctx"
