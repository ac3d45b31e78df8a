"""A hand-written tool's schema must fit its body's parameters (R9.7): a schema whose every
call the body would refuse is refused when the tool is built."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import pytest

from retinue.tools import Tool, ToolContext, tool
from tests.unit._tool_kit import execute

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}


class Request:
    def __init__(self, city: str) -> None:
        self.city = city


def _takes_the_model(request: Request) -> str:
    return request.city


def _takes_town(town: str, days: int = 1) -> str:
    return f"{town} {days}"


def test_a_required_property_the_body_cannot_take_is_refused_when_built() -> None:
    """R9.7: every call passes each required property by name; a body that takes none of
    that name (a pydantic model's schema over a body taking the model itself, say) would
    fail every call with an unexpected keyword, so the tool is refused, naming both."""
    for body in (_takes_the_model, _takes_town):
        name = body.__name__
        with pytest.raises(
            ValueError,
            match=rf"^parameters\.required\[0\]: \"city\" names no parameter of {name}: ",
        ):
            Tool("weather", "Weather.", WEATHER, body)


def _two(city: str, unit: str) -> str:
    return f"{city} {unit}"


def test_a_required_parameter_the_schema_never_gives_is_refused_when_built() -> None:
    """R9.7: a parameter of the body without a default, which the schema neither lists nor
    lets the model add (``additionalProperties: false``), is missing from every call."""
    closed = {**WEATHER, "additionalProperties": False}
    with pytest.raises(
        ValueError, match=re.escape("parameters: _two requires 'unit', which the schema")
    ):
        Tool("weather", "Weather.", closed, _two)


def _open(city: str, **extra: object) -> str:
    return f"{city} {sorted(extra)}"


def _city(city: str, days: int = 1, *, ctx: ToolContext) -> str:
    return f"{city} {days} {ctx.call_id}"


def _positional(city: str, /, days: int = 1) -> str:
    return f"{city} {days}"


def _unit_later(city: str, unit: str) -> str:
    return f"{city} {unit}"


def _passes_on(fn: Callable[..., object]) -> object:
    @functools.wraps(fn)
    def wrapper(**kwargs: object) -> object:
        kwargs["town"] = kwargs.pop("city")
        return fn(**kwargs)

    return wrapper


@pytest.mark.parametrize(
    ("body", "context_parameter"),
    [
        (_open, None),
        (_city, "ctx"),
        (_positional, None),
        # Open to more properties: the model may give unit as one.
        (_unit_later, None),
        # A wrapper renaming what it takes: its own parameters are what a call reaches.
        (_passes_on(_takes_town), None),
        (functools.partial(_positional, days=3), None),
    ],
)
async def test_bodies_that_can_take_the_calls_still_build(
    body: object, context_parameter: str | None
) -> None:
    """R9.7: ``**kwargs``, a positional-only parameter (filled by name), the context
    parameter, an open schema and a wrapper's own signature all fit; calls run."""
    weather = Tool("weather", "Weather.", WEATHER, body, context_parameter=context_parameter)  # type: ignore[arg-type]
    text, error = await execute(
        weather, {"city": "Oslo", "unit": "c"} if body is _unit_later else {"city": "Oslo"}
    )
    assert error is None, text
    assert text.startswith("Oslo")


def test_a_decorated_tools_schema_fits_its_body_written_out_by_hand() -> None:
    """R9.7: the schema ``@tool`` reads from a signature fits that signature, given to
    ``Tool`` by hand (which checks the fit, where ``@tool`` binds the arguments itself)."""

    @tool
    def plan(city: str, /, days: int, *, ctx: ToolContext, **extra: int) -> str:
        """Plan."""
        return city

    by_hand = Tool("plan", "Plan.", plan.parameters, plan.fn, context_parameter="ctx")
    assert by_hand.schema.parameters == plan.schema.parameters


async def _positional_only_open(server: str, /, name: str, **arguments: object) -> str:
    return f"{server} {name} {sorted(arguments)}"


async def _call_remote(server: str, name: str, **arguments: object) -> str:
    return f"{server} {name} {sorted(arguments)}"


def test_a_property_a_partial_gives_by_position_is_refused() -> None:
    """R9.7: a body that is a partial giving a parameter by position (a proxy's shape:
    server and tool name bound first) cannot take a property of that name as well: every
    call giving it would fail with "multiple values", so the tool is refused when built."""
    body = functools.partial(_call_remote, "srv", "create_entity")
    taken = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    assert Tool("create", "Create.", taken, body).name == "create"
    clashing = {"type": "object", "properties": {"name": {"type": "string"}}}
    with pytest.raises(ValueError, match=r'^parameters\.properties\.name: "name" is given by'):
        Tool("create", "Create.", clashing, body)


async def test_a_positional_only_parameter_a_partial_fills_leaves_its_name_to_kwargs() -> None:
    """R9.7: a partial filling a positional-only parameter of a body taking ``**kwargs``
    leaves that name free: a property of that name lands in ``**kwargs``, so the tool
    builds and its calls run."""
    server_and_name = {
        "type": "object",
        "properties": {"server": {"type": "string"}, "name": {"type": "string"}},
    }
    body = functools.partial(_positional_only_open, "srv")
    create = Tool("create", "Create.", server_and_name, body)
    text, error = await execute(create, {"server": "other", "name": "n"})
    assert (text, error) == ("srv n ['server']", None)
