"""The ``@tool`` decorator: descriptions from docstrings of every style (R9.7)."""

from __future__ import annotations

import functools

from retinue.tools import Tool, tool
from tests.unit._tool_kit import schema_of


def search_index(index: str, query: str, limit: int = 5) -> str:
    """Search one index.

    Args:
        query: What to look for.
    """
    return f"{index}:{query}:{limit}"


def test_tool_docstring_argument_types_may_nest_parentheses() -> None:
    """R9.7: ``b (list(int)): ...`` documents ``b``; it is not a continuation of ``a``."""

    @tool
    def sum_up(a: int, b: list[int]) -> int:
        """Add.

        Args:
            a (int): first value.
            b (list(int)): second value.
        """
        return a + sum(b)

    assert schema_of(sum_up) == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "first value."},
            "b": {"type": "array", "items": {"type": "integer"}, "description": "second value."},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }


def test_tool_docstring_sections_end_the_description() -> None:
    """R9.7: only text before the first section is the description; other sections are dropped."""

    @tool
    def act(value: int) -> int:
        """Do the thing.

        Raises:
            ValueError: never.

        Args:
            value: The value.
        """
        return value

    assert act.description == "Do the thing."
    assert schema_of(act) == {
        "type": "object",
        "properties": {"value": {"type": "integer", "description": "The value."}},
        "required": ["value"],
        "additionalProperties": False,
    }


class WebSearch:
    """A search service."""

    async def __call__(self, query: str) -> str:
        """Search the web.

        Args:
            query: What to look for.
        """
        return query


class Undocumented:
    """Look things up."""

    async def __call__(self, query: str) -> str:
        return query


def test_a_callable_object_is_documented_by_its_call_method_else_its_class() -> None:
    """R9.7: an instance's ``__call__`` docstring gives the description and the parameter
    descriptions, as a function's does; without one, the class docstring describes it.
    """
    search = tool(name="search")(WebSearch())
    assert search.description == "Search the web."
    assert _documented_properties(search) == {"query": "What to look for."}
    assert tool(name="lookup")(Undocumented()).description == "Look things up."


def _documented_properties(fn: Tool) -> dict[str, str]:
    schema = schema_of(fn)
    assert isinstance(schema, dict)
    properties = schema["properties"]
    assert isinstance(properties, dict)
    return {name: str(spec.get("description")) for name, spec in properties.items()}


def test_tool_numpy_docstring_documents_the_parameters() -> None:
    """R9.7: a NumPy docstring's underlined sections end the description and its
    ``Parameters`` entries (``name : type`` over indented text) describe the arguments.
    """

    @tool
    def weather(city: str, days: int = 3, hours: int = 0) -> str:
        """Get the weather.

        Parameters
        ----------
        city : str
            The city name,
            as the user wrote it.
        days, hours : int
            How long ahead.

        Returns
        -------
        str
            The forecast.
        """
        return city

    assert weather.description == "Get the weather."
    assert _documented_properties(weather) == {
        "city": "The city name, as the user wrote it.",
        "days": "How long ahead.",
        "hours": "How long ahead.",
    }


def test_tool_google_args_below_an_underlined_heading_still_document_the_parameters() -> None:
    """R9.7: a Markdown heading (a line underlined with dashes) above a Google ``Args:``
    section does not hide its entries, and Google's ``Other Parameters:`` documents too.
    """

    @tool
    def search(query: str, limit: int = 5) -> str:
        """Search the knowledge base.

        Ranking
        -------
        Results are ranked by score.

        Args:
            query: The search query.

        Other Parameters:
            limit: How many results.
        """
        return query

    assert search.description == "Search the knowledge base."
    assert _documented_properties(search) == {
        "query": "The search query.",
        "limit": "How many results.",
    }


def test_tool_sphinx_docstring_documents_the_parameters() -> None:
    """R9.7: Sphinx ``:param name:`` fields (typed or not) describe the arguments and
    no field reaches the description.
    """

    @tool
    def weather(city: str, days: int = 3) -> str:
        """Get the weather.

        :param city: The city name,
            as the user wrote it.
        :param int days: How many days.
        :returns: the forecast
        """
        return city

    assert weather.description == "Get the weather."
    assert _documented_properties(weather) == {
        "city": "The city name, as the user wrote it.",
        "days": "How many days.",
    }


def test_a_partial_takes_its_hints_and_docstring_from_the_wrapped_function() -> None:
    """R9.7: ``functools.partial`` (nested too) of a function with string annotations reads
    the function's hints and docstring; the partial's signature decides the parameters, less
    the keywords it binds.
    """
    docs = tool(name="search_docs")(functools.partial(search_index, "docs"))
    short = tool(name="search_short")(functools.partial(docs.fn, limit=2))
    assert docs.description == "Search one index."
    assert schema_of(docs) == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "default": 5},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert list(schema_of(short)["properties"]) == ["query"]  # type: ignore[index]
    assert short.fn(query="q") == "docs:q:2"


def test_an_args_section_on_the_docstrings_first_line_documents_the_parameters() -> None:
    """R9.7: a docstring opening with ``Args:`` on its first line, no summary above it,
    describes its parameters as one below a summary does, though ``inspect.cleandoc`` leaves
    its entries at the level of the header: no description is lost."""

    @tool
    def pick(city: str, days: int = 3) -> str:
        """Args:
        city: The city name,
            as the user wrote it.
        days: How many days.
        """
        return city

    assert pick.description == ""
    assert _documented_properties(pick) == {
        "city": "The city name, as the user wrote it.",
        "days": "How many days.",
    }


def test_an_args_section_on_the_first_line_ends_at_a_paragraph_below_it() -> None:
    """R9.7: after an ``Args:`` on the first line, a paragraph at the entries' level below
    a blank line is no part of the last entry, so it is not sent to the model as what the
    parameter means. It is the tool's description."""

    @tool
    def forecast(city: str, days: int) -> str:
        """Args:
        city: the city to look up.
        days: how many days ahead.

        Looks the forecast up on the national weather service.
        """
        return city

    assert _documented_properties(forecast) == {
        "city": "the city to look up.",
        "days": "how many days ahead.",
    }
    # With no summary above the entries, the paragraph below them describes the tool.
    assert forecast.description == "Looks the forecast up on the national weather service."


def test_a_paragraph_below_a_returns_section_on_the_first_line_is_no_description() -> None:
    """R9.7: only a paragraph below an arguments section that opens the docstring is taken
    as the description; one below ``Returns:`` belongs to what it returns."""

    @tool
    def forecast(city: str) -> str:
        """Returns:
        the forecast.

        Raises ValueError for an unknown city.
        """
        return city

    assert forecast.description == ""


def test_an_args_section_on_the_first_line_ends_at_the_next_section() -> None:
    """R9.7: after an ``Args:`` on the first line, entries at the header's level stop at the
    next section: its text documents no parameter."""

    @tool
    def pick(city: str) -> str:
        """Args:
            city: The city name.
        Returns:
            forecast: not a parameter.
        """
        return city

    assert _documented_properties(pick) == {"city": "The city name."}
