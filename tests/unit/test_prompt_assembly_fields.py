"""An assembly refuses fields it cannot read, naming the field (R7.51)."""

from __future__ import annotations

from typing import Any

import pytest

from retinue.prompt import Assembly, Section


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        (([], [], None), "Assembly.variables must be a mapping of name to text, got NoneType"),
        (([], [], "ab"), "Assembly.variables must be a mapping of name to text, got str"),
        (([], [], 3), "Assembly.variables must be a mapping of name to text, got int"),
        ((Section("s", "t"), [], {}), "Assembly.sections must be Sections, got Section"),
        (("You are terse.", [], {}), "Assembly.sections must be Sections, got str"),
        (([], None, {}), "Assembly.tools must be tool schemas, got NoneType"),
    ],
    ids=["variables None", "variables str", "variables int", "one section", "text", "tools None"],
)
def test_an_assembly_field_it_cannot_read_is_refused_naming_the_field(
    fields: tuple[Any, Any, Any], problem: str
) -> None:
    """R7.51: a listener's ``attrs.evolve(assembly, variables=None)`` raises a TypeError naming the
    field, not "'NoneType' object is not iterable" (nor, for a str's variables, a ValueError about a
    dictionary update sequence; a str as sections is not one section per character)."""
    with pytest.raises(TypeError) as refused:
        Assembly(*fields)
    assert str(refused.value) == problem


def test_an_assembly_takes_variables_as_dict_copies_a_mapping() -> None:
    """R7.51: an object with ``keys()`` and ``[]`` is copied as ``dict()`` copies it."""

    class Keyed:
        def keys(self) -> list[str]:
            return ["who"]

        def __getitem__(self, name: str) -> str:
            return "Ada"

    sections = [Section("persona", "Hi {{who}}")]
    assert Assembly(sections, [], Keyed()).render() == "Hi Ada"  # type: ignore[arg-type]
