"""A hand-written schema requiring a property it forbids is refused when built (R9.7)."""

from __future__ import annotations

import pytest

from retinue.tools import Tool


def _body(**_: object) -> str:
    return ""


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city", "units"],
                "additionalProperties": False,
            },
            (
                'parameters.required[1]: property "units" is required, but additionalProperties '
                "is false and properties does not describe it: no arguments could have it and pass"
            ),
        ),
        (
            {
                "type": "object",
                "properties": {
                    "place": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}, "zip": False},
                        "required": ["zip"],
                    }
                },
            },
            (
                'parameters.properties.place.required[0]: property "zip" is required, but its '
                "schema is false: no arguments could have it and pass"
            ),
        ),
    ],
    ids=["closed-object", "false-property"],
)
def test_a_required_property_the_object_forbids_is_refused_naming_it(
    schema: dict[str, object], message: str
) -> None:
    """R9.7: no object can hold a property that is required and forbidden both: every call
    was refused, the model told it was missing and, once given, unexpected. The tool is
    refused when built, naming the property and where it is required.
    """
    with pytest.raises(ValueError) as refused:
        Tool("weather", "The weather in a city.", schema, _body)
    assert str(refused.value) == message


def test_a_required_property_an_open_object_takes_is_still_built() -> None:
    """R9.7: without ``additionalProperties: false`` an undescribed required property may
    be given, so the schema is built as written.
    """
    schema = {"type": "object", "properties": {"city": {}}, "required": ["city", "units"]}
    built = Tool("weather", "The weather in a city.", schema, _body)
    assert built.check_arguments({"city": "Paris"}) == "units: missing required property"
    assert built.check_arguments({"city": "Paris", "units": "c"}) is None
