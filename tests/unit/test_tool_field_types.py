"""A tool built with a name or description that is no str is refused in plain words (R9.7)."""

from __future__ import annotations

import pytest

from retinue.tools import Tool, tool

SCHEMA = {"type": "object", "properties": {}}


def _body() -> str:
    return ""


@pytest.mark.parametrize(
    ("name", "description", "message"),
    [
        (3, "Say nothing.", "Tool.name must be a str, got 3"),
        ("quiet", None, "Tool.description must be a str, got None"),
    ],
    ids=["name", "description"],
)
def test_a_name_or_description_that_is_no_str_is_refused_naming_the_field(
    name: object, description: object, message: str
) -> None:
    """R9.7: the TypeError says which field and what it got, not the tuple of attrs'
    internals (the field's Attribute, its validator and the expected class).
    """
    with pytest.raises(TypeError) as refused:
        Tool(name, description, SCHEMA, _body)  # type: ignore[arg-type]
    assert str(refused.value) == message


def test_the_decorator_refuses_a_description_that_is_no_str_alike() -> None:
    """R9.7: ``@tool(description=...)`` passes the value to Tool, which names the field."""
    with pytest.raises(TypeError) as refused:
        tool(description=["Say nothing."])(_body)  # type: ignore[call-overload]
    assert str(refused.value) == "Tool.description must be a str, got ['Say nothing.']"
