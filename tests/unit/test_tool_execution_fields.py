"""What a ToolExecution refuses when built: a field of the wrong type, named (R9.1)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from retinue.tools import ToolExecution


class _Name(str):
    """A str subclass: a str as any check of ``isinstance`` has it."""

    __slots__ = ()


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("call_id", 7, "a str"),
        ("name", b"echo", "a str"),
        ("token", 3.5, "a str"),
        ("agent_id", 3, "a str or None"),
        ("raw_arguments", {"text": "x"}, "a str or None"),
    ],
)
def test_a_tool_execution_refuses_a_field_of_the_wrong_type_naming_it(
    field: str, value: Any, expected: str
) -> None:
    """R9.1: a field of the wrong type is refused when the execution is built, by its
    constructor or ``attrs.evolve`` alike, naming the field, rather than kept to fail far
    away (a call id of 7 when the call's result is logged, as ``ToolResultEvent.call_id``)."""
    fields: dict[str, Any] = {"call_id": "c1", "name": "echo", "arguments": {}}
    message = f"ToolExecution.{field} must be {expected}, got {value!r}"
    with pytest.raises(TypeError, match=f"^{message}$"):
        ToolExecution(**{**fields, field: value})
    with pytest.raises(TypeError, match=f"^{message}$"):
        attrs.evolve(ToolExecution(**fields), **{field: value})


def test_a_tool_execution_takes_a_str_subclass_and_no_optional_fields() -> None:
    """R9.1: a str subclass is a str, the optional fields may be None, and a token not given
    is a fresh one, different for each execution."""
    first = ToolExecution(_Name("c1"), _Name("echo"), {}, agent_id=None, raw_arguments=None)
    second = attrs.evolve(first, call_id="c2", token=None)
    assert (first.call_id, first.name, first.agent_id) == ("c1", "echo", None)
    assert attrs.evolve(first, name="other").token == first.token
    assert first.token != second.token
