"""A ``functools.wraps`` wrapper shows the signature of the function it wraps; ``@tool``
reads the schema from it, and refuses a wrapper whose own parameters could not take the
call (R9.7).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import pytest

from retinue._lossless import JsonValue
from retinue.tools import Tool, ToolContext, tool
from tests.unit._tool_kit import execute


def forecast(city: str, days: int = 1) -> str:
    """Forecast a city's weather."""
    return f"{city} for {days}"


def _takes_context(fn: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(fn)
    def wrapper(*args: object, ctx: ToolContext, **kwargs: object) -> str:
        return f"{fn(*args, **kwargs)} in {ctx.call_id}"

    return wrapper


def _renamed(fn: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(fn)
    def wrapper(place: str) -> str:
        return fn(place)

    return wrapper


@pytest.mark.parametrize(
    ("wrap", "why"),
    [
        (_takes_context, "missing a required argument: 'ctx'"),
        (_renamed, "missing a required argument: 'place'"),
    ],
)
def test_a_wrapper_whose_own_parameters_refuse_every_call_is_refused_when_decorated(
    wrap: Callable[[Callable[..., str]], Callable[..., str]], why: str
) -> None:
    """R9.7: ``functools.wraps`` shows the wrapped function's signature (and copies its
    annotations over the wrapper's): a required parameter the wrapper adds is passed by
    no call, so each would fail; the decorator refuses it, naming what is missing.
    """
    with pytest.raises(TypeError, match=r"^forecast: its wrapper takes \(") as caught:
        tool(wrap(forecast))
    assert why in str(caught.value)
    assert "__signature__" in str(caught.value)


def _shows_context(fn: Callable[..., str]) -> Callable[..., str]:
    wrapper = _takes_context(fn)
    shown = inspect.signature(fn)
    context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=ToolContext)
    wrapper.__signature__ = shown.replace(  # type: ignore[attr-defined]
        parameters=[*shown.parameters.values(), context]
    )
    return wrapper


def _adds_an_option(fn: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(fn)
    def wrapper(*args: object, loud: bool = False, **kwargs: object) -> str:
        said = fn(*args, **kwargs)
        return said.upper() if loud else said

    return wrapper


@pytest.mark.parametrize(
    ("wrap", "said"),
    [(_shows_context, "Oslo for 1 in c1"), (_adds_an_option, "Oslo for 1")],
)
async def test_a_wrapper_taking_what_it_shows_runs(
    wrap: Callable[[Callable[..., str]], Callable[..., str]], said: str
) -> None:
    """R9.7: a wrapper that shows the context parameter it takes (its ``__signature__``) is
    given the ToolContext; one that adds an optional parameter is called without it."""
    assert await execute(tool(wrap(forecast)), {"city": "Oslo"}) == (said, None)


@functools.singledispatch
def describe(value: int | str) -> str:
    return f"something: {value!r}"


@describe.register
def _(value: int) -> str:
    return f"a number: {value}"


@describe.register
def _(value: str) -> str:
    return f"a text: {value}"


@pytest.mark.parametrize(("value", "said"), [(3, "a number: 3"), ("three", "a text: three")])
async def test_a_singledispatch_function_dispatches_on_its_first_argument(
    value: int | str, said: str
) -> None:
    """R9.7: ``functools.singledispatch`` picks its implementation by the class of its first
    positional argument: passed by position, each call reaches the one for its type."""
    assert await execute(tool(describe), {"value": value}) == (said, None)


@functools.singledispatch
def shout(value: int | str = 0, *, upper: bool = False) -> str:
    return f"something: {value!r}"


@shout.register
def _(value: int, *, upper: bool = False) -> str:
    return f"number {value}"


@shout.register
def _(value: str, *, upper: bool = False) -> str:
    return value.upper() if upper else value


@functools.singledispatch
def whisper(value: int | str = 0, /) -> str:
    return f"something: {value!r}"


@whisper.register
def _(value: int, /) -> str:
    return f"number {value}"


@pytest.mark.parametrize(
    ("made", "arguments", "said"),
    [
        (tool(shout), {}, "number 0"),
        (tool(whisper), {}, "number 0"),
        (tool(name="loud")(functools.partial(shout, upper=True)), {"value": "abc"}, "ABC"),
    ],
)
async def test_a_singledispatch_function_dispatches_on_its_default_and_through_a_partial(
    made: Tool, arguments: JsonValue, said: str
) -> None:
    """R9.7: the argument dispatched on is passed when omitted too, as its default, and a
    partial of such a function is called so: no call fails for giving the function no
    positional argument to dispatch on."""
    assert await execute(made, arguments) == (said, None)


def _by_keyword(fn: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(fn)
    def wrapper(**kwargs: object) -> str:
        return fn(kwargs.pop("value", 0), **kwargs)

    return wrapper


def _keyword_only(fn: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(fn)
    def wrapper(*, value: int | str = 0, upper: bool = False) -> str:
        return fn(value, upper=upper)

    return wrapper


def _passing_on(fn: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> str:
        return fn(*args, **kwargs)

    return wrapper


@pytest.mark.parametrize(
    ("wrap", "arguments", "said"),
    [
        (_by_keyword, {"value": "abc", "upper": True}, "ABC"),
        (_keyword_only, {"value": 3}, "number 3"),
        (_keyword_only, {}, "number 0"),
        (_passing_on, {"value": "abc"}, "abc"),
        (_passing_on, {}, "number 0"),
    ],
)
async def test_a_wrapper_of_a_singledispatch_function_is_called_as_its_own_parameters_take(
    wrap: Callable[[Callable[..., str]], Callable[..., str]], arguments: JsonValue, said: str
) -> None:
    """R9.7: ``functools.wraps`` copies the dispatcher's ``registry`` onto its wrapper; one
    taking positional arguments gets the argument dispatched on by position, to pass on,
    and one taking it only by name gets it by name, so no call of that one fails for being
    given a positional argument."""
    assert await execute(tool(wrap(shout)), arguments) == (said, None)


@pytest.mark.parametrize(
    "bound",
    [
        functools.partial(shout, value=3),
        functools.partial(functools.partial(shout, upper=True), value="abc"),
        functools.partial(_passing_on(shout), value=3),
    ],
)
def test_a_partial_binding_by_name_the_argument_dispatched_on_is_refused_when_built(
    bound: Callable[..., str],
) -> None:
    """R9.7: a partial giving a singledispatch function (or a wrapper passing its positional
    arguments on) the argument it dispatches on by name leaves it nothing to dispatch on, and
    fails on its own at every call: refused when built, naming the tool and the argument,
    rather than built into a tool whose every call fails."""
    with pytest.raises(
        TypeError, match=r"^tool 'fixed': functools\.partial binds 'value' by name, the "
    ):
        tool(name="fixed")(bound)


async def test_a_partial_binding_by_name_what_a_wrapper_takes_by_name_runs() -> None:
    """R9.7: a wrapper of a singledispatch function taking its arguments by name passes the
    argument on itself: a partial binding it by name is called as any other."""
    bound = functools.partial(_by_keyword(shout), value="abc")
    assert await execute(tool(name="fixed")(bound), {"upper": True}) == ("ABC", None)


def _named(fn: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(fn)
    def wrapper(value: int | str = 0, upper: bool = False) -> str:
        return fn(value, upper=upper)

    return wrapper


async def test_a_partial_binding_by_name_what_a_wrapper_names_among_its_own_runs() -> None:
    """R9.7: a wrapper of a singledispatch function whose own parameters name the argument
    dispatched on takes it by name and passes it on by position: a partial binding it by
    name works as a tool as it does called alone, not refused as a partial of the function
    itself."""
    bound = functools.partial(_named(shout), value="abc")
    assert bound(upper=True) == "ABC"
    assert await execute(tool(name="fixed")(bound), {"upper": True}) == ("ABC", None)


class _Formatter:
    @functools.singledispatchmethod
    def render(self, value: int) -> str:
        return f"{self!r} renders {value}"


def test_a_bound_singledispatchmethod_is_refused_saying_what_it_is() -> None:
    """R9.7: bound to its instance, a ``functools.singledispatchmethod`` is a plain function
    showing its method's ``self``, which the model would fill: refused when decorated,
    naming it for what it is, not asking for the bound method it already is."""
    with pytest.raises(
        TypeError, match=r"^_Formatter\.render is a functools\.singledispatchmethod"
    ):
        tool(_Formatter().render)


class _Counted:
    """Counts the calls of the function it wraps."""

    def __init__(self, fn: Callable[..., str]) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.calls = 0

    def __call__(self, *args: object, **kwargs: object) -> str:
        """Call the wrapped function."""
        self.calls += 1
        return self.fn(*args, **kwargs)


async def test_a_callable_object_wrapping_a_function_is_read_as_that_function() -> None:
    """R9.7: ``functools.update_wrapper`` on a callable object shows the wrapped function's
    signature; its hints (strings here, under ``from __future__ import annotations``) and
    docstring are read there too, not the object's ``__call__`` with each hint refused as an
    unsupported type."""
    counted = _Counted(forecast)
    made = tool(counted)
    assert made.description == "Forecast a city's weather."
    assert await execute(made, {"city": "Oslo", "days": 2}) == ("Oslo for 2", None)
    assert counted.calls == 1
