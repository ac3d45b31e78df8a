"""A hand-written schema's ``enum`` of no values is refused when the tool is built (R9.7)."""

from __future__ import annotations

import pytest

from retinue.tools import Tool


def test_an_enum_of_no_values_is_refused_naming_its_path() -> None:
    """R9.7: ``"enum": []`` lets no argument through, so every call giving the property
    would be refused, the model told to pick among no values: the tool is refused when
    built, naming the keyword's path, as ``Literal[()]`` is by ``@tool``.
    """
    schema = {"type": "object", "properties": {"unit": {"type": "string", "enum": []}}}
    with pytest.raises(
        ValueError,
        match=r"^parameters\.properties\.unit\.enum: must list at least one allowed value$",
    ):
        Tool("convert", "Convert a temperature.", schema, lambda **_: "")


def test_an_enum_of_values_is_still_built() -> None:
    """R9.7: an enum that lists a value is a schema like any other."""
    schema = {"type": "object", "properties": {"unit": {"enum": ["c"]}}}
    built = Tool("convert", "Convert a temperature.", schema, lambda **_: "")
    assert built.check_arguments({"unit": "f"}) == 'unit: must be one of "c"'
