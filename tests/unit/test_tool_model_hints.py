"""A class describing itself (pydantic's ``model_json_schema``) as a ``@tool`` hint (R9.7).

``@tool`` reads no model's own schema: the refusal says to build the tool with that
schema in its parameters' schema by hand. pydantic is not a dependency: the class here only has the classmethod.
"""

from __future__ import annotations

from typing import Any

import pytest

from retinue.tools import Tool, tool
from tests.unit._tool_kit import execute


class Query:
    """A stand-in for a pydantic model: its fields, and the schema it writes of them."""

    def __init__(self, text: str, limit: int = 10) -> None:
        self.text, self.limit = text, limit

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"text": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["text"],
            "title": "Query",
        }


def _search(query: Query) -> str:
    return query.text


def _search_all(queries: list[Query | None]) -> str:
    return ""


ADVICE = (
    "@tool does not read a model's own schema (model_json_schema): build "
    "Tool(name, description, parameters, fn), its parameters' schema holding "
    "Query.model_json_schema() where the signature holds Query, and fn making the Query "
    "from the arguments"
)


@pytest.mark.parametrize(
    ("body", "where"), [(_search, "_search(query)"), (_search_all, "_search_all(queries)[]")]
)
def test_a_model_hint_is_refused_saying_how_to_build_the_tool(body: Any, where: str) -> None:
    """R9.7: a parameter hinted by a class with ``model_json_schema``, itself or inside
    another type, is refused naming the way to a tool taking it: ``Tool`` built from its
    schema, not an unsupported type alone."""
    with pytest.raises(TypeError) as refused:
        tool(body)
    assert str(refused.value) == (
        f"{where}: unsupported type {Query!r} in a tool signature: {ADVICE}"
    )


class Plain:
    """A class with no schema of its own."""


def _plain(plain: Plain) -> str:
    return ""


def test_another_class_is_refused_as_before() -> None:
    """R9.7: a class with no schema of its own is told only that its type is unsupported."""
    with pytest.raises(TypeError) as refused:
        tool(_plain)
    assert str(refused.value) == f"_plain(plain): unsupported type {Plain!r} in a tool signature"


async def test_the_tool_the_refusal_names_takes_the_models_fields() -> None:
    """R9.7: the tool the refusal describes is built, checks its arguments against the
    model's schema and gives the body the model."""
    search = Tool(
        "search",
        "Search.",
        Query.model_json_schema(),
        lambda **fields: _search(Query(**fields)),
    )
    assert await execute(search, {"text": "trio"}) == ("trio", None)
    text, error = await execute(search, {"limit": 3})
    assert error is not None
    assert error.code == "INVALID_ARGUMENTS"
    assert text == 'Error: invalid arguments for tool "search": text: missing required property'
