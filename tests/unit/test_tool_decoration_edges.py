"""Edges of ``@tool`` decoration: methods, docstring roles, argument names, null defaults (R9.7)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import attrs
import pytest
import trio
import trio.testing

from retinue._lossless import freeze_json, thaw_json
from retinue.session import ToolErrorInfo
from retinue.tools import Tool, tool
from tests.unit._tool_kit import execute, properties


def _logged(fn: Callable[..., object]) -> Callable[..., object]:
    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> object:
        return fn(*args, **kwargs)

    return wrapper


class Station:
    """A service whose methods may become tools once bound."""

    def __init__(self, key: str) -> None:
        self.key = key

    async def reading(self, sensor: str) -> str:
        """Read a sensor."""
        await trio.lowlevel.checkpoint()
        return f"{sensor} read with {self.key}"

    @staticmethod
    def convert(celsius: float) -> float:
        """Convert to Fahrenheit."""
        return celsius * 9 / 5 + 32

    async def __call__(self, sensor: str) -> str:
        return await self.reading(sensor)


# -- a method's instance is never the model's to supply ------------------------------------


def _in_class_body() -> object:
    class WeatherService:
        @tool
        def forecast(self, city: str) -> str:
            """Forecast for a city."""
            return city

    return WeatherService


def _wrapped_in_class_body() -> object:
    class WeatherService:
        @tool
        @_logged
        def forecast(self, city: str) -> str:
            """Forecast for a city."""
            return city

    return WeatherService


def _class_method_in_class_body() -> object:
    class WeatherService:
        @classmethod
        @tool
        def forecast(cls, city: str) -> str:
            """Forecast for a city."""
            return city

    return WeatherService


def _taken_from_a_local_class() -> object:
    class WeatherService:
        def forecast(self, city: str) -> str:
            """Forecast for a city."""
            return city

    return tool(WeatherService.forecast)


@pytest.mark.parametrize(
    ("decorate", "slot", "name"),
    [
        pytest.param(_in_class_body, "self", "forecast", id="@tool in the class body"),
        pytest.param(_wrapped_in_class_body, "self", "forecast", id="over a wraps wrapper"),
        pytest.param(_class_method_in_class_body, "cls", "forecast", id="under @classmethod"),
        pytest.param(_taken_from_a_local_class, "self", "forecast", id="from a local class"),
        pytest.param(lambda: tool(Station.reading), "self", "reading", id="from its class"),
        pytest.param(
            lambda: tool(name="r")(functools.partial(Station.reading, sensor="t1")),
            "self",
            "reading",
            id="partial leaving the instance open",
        ),
    ],
)
def test_a_method_whose_instance_the_model_would_supply_is_refused(
    decorate: Callable[[], object], slot: str, name: str
) -> None:
    """R9.7: a function defined in a class body, taken unbound, would advertise its ``self``
    as a property the model fills (and could forge): refused at decoration with a TypeError
    that says to decorate the bound method instead.
    """
    with pytest.raises(TypeError) as refused:
        decorate()
    message = str(refused.value)
    assert f"is a method: its {slot!r} would be an argument the model supplies" in message
    assert f"decorate the bound method instead (tool(instance.{name}))" in message


def _static_in_class_body() -> list[Tool]:
    class Units:
        @tool
        @staticmethod
        def above(celsius: float) -> float:
            """Convert to Fahrenheit."""
            return celsius * 9 / 5 + 32

        @staticmethod
        @tool
        def below(celsius: float) -> float:
            """Convert to Fahrenheit."""
            return celsius * 9 / 5 + 32

    return [Units.above, Units.below]


def test_static_methods_stay_tools() -> None:
    """R9.7: a static method has no instance to forge: ``@tool`` above or below
    ``@staticmethod``, or on one taken from its class, gives the plain schema.
    """
    schema = {
        "type": "object",
        "properties": {"celsius": {"type": "number"}},
        "required": ["celsius"],
        "additionalProperties": False,
    }
    for definition in [*_static_in_class_body(), tool(Station.convert)]:
        assert thaw_json(definition.parameters) == schema


def test_a_tool_decorated_again_is_refused_saying_it_already_is_one() -> None:
    """R9.7: ``@tool`` stacked on a Tool says so, not that a Tool is no callable object."""

    def forecast(city: str) -> str:
        return city

    made = tool(timeout=5)(forecast)
    with pytest.raises(TypeError) as raised:
        tool(made)  # type: ignore[call-overload]  # the misuse a checker catches, at run time
    assert str(raised.value) == (
        "tool 'forecast' is already a Tool: apply @tool once, with all its options"
    )


def test_a_tool_name_that_is_no_str_is_refused_naming_it() -> None:
    """R9.7: ``name=`` given a value that is no str is refused as such, showing the value,
    not as a function without a ``__name__`` told to pass the ``name=`` it was passed."""

    def forecast(city: str) -> str:
        return city

    with pytest.raises(TypeError) as raised:
        tool(name=5)(forecast)  # type: ignore[call-overload]  # the misuse a checker catches
    assert str(raised.value) == "tool name must be a str, got 5"


def test_a_callable_without_a_signature_is_refused_as_a_type_error() -> None:
    """R9.7: a builtin that does not say what it takes (``dict``) is a TypeError naming it,
    not inspect's bare ValueError."""
    with pytest.raises(TypeError, match=r"^dict: no signature to read its parameters from"):
        tool(dict)


def test_a_class_method_under_tool_is_refused_naming_the_tool_bound_to_its_class() -> None:
    """R9.7: ``@tool`` above ``@classmethod`` gets a class method object, whose class does
    not exist yet: refused with a TypeError that names it and says how to make the tool.
    """
    with pytest.raises(TypeError) as refused:

        class Forecasts:
            @tool
            @classmethod
            def forecast(cls, city: str) -> str:
                """Forecast for a city."""
                return city

    assert str(refused.value) == (
        "test_a_class_method_under_tool_is_refused_naming_the_tool_bound_to_its_class."
        "<locals>.Forecasts.forecast is a class method: in its class body there is no class "
        "yet to bind its first parameter to; make it a tool after the class body, bound to "
        "its class (tool(Forecasts.forecast))"
    )


async def test_a_class_method_bound_to_its_class_is_a_tool(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.7: the remedy the refusal names works: ``tool(TheClass.method)`` after the class
    body runs the class method on its class, which the model neither sees nor supplies.
    """

    class Forecasts:
        region = "north"

        @classmethod
        async def forecast(cls, city: str) -> str:
            """Forecast for a city."""
            await trio.lowlevel.checkpoint()
            return f"{city} in the {cls.region}"

    forecast = tool(Forecasts.forecast)
    assert list(properties(forecast)) == ["city"]
    assert await execute(forecast, {"city": "Oslo"}) == ("Oslo in the north", None)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda s: tool(s.reading), id="bound method"),
        pytest.param(lambda s: tool(_logged(s.reading)), id="wrapper of a bound method"),
        pytest.param(
            lambda s: tool(name="reading")(functools.partial(Station.reading, s)),
            id="partial binding the instance",
        ),
        pytest.param(tool(name="reading"), id="callable instance"),
    ],
)
async def test_a_bound_method_runs_on_its_own_instance(
    autojump_clock: trio.testing.MockClock, make: Callable[[Station], Tool]
) -> None:
    """R9.7: a bound method (or a partial binding the instance, or a callable instance) is a
    tool whose body runs on its own object: the instance is neither shown nor accepted.
    """
    reading = make(Station("real-key"))
    assert list(properties(reading)) == ["sensor"]
    assert await execute(reading, {"sensor": "t1"}) == ("t1 read with real-key", None)
    text, error = await execute(reading, {"sensor": "t1", "self": {"key": "forged"}})
    assert text == 'Error: invalid arguments for tool "reading": self: unexpected property'
    assert error == ToolErrorInfo("ToolError", "INVALID_ARGUMENTS")


def test_nested_functions_stay_tools() -> None:
    """R9.7: a function defined in another function is no method, whatever its first
    parameter is called.
    """

    def outer() -> Tool:
        @tool
        def lookup(self: str) -> str:
            """Look up a name."""
            return self

        return lookup

    assert list(properties(outer())) == ["self"]


# -- a Sphinx role opening a line is text, not a field ---------------------------------------


def test_a_line_opening_with_a_sphinx_role_stays_in_the_description() -> None:
    """R9.7: a line in column 0 that opens with a role (``:class:`Forecast` helper``) is text:
    only Sphinx's fields (``:param x:``, ``:returns:``...) end the description, and any field
    ends a parameter's entry.
    """

    @tool
    def lookup(city: str) -> str:
        """Thin wrapper over the weather API.

        Unlike the raw client, this
        :class:`Forecast` helper caches results for an hour.

        :param city: The city.
        :example: ``lookup("Oslo")``
        :returns: the forecast.
        """
        return city

    assert lookup.description == (
        "Thin wrapper over the weather API.\n\n"
        "Unlike the raw client, this\n:class:`Forecast` helper caches results for an hour."
    )
    assert properties(lookup)["city"]["description"] == "The city."


def test_a_sphinx_role_does_not_hide_the_google_arguments() -> None:
    """R9.7: a role opening a line of a Google-style docstring leaves its ``Args:`` entries
    describing the parameters.
    """

    @tool
    def lookup(city: str, days: int = 1) -> str:
        """Look up the weather; see
        :func:`forecast` for the raw data.

        Args:
            city: The city.
            days: How many days.
        """
        return city

    assert lookup.description == "Look up the weather; see\n:func:`forecast` for the raw data."
    documented = properties(lookup)
    assert documented["city"]["description"] == "The city."
    assert documented["days"]["description"] == "How many days."


# -- argument names the providers accept -----------------------------------------------------


def test_a_parameter_name_providers_refuse_is_refused_at_decoration() -> None:
    """R9.7: Anthropic refuses a property name outside 1 to 64 ASCII letters, digits, ``_``,
    ``.`` or ``-`` (every request carrying the tool would fail): such a parameter is refused
    at decoration, named, with the rule.
    """

    def meteo(città: str) -> str:
        """Weather."""
        return città

    with pytest.raises(ValueError, match=r"invalid parameter name 'città'") as refused:
        tool(meteo)
    assert "1 to 64 ASCII letters, digits, '_', '.' or '-'" in str(refused.value)

    def forecast(
        days_of_forecast_wanted_counting_from_today_up_to_a_fortnight_okay: int = 1,
    ) -> str:
        """Forecast."""
        return "sunny"

    with pytest.raises(ValueError, match="invalid parameter name 'days_of_forecast_"):
        tool(forecast)


def test_a_parameter_name_at_the_limit_is_accepted() -> None:
    """R9.7: 64 ASCII characters is a valid property name; a name a partial binds is not
    advertised, so it is not held to the rule.
    """

    def forecast(
        days_of_forecast_wanted_counting_from_today_up_to_a_fortnight_ok: int, città: str
    ) -> str:
        """Forecast."""
        return città

    bound = tool(name="forecast")(functools.partial(forecast, città="Roma"))
    assert list(properties(bound)) == [
        "days_of_forecast_wanted_counting_from_today_up_to_a_fortnight_ok"
    ]


# -- a None default makes a record field nullable, as it does a parameter ---------------------


@attrs.frozen
class Filter:
    limit: int = None  # type: ignore[assignment]
    tag: str | None = None


async def test_a_record_field_defaulting_to_none_accepts_null(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R9.7: an attrs field ``x: int = None``, like a parameter, accepts the null its schema
    names as the default.
    """

    @tool
    async def search(f: Filter) -> str:
        """Search."""
        await trio.lowlevel.checkpoint()
        return repr(f)

    fields = properties(search)["f"]["properties"]
    assert fields["limit"] == {"type": ["integer", "null"], "default": None}
    assert fields["tag"] == {"type": ["string", "null"], "default": None}
    assert search.check_arguments(freeze_json({"f": {"limit": None}})) is None
    assert await execute(search, {"f": {"limit": None}}) == ("Filter(limit=None, tag=None)", None)
    assert await execute(search, {"f": {"limit": 3.0}}) == ("Filter(limit=3, tag=None)", None)


class Reading(dict[str, object]):
    """Read a meter: a class whose instances are the result."""

    def __init__(self, meter: str, digits: int = 4) -> None:
        super().__init__(meter=meter, digits=digits)


async def test_a_class_is_a_tool_described_by_its_constructor_hints() -> None:
    """R9.7: a class's parameters are its ``__init__``'s, resolved under ``from __future__
    import annotations`` as a function's are, not refused as text (the unsupported type
    ``'str'``)."""
    read = tool(Reading)
    assert properties(read) == {
        "meter": {"type": "string"},
        "digits": {"type": "integer", "default": 4},
    }
    assert read.description == "Read a meter: a class whose instances are the result."
    assert await execute(read, {"meter": "m1"}) == ('{"meter":"m1","digits":4}', None)
